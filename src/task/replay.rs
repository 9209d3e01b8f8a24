//! Replay: folding an event history with the same `transition` that accepted
//! it, and the invalid-history report when the history cannot be folded.
//!
//! Stricter than lesson 003's `replay` (DESIGN §9): an event id seen again
//! with the same payload hash is skipped, but with a different payload it is
//! a protocol break and stops the replay, instead of being skipped silently.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;

use crate::task::json::event_payload_sha256;
use crate::task::transition::initial_state;
use crate::task::{Policy, RejectReason, TaskEvent, TaskState, Text, Transition, transition};

/// Why a history could not be folded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplayFailure {
    /// The transition refused the event.
    Rejected(RejectReason),
    /// The event id was seen before with another payload.
    EventIdPayloadConflict,
}

impl ReplayFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayFailure::Rejected(reason) => reason.as_str(),
            ReplayFailure::EventIdPayloadConflict => "EVENT_ID_PAYLOAD_CONFLICT",
        }
    }
}

/// The first event that could not be applied, and the state just before it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InvalidHistory {
    pub event_id: Text,
    pub sequence: i64,
    pub reason: ReplayFailure,
    pub state_before: TaskState,
}

impl fmt::Display for InvalidHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid history at event {} (sequence {}): {}",
            self.event_id,
            self.sequence,
            self.reason.as_str()
        )
    }
}

impl std::error::Error for InvalidHistory {}

// `result_large_err`: the error holds a whole `TaskState`, as the success
// does; boxing it would not make the `Result` smaller, only add an allocation.

/// Folds `events`, in sequence order, onto `start`. The sort is stable, so
/// two events with one sequence keep their given order; the second is then
/// a duplicate (skipped), a payload conflict, or an old sequence (rejected).
#[allow(clippy::result_large_err)]
pub fn fold<'a>(
    start: TaskState,
    events: impl IntoIterator<Item = &'a TaskEvent>,
    policy: Policy,
) -> Result<TaskState, InvalidHistory> {
    let mut ordered: Vec<&TaskEvent> = events.into_iter().collect();
    ordered.sort_by_key(|event| event.sequence);
    // The first event of each id. Payload hashes are computed only when an id
    // repeats: a clean history, the common case, hashes nothing.
    let mut first_by_id: BTreeMap<&str, &TaskEvent> = BTreeMap::new();
    let mut state = start;
    for event in ordered {
        match first_by_id.entry(&event.event_id) {
            Entry::Occupied(first) => {
                if event_payload_sha256(first.get()) == event_payload_sha256(event) {
                    continue;
                }
                return Err(invalid(event, ReplayFailure::EventIdPayloadConflict, state));
            }
            Entry::Vacant(slot) => {
                slot.insert(event);
            }
        }
        match transition(&state, event, policy) {
            Transition::Accepted { next, .. } => state = next,
            Transition::Rejected { reason } => {
                return Err(invalid(event, ReplayFailure::Rejected(reason), state));
            }
        }
    }
    Ok(state)
}

/// Folds `events` from the initial state of `task_id`.
#[allow(clippy::result_large_err)]
pub fn replay(
    task_id: Text,
    events: &[TaskEvent],
    policy: Policy,
) -> Result<TaskState, InvalidHistory> {
    fold(initial_state(task_id), events, policy)
}

fn invalid(event: &TaskEvent, reason: ReplayFailure, state_before: TaskState) -> InvalidHistory {
    InvalidHistory {
        event_id: event.event_id.clone(),
        sequence: event.sequence,
        reason,
        state_before,
    }
}
