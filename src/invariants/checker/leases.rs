//! The lease checks, of a task's attempt lease, an inbox row's processing
//! lease and a publisher's claim on an outbox row: `lease-never-taken-live`
//! (a lease passes to another holder only once it ran out),
//! `lease-bounded` (no longer than its term from the step that wrote it),
//! and for a task's lease
//! `lease-on-live-attempt`, `review-stops-automation` and
//! `running-task-leased`.

use crate::task::Status;
use crate::world::engine::ids::{ActorKind, OutboxId, TaskId};
use crate::world::stores::db::{InboxLease, Lease};
use crate::world::{ClaimWrite, World};

use super::Fired;

impl World {
    /// A task's lease. lease-bounded: no longer than its term.
    /// lease-on-live-attempt: a lease is only for the
    /// current attempt of a live task. review-stops-automation: a fence
    /// never claims a task that waits for a human. lease-never-taken-live:
    /// a task's lease goes to another holder (or another incarnation of the
    /// same one) only once it ran out. Renewing one's own lease is fine;
    /// taking a live one lets two attempts run.
    pub(super) fn check_lease(
        &mut self,
        task: TaskId,
        replaced: Option<Lease>,
    ) -> Result<(), Fired> {
        let row = self.db.task(task);
        let Some(new) = row.lease else {
            return self.check_running_leased(task);
        };
        if new.until_ms > self.now + self.config.task_lease_ms {
            return Err(Fired {
                invariant: "lease-bounded",
                message: format!(
                    "{} holds {task}'s lease on attempt {} until {} ms, granted at {} ms for more than task_lease_ms = {}",
                    new.holder, new.attempt, new.until_ms, self.now, self.config.task_lease_ms
                ),
                entities: vec![task.to_string()],
            });
        }
        let state = &row.state;
        if state.status.is_terminal() || i64::from(new.attempt) != state.attempt {
            return Err(Fired {
                invariant: "lease-on-live-attempt",
                message: format!(
                    "{} took {task}'s lease on attempt {} at {} ms, where the task is {} on attempt {}",
                    new.holder,
                    new.attempt,
                    self.now,
                    state.status.as_str(),
                    state.attempt
                ),
                entities: vec![task.to_string()],
            });
        }
        if new.holder.kind == ActorKind::Reconciler && self.waits_for_a_human(task) {
            return Err(Fired {
                invariant: "review-stops-automation",
                message: format!(
                    "a fence claimed {task}'s attempt {} at {} ms while the task waits in manual review for a human",
                    new.attempt, self.now
                ),
                entities: vec![task.to_string()],
            });
        }
        let Some(old) = replaced else {
            return Ok(());
        };
        let same_holder = (old.holder, old.incarnation) == (new.holder, new.incarnation);
        if same_holder || old.until_ms <= self.now {
            return Ok(());
        }
        Err(Fired {
            invariant: "lease-never-taken-live",
            message: format!(
                "{task}'s lease on attempt {} held by {} until {} ms went to {} (attempt {}) at {} ms",
                old.attempt, old.holder, old.until_ms, new.holder, new.attempt, self.now
            ),
            entities: vec![task.to_string()],
        })
    }

    /// running-task-leased, for a lease just dropped: a lease goes only
    /// once its task stops running (or cancelling), or when a human owns
    /// the task. The lease index is how the reconciler finds an attempt
    /// whose worker is gone; a running task whose lease was dropped is one
    /// nobody would ever fence, waiting for a redelivery that may never
    /// come. (A task an outside producer started never had a lease of
    /// ours: not judged.)
    fn check_running_leased(&mut self, task: TaskId) -> Result<(), Fired> {
        let state = &self.db.task(task).state;
        let (status, attempt) = (state.status, state.attempt);
        let running = matches!(status, Status::Running | Status::Cancelling);
        if !running || self.waits_for_a_human(task) {
            return Ok(());
        }
        Err(Fired {
            invariant: "running-task-leased",
            message: format!(
                "{task} is {} on attempt {attempt} at {} ms with no lease and no review that stops automation",
                status.as_str(),
                self.now
            ),
            entities: vec![task.to_string()],
        })
    }

    /// An inbox row's lease: lease-bounded and lease-never-taken-live.
    pub(super) fn check_inbox_lease(
        &self,
        message: OutboxId,
        replaced: Option<InboxLease>,
    ) -> Result<(), Fired> {
        let Some(lease) = self.db.inbox.get(message).and_then(|row| row.lease) else {
            return Ok(());
        };
        let InboxLease {
            holder,
            incarnation,
            until_ms: until,
        } = lease;
        let term = self.config.inbox_lease_ms;
        if until > self.now + term {
            return Err(Fired {
                invariant: "lease-bounded",
                message: format!(
                    "{holder} holds the inbox row of {message} until {until} ms, granted at {} ms for more than inbox_lease_ms = {term}",
                    self.now
                ),
                entities: vec![message.to_string()],
            });
        }
        let Some(old) = replaced.filter(|old| old.held_by_other(self.now, holder, incarnation))
        else {
            return Ok(());
        };
        let (old_holder, old_incarnation, old_until) = (old.holder, old.incarnation, old.until_ms);
        Err(Fired {
            invariant: "lease-never-taken-live",
            message: format!(
                "the inbox row of {message}, held by {old_holder} (incarnation {old_incarnation}) until {old_until} ms, went to {holder} (incarnation {incarnation}) at {} ms",
                self.now
            ),
            entities: vec![message.to_string()],
        })
    }

    /// A publisher's claim on an outbox row. lease-bounded: no longer than
    /// publish_lease_ms. lease-never-taken-live: a publisher takes or
    /// releases a claim only once another's ran out (or its own): one
    /// that clears a live claim of another publisher sends the row out
    /// again while that one still works on it.
    pub(super) fn check_claim(&self, claim: ClaimWrite) -> Result<(), Fired> {
        let ClaimWrite {
            message,
            replaced,
            writer,
            incarnation,
        } = claim;
        let Some(row) = self.db.find_outbox(message) else {
            return Ok(());
        };
        let term = self.config.publish_lease_ms;
        if let Some((holder, _, until)) = row.lease
            && until > self.now + term
        {
            return Err(Fired {
                invariant: "lease-bounded",
                message: format!(
                    "{holder} claims {message} until {until} ms, claimed at {} ms for more than publish_lease_ms = {term}",
                    self.now
                ),
                entities: vec![message.to_string()],
            });
        }
        let Some((old_holder, old_incarnation, old_until)) =
            replaced.filter(|&(holder, inc, until)| {
                until > self.now && (holder, inc) != (writer, incarnation)
            })
        else {
            return Ok(());
        };
        let what = if row.lease.is_some() {
            "was claimed by"
        } else {
            "was released by"
        };
        Err(Fired {
            invariant: "lease-never-taken-live",
            message: format!(
                "{message}, claimed by {old_holder} (incarnation {old_incarnation}) until {old_until} ms, {what} {writer} (incarnation {incarnation}) at {} ms",
                self.now
            ),
            entities: vec![message.to_string()],
        })
    }
}
