//! `within-budgets`: the retry budgets of the configuration hold, counted
//! by the checker, never read from the counters the protocol keeps. From
//! durable rows: no task is started past attempt `attempts_max` nor failed
//! for spent attempts before it; no task's work or events are re-driven
//! more than `redrive_max` times (each re-drive is a fresh outbox row);
//! and a retried attempt's message is not ready before `retry_backoff_ms`
//! has passed. From the trace: no worker in one delivery, nor any fence,
//! makes more than `store_calls_max` store calls of one kind (puts, hides,
//! reads that timed out).

use crate::world::World;
use crate::world::engine::ids::{ActorKind, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::db::{Topic, WorkKind};

use super::Fired;

impl World {
    pub(super) fn check_budgets(&self, task: TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        let fired = |message: String| Fired {
            invariant: "within-budgets",
            message,
            entities: vec![task.to_string()],
        };
        let attempts_max = self.config.attempts_max;
        if row.state.attempt > attempts_max as i64 {
            return Err(fired(format!(
                "{task} runs attempt {} (attempts_max = {attempts_max})",
                row.state.attempt
            )));
        }
        // And the other way: a task is failed for spent attempts only once
        // it ran its last one (a fence or a retryable failure with attempts
        // left retries it).
        if row.state.terminal_error_code.as_deref() == Some("ATTEMPTS_EXHAUSTED")
            && row.state.attempt < attempts_max as i64
        {
            return Err(fired(format!(
                "{task} failed ATTEMPTS_EXHAUSTED at attempt {} of {attempts_max}",
                row.state.attempt
            )));
        }
        let redrive_max = self.config.redrive_max;
        let rows = self.outbox_counts(task);
        if let Some(early) = rows.early_retry {
            return Err(fired(format!(
                "{task}'s retry message {} is ready at {} ms, written at {} ms (retry_backoff_ms = {})",
                early.id, early.ready_ms, early.created_ms, self.config.retry_backoff_ms
            )));
        }
        for (what, count) in [
            ("work", rows.work_redrives),
            ("events", rows.event_redrives),
        ] {
            if count > redrive_max {
                return Err(fired(format!(
                    "{task}'s {what} were re-driven {count} times (redrive_max = {redrive_max})"
                )));
            }
        }
        Ok(())
    }

    /// How many times `task`'s work and its events were re-driven, counted
    /// from its outbox rows: a re-drive of work writes a `TaskRedrive` row;
    /// each committed event writes one row on task-events and a re-drive
    /// another for an event already sent. Rows pruned after publication
    /// are not counted, which can only undercount.
    pub(super) fn redrives_from_rows(&self, task: TaskId) -> (u64, u64) {
        let rows = self.outbox_counts(task);
        (rows.work_redrives, rows.event_redrives)
    }

    /// One walk over `task`'s outbox rows for what the budgets read of
    /// them: the re-drives (see `redrives_from_rows`) and the first retry
    /// row ready before its back-off had passed (the row says when it was
    /// written and when it may be published).
    fn outbox_counts(&self, task: TaskId) -> OutboxCounts<'_> {
        let row = self.db.task(task);
        let backoff = self.config.retry_backoff_ms;
        let mut counts = OutboxCounts::default();
        let mut event_rows = 0u64;
        for id in &row.outbox_rows {
            let Some(outbox) = self.db.find_outbox(*id) else {
                continue;
            };
            match outbox.topic {
                Topic::TaskWork if outbox.event_type == WorkKind::TaskRedrive.as_str() => {
                    counts.work_redrives += 1;
                }
                Topic::TaskWork
                    if outbox.event_type == WorkKind::TaskRetry.as_str()
                        && outbox.ready_ms < outbox.created_ms + backoff =>
                {
                    counts.early_retry.get_or_insert(outbox);
                }
                Topic::TaskWork => {}
                Topic::TaskEvents => event_rows += 1,
            }
        }
        counts.event_redrives = event_rows.saturating_sub(row.events.len() as u64);
        counts
    }
}

/// What the budgets read of a task's outbox rows (`World::outbox_counts`).
#[derive(Default)]
struct OutboxCounts<'a> {
    work_redrives: u64,
    event_redrives: u64,
    early_retry: Option<&'a crate::world::stores::db::OutboxRow>,
}

/// The store calls a holder made, by kind: puts, hides, and reads that
/// timed out (a read that answers costs nothing: the budget bounds how
/// long a holder waits on a store that does not answer).
#[derive(Clone, Copy, Debug, Default, Hash)]
pub(super) struct StoreCalls {
    /// A worker's own calls in its current delivery.
    job: [u32; 3],
    /// The calls of the fence the holder runs now.
    fence: [u32; 3],
}

const CALL_KINDS: [&str; 3] = ["puts", "hides", "timed-out reads"];

impl World {
    /// Counts the store call the step's record shows, if it made one, and
    /// judges its holder's count of that kind against `store_calls_max`.
    /// Counts start at a delivery's first step (and end with its ack or
    /// nack) and at a fence's claim; a crash ends both. Counted from the
    /// trace: each such step makes at most one store call and names it by
    /// its verb and outcome. `None` when the step made no store call.
    pub(super) fn count_store_calls(&mut self) -> Option<Result<(), Fired>> {
        let record = self.trace.last()?;
        if !matches!(record.actor.kind, ActorKind::Worker | ActorKind::Reconciler)
            || self.checker.store_calls_step == Some(record.step)
        {
            return None;
        }
        self.checker.store_calls_step = Some(record.step);
        let hide = matches!(
            record.outcome,
            "timeout" | "exists" | "hidden" | "tombstoned"
        );
        let timed_out = record.outcome == "timeout";
        let (fence, kind) = match record.verb {
            Verb::Register | Verb::Ack | Verb::Nack | Verb::Crash => {
                let calls = self.checker.store_calls.entry(record.actor).or_default();
                calls.job = [0; 3];
                if record.verb == Verb::Crash {
                    calls.fence = [0; 3];
                }
                return None;
            }
            Verb::FenceClaim => {
                self.checker
                    .store_calls
                    .entry(record.actor)
                    .or_default()
                    .fence = [0; 3];
                return None;
            }
            Verb::Put if matches!(record.outcome, "ok" | "timeout") => (false, 0),
            Verb::Compensate if hide => (false, 1),
            Verb::FenceHide if hide => (true, 1),
            Verb::ReadBack | Verb::CheckHidden if timed_out => (false, 2),
            Verb::FenceRead | Verb::FenceCheck if timed_out => (true, 2),
            _ => return None,
        };
        let (actor, step) = (record.actor, record.step);
        let calls = self.checker.store_calls.entry(actor).or_default();
        let count = if fence {
            &mut calls.fence
        } else {
            &mut calls.job
        };
        count[kind] += 1;
        let made = count[kind];
        let max = self.config.store_calls_max;
        if u64::from(made) <= max {
            return Some(Ok(()));
        }
        let what = if fence { "one fence" } else { "one delivery" };
        Some(Err(Fired {
            invariant: "within-budgets",
            message: format!(
                "{actor} made {made} store {} in {what} (store_calls_max = {max}), the last at step {step}",
                CALL_KINDS[kind]
            ),
            entities: vec![actor.to_string()],
        }))
    }
}
