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

/// The table's other column: a task names a worker and a lease deadline
/// while an attempt holds it (running, or cancelling with the attempt
/// still out), and no one in any other status. A start sets them, a
/// cancellation request keeps them, and every way out of the attempt
/// clears them. Why the state after an event breaks that, if it does.
pub fn holder_misfit(after: &TaskState) -> Option<String> {
    let held = matches!(after.status, Status::Running | Status::Cancelling);
    let (worker, lease) = (
        after.worker_id.is_some(),
        after.lease_until_epoch_ms.is_some(),
    );
    if worker == held && lease == held {
        return None;
    }
    let named = match (worker, lease) {
        (true, true) => "a worker and a lease deadline",
        (true, false) => "a worker but no lease deadline",
        (false, true) => "a lease deadline but no worker",
        (false, false) => "no worker and no lease deadline",
    };
    Some(format!(
        "it leaves a {} task naming {named}",
        after.status.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::holder_misfit;
    use crate::task::{Status, Text, initial_state};

    #[test]
    fn only_an_attempt_in_hand_names_its_holder() {
        let mut state = initial_state(Text::from("task-1"));
        assert_eq!(holder_misfit(&state), None, "queued, no one holds it");
        state.status = Status::Running;
        assert!(holder_misfit(&state).is_some(), "running with no holder");
        state.worker_id = Some(Text::from("worker-1"));
        state.lease_until_epoch_ms = Some(1_500);
        assert_eq!(holder_misfit(&state), None);
        state.status = Status::Cancelling;
        assert_eq!(holder_misfit(&state), None, "a cancellation keeps it");
        // A completion that cleared the worker but kept the deadline.
        state.status = Status::Completed;
        state.worker_id = None;
        assert_eq!(
            holder_misfit(&state).as_deref(),
            Some("it leaves a completed task naming a lease deadline but no worker")
        );
    }
}
