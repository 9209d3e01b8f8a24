//! `lifecycle-legal`: lesson 003's state table, written out again for the
//! checker. The checker's mirror folds events with `task::transition`, the
//! code under test, so a transition that accepts what the table forbids, or
//! lands in another status, would be folded the same way by both; this
//! table is the second, independent reading.

use crate::task::{EventBody, Policy, Status, TaskEvent, TaskState};

/// What the table says of `event` on a task in `before`: the status and
/// attempt it leads to, or why the table has no such row.
pub fn lesson_allows(
    before: &TaskState,
    event: &TaskEvent,
    policy: Policy,
) -> Result<(Status, i64), &'static str> {
    if event.task_id != before.task_id {
        return Err("it names another task");
    }
    if before.status.is_terminal() {
        return Err("the task is terminal");
    }
    let current = before.attempt;
    let of_current = |attempt: i64| {
        if attempt == current {
            Ok(())
        } else {
            Err("it names another attempt than the current one")
        }
    };
    use Status::*;
    match (&event.body, before.status) {
        (EventBody::TaskStarted { attempt, .. }, Queued) if *attempt == current + 1 => {
            Ok((Running, *attempt))
        }
        (EventBody::TaskStarted { .. }, Queued) => Err("a start must name the next attempt"),
        (EventBody::CancellationRequested { .. }, Queued) => Ok((Cancelled, current)),
        (EventBody::CancellationRequested { .. }, Running) => Ok((Cancelling, current)),
        (
            EventBody::TaskCompleted {
                attempt,
                artifact_verified,
                ..
            },
            Running | Cancelling,
        ) => {
            of_current(*attempt)?;
            if !artifact_verified {
                return Err("a completion needs a verified artifact");
            }
            if before.status == Cancelling && policy == Policy::CancelWins {
                return Err("under cancel-wins a pending cancellation refuses completion");
            }
            Ok((Completed, current))
        }
        (
            EventBody::AttemptFailed {
                attempt,
                next_attempt,
                ..
            },
            Running,
        ) => {
            of_current(*attempt)?;
            if *next_attempt != current + 1 {
                return Err("a failed attempt must name the next one");
            }
            Ok((Queued, current))
        }
        (EventBody::TaskFailed { attempt, .. }, Running | Cancelling) => {
            of_current(*attempt)?;
            Ok((Failed, current))
        }
        (
            EventBody::TaskCancelled {
                effects_reconciled, ..
            },
            Cancelling,
        ) => {
            if !effects_reconciled {
                return Err("a cancellation needs its effects reconciled");
            }
            Ok((Cancelled, current))
        }
        _ => Err("the table has no such transition from this status"),
    }
}
