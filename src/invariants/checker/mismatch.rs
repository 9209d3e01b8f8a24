//! `mismatch-ends-task`: an attempt whose artifact was found damaged and
//! taken back (its ledger row compensated for `ARTIFACT_HASH_MISMATCH`)
//! ends its task failed with that code, or cancelled: lesson 000's worker
//! fails the task in the transaction that records the compensation. The
//! durable state that shows the rule skipped is the task itself: completed,
//! queued for another attempt, running a later one, or failed under
//! another code, while the ledger says its artifact did not verify.

use crate::task::Status;
use crate::world::World;
use crate::world::engine::ids::TaskId;
use crate::world::stores::db::{EffectKind, EffectState};

use super::Fired;

const MISMATCH: &str = "ARTIFACT_HASH_MISMATCH";

impl World {
    pub(super) fn check_mismatch_ends_task(&self, task: TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        if row.compacted {
            return Ok(());
        }
        let state = &row.state;
        for ledger in &row.effects {
            if ledger.token.kind != EffectKind::Artifact
                || ledger.state != EffectState::Compensated
                || ledger.error_code != Some(MISMATCH)
            {
                continue;
            }
            let attempt = i64::from(ledger.token.attempt);
            let ends_it = state.attempt == attempt
                && match state.status {
                    // Still open: a fence that met a conflict claims again.
                    Status::Running | Status::Cancelling | Status::Cancelled => true,
                    Status::Failed => state.terminal_error_code.as_deref() == Some(MISMATCH),
                    Status::Queued | Status::Completed => false,
                };
            if !ends_it {
                return Err(Fired {
                    invariant: "mismatch-ends-task",
                    message: format!(
                        "{task}'s ledger compensated {} for {MISMATCH}, but the task is {} at attempt {}{}",
                        ledger.token,
                        state.status.as_str(),
                        state.attempt,
                        state
                            .terminal_error_code
                            .as_deref()
                            .map_or_else(String::new, |code| format!(" ({code})"))
                    ),
                    entities: vec![task.to_string(), ledger.token.to_string()],
                });
            }
        }
        Ok(())
    }
}
