//! The event store's command handler (lesson 003 §6, §8-§9; DESIGN §3
//! "Event store"). Actors issue commands against the version they read; the
//! handler checks that version, runs the pure transition at version + 1,
//! appends the event and the new state row, writes the event's outbox row
//! and a snapshot when one is due, all inside the caller's transaction.

use crate::hash::Sha;
use crate::task::{EventBody, EventType, RejectReason, TaskEvent, TaskState};

use crate::world::engine::ids::{ActorId, SignalId};
use crate::world::stores::db::StoredEvent;

mod execute;

/// What an actor asks the event store to do. Commands are intents; the
/// event store turns an accepted one into an event.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    StartTask {
        attempt: u32,
        worker: ActorId,
        lease_until_ms: u64,
    },
    RequestCancellation {
        signal: SignalId,
        reason: &'static str,
    },
    CompleteTask {
        attempt: u32,
        artifact_sha256: Sha,
    },
    FailAttempt {
        attempt: u32,
        error_code: &'static str,
    },
    FailTask {
        attempt: u32,
        error_code: &'static str,
    },
    ConfirmCancelled,
}

impl Command {
    pub fn event_type(&self) -> EventType {
        match self {
            Command::StartTask { .. } => EventType::TaskStarted,
            Command::RequestCancellation { .. } => EventType::CancellationRequested,
            Command::CompleteTask { .. } => EventType::TaskCompleted,
            Command::FailAttempt { .. } => EventType::AttemptFailed,
            Command::FailTask { .. } => EventType::TaskFailed,
            Command::ConfirmCancelled => EventType::TaskCancelled,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommandOutcome {
    Committed {
        version: i64,
    },
    /// The fact is already stored (same semantic key or same event id and
    /// payload): nothing changes.
    Duplicate {
        version: i64,
    },
    /// The state moved on since the actor read it: reload and re-decide.
    VersionConflict,
    Rejected(RejectReason),
    /// The event id is stored with another payload: quarantined.
    EventIdConflict,
}

impl CommandOutcome {
    pub fn code(self) -> &'static str {
        match self {
            CommandOutcome::Committed { .. } => "committed",
            CommandOutcome::Duplicate { .. } => "duplicate",
            CommandOutcome::VersionConflict => "VERSION_CONFLICT",
            CommandOutcome::Rejected(reason) => reason.as_str(),
            CommandOutcome::EventIdConflict => "EVENT_ID_PAYLOAD_CONFLICT",
        }
    }
}

/// The attempt an event speaks for: its own field, or the attempt of the
/// state it applies to.
fn event_attempt(event: &TaskEvent, state: &TaskState) -> i64 {
    event.body.attempt().unwrap_or(state.attempt)
}

fn signal_of(event: &TaskEvent) -> Option<&str> {
    match &event.body {
        EventBody::CancellationRequested { signal_id, .. } => Some(signal_id),
        _ => None,
    }
}

fn semantic_key_taken(
    events: &[StoredEvent],
    kind: EventType,
    attempt: i64,
    signal: Option<&str>,
) -> bool {
    events.iter().any(|stored| {
        stored.event.event_type() == kind
            && stored.attempt == attempt
            && (kind != EventType::CancellationRequested || signal_of(&stored.event) == signal)
    })
}
