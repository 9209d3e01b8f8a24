//! Replay: folding an event history with the same transition function.
//! (Interim version; replaced by the transition-tool change.)

use super::json::event_payload_sha256;
use super::transition::{
    Policy, RejectReason, TaskEvent, TaskState, Text, Transition, initial_state, transition,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayFailure {
    Rejected(RejectReason),
    EventIdPayloadConflict,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidHistory {
    pub event_id: Text,
    pub sequence: i64,
    pub reason: ReplayFailure,
    pub state_before: TaskState,
}

pub fn fold(
    start: TaskState,
    events: &[TaskEvent],
    policy: Policy,
) -> Result<TaskState, InvalidHistory> {
    let mut sorted: Vec<&TaskEvent> = events.iter().collect();
    sorted.sort_by_key(|e| e.sequence);
    let mut seen: Vec<(Text, crate::hash::Sha)> = Vec::new();
    let mut state = start;
    for event in sorted {
        let hash = event_payload_sha256(event);
        if let Some((_, h)) = seen.iter().find(|(id, _)| *id == event.event_id) {
            if *h == hash {
                continue;
            }
            return Err(InvalidHistory {
                event_id: event.event_id.clone(),
                sequence: event.sequence,
                reason: ReplayFailure::EventIdPayloadConflict,
                state_before: state,
            });
        }
        seen.push((event.event_id.clone(), hash));
        match transition(&state, event, policy) {
            Transition::Accepted { next, .. } => state = next,
            Transition::Rejected { reason } => {
                return Err(InvalidHistory {
                    event_id: event.event_id.clone(),
                    sequence: event.sequence,
                    reason: ReplayFailure::Rejected(reason),
                    state_before: state,
                });
            }
        }
    }
    Ok(state)
}

pub fn replay(
    task_id: Text,
    events: &[TaskEvent],
    policy: Policy,
) -> Result<TaskState, InvalidHistory> {
    fold(initial_state(task_id), events, policy)
}
