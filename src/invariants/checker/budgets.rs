//! `within-budgets`: the retry budgets of the configuration hold, counted
//! from durable rows by the checker: no task is started past attempt
//! `attempts_max` nor failed for spent attempts before it, and no task's work or events are re-driven more than
//! `redrive_max` times (each re-drive is a fresh outbox row; the counters
//! the reconciler keeps are what this checks, so they are not read).

use crate::world::World;
use crate::world::engine::ids::TaskId;
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
        let (work_redrives, event_redrives) = self.redrives_from_rows(task);
        for (what, count) in [("work", work_redrives), ("events", event_redrives)] {
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
        let row = self.db.task(task);
        let mut work_redrives = 0u64;
        let mut event_rows = 0u64;
        for id in &row.outbox_rows {
            let Some(outbox) = self.db.find_outbox(*id) else {
                continue;
            };
            match outbox.topic {
                Topic::TaskWork if outbox.event_type == WorkKind::TaskRedrive.as_str() => {
                    work_redrives += 1;
                }
                Topic::TaskWork => {}
                Topic::TaskEvents => event_rows += 1,
            }
        }
        (
            work_redrives,
            event_rows.saturating_sub(row.events.len() as u64),
        )
    }
}
