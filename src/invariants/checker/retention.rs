//! `retained-until-settled`: an idempotency record expires, and a task is
//! compacted (its events, outbox rows and ledger dropped), only once the
//! task is settled: terminal, every message of it published, every effect
//! with its outcome, and nothing in flight carrying it. Read by the
//! checker's own rule, not by the reconciler's `task_finished` and guard,
//! which are what it checks.

use crate::world::engine::ids::TaskId;
use crate::world::stores::db::{Db, EffectState};
use crate::world::stores::store::Store;

use super::Fired;
use super::call_about::call_about;

/// Why `task` is not settled, or `None` when it is.
pub fn unsettled(db: &Db, task: TaskId) -> Option<String> {
    let row = db.find_task(task)?;
    if row.compacted {
        return None;
    }
    if !row.state.status.is_terminal() {
        return Some(format!("{task} is {}", row.state.status.as_str()));
    }
    for id in &row.outbox_rows {
        match db.find_outbox(*id) {
            None => return Some(format!("{task}'s {id} is gone unpublished")),
            Some(outbox) if outbox.published_ms.is_none() => {
                return Some(format!("{task}'s {id} is not published"));
            }
            Some(_) => {}
        }
    }
    for effect in &row.effects {
        // Only an outcome settles an effect: verified, compensated or
        // failed. Planned, started, unknown and completed-unverified wait
        // for the worker or the reconciler; a required compensation waits
        // for its own effect.
        let open = !matches!(
            effect.state,
            EffectState::Verified | EffectState::Compensated | EffectState::Failed
        );
        if open {
            return Some(format!(
                "{task}'s effect {} is {}",
                effect.token,
                effect.state.as_str()
            ));
        }
    }
    None
}

/// Records what compacting `task` would drop unsettled, and what the
/// artifact store answers for each of its effects' tokens; the step's
/// checks report the first and compare the second with what the store
/// answers once the task's objects are archived (the rows are gone by
/// then).
impl super::Checker {
    pub fn note_compaction(
        &mut self,
        db: &Db,
        store: &Store,
        task: TaskId,
        carried: Option<String>,
    ) {
        if let Some(why) = unsettled(db, task).or(carried) {
            self.compacted_unsettled.push((task, why));
        }
        for effect in &db.task(task).effects {
            let token = effect.token;
            self.compacted_objects
                .push((task, token, store.observe(token)));
        }
    }
}

impl crate::world::World {
    /// `compaction-keeps-objects`: compacting a task changes nothing the
    /// store answers for its tokens (present with the same version and
    /// visibility, a tombstone, or absent), and the answer comes from the
    /// archive: an object left among the live ones would answer for a
    /// lost or empty archived copy (and keep its memory for the run).
    pub(super) fn check_compacted_objects(&mut self) -> Result<(), Fired> {
        while let Some((task, token, before)) = self.checker.compacted_objects.pop() {
            let why = if self.store.get(token).is_some() {
                format!("its object under {token} is still among the live ones, not archived")
            } else {
                let after = self.store.observe(token);
                if after == before {
                    continue;
                }
                format!("the store now answers {after:?} for {token}, where it answered {before:?}")
            };
            self.checker.compacted_objects.clear();
            return Err(Fired {
                invariant: "compaction-keeps-objects",
                message: format!("{task} was compacted and {why}"),
                entities: vec![task.to_string(), token.to_string()],
            });
        }
        Ok(())
    }
}

impl crate::world::World {
    /// What in flight still carries `task`, by the checker's own look at
    /// the actors (not the reconciler's guard, which is what it checks;
    /// the API calls through `Calls`' count by `call_about`): a
    /// worker's job or a delivery in its mailbox, the projector's current
    /// delivery or one in its mailbox, an API call about the task, a
    /// publisher's claimed batch with one of its rows. Any of them would
    /// write rows for the task after its rows were dropped. The broker's
    /// entries are left to `converges`, which finds what their deliveries
    /// leave behind.
    pub fn carried_by(&self, task: TaskId) -> Option<String> {
        use crate::world::engine::ids::{ActorId, ActorKind};
        let actor = |kind, index: usize| ActorId::new(kind, index as u16);
        for (index, worker) in self.workers.iter().enumerate() {
            let job = worker.job.as_ref().is_some_and(|job| job.task == task);
            let queued = worker.mailbox.iter().any(|(_, _, d)| d.task == task);
            if job || queued {
                let what = if job {
                    "a job"
                } else {
                    "a delivery in its mailbox"
                };
                return Some(format!(
                    "{} held {what} of it",
                    actor(ActorKind::Worker, index)
                ));
            }
        }
        let projector = &self.projector;
        if projector.current.as_ref().is_some_and(|d| d.task == task)
            || projector.mailbox.iter().any(|(_, _, d)| d.task == task)
        {
            return Some("the projector held a delivery of it".to_string());
        }
        // Counted by `call_about`, not `Call::task_held`, which the
        // reconciler's guard asks; the walk only names the call found.
        if self.calls.about_task(task) {
            let call = self
                .calls
                .values()
                .find(|call| call_about(call) == Some(task))
                .expect("a call counted about the task is in flight");
            return Some(format!("an API call ({:?}) held it", call.phase));
        }
        let rows = &self.db.task(task).outbox_rows;
        for (index, publisher) in self.publishers.iter().enumerate() {
            let busy = !matches!(
                publisher.phase,
                crate::world::actors::publisher::PublisherPhase::Idle
            );
            if let Some(id) = publisher.claimed.iter().find(|id| rows.contains(id))
                && busy
            {
                return Some(format!(
                    "{} had {id} in its claimed batch",
                    actor(ActorKind::Publisher, index)
                ));
            }
        }
        None
    }
}
