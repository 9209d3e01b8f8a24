//! The shapes as `serde_json` values: the dump's and `sim transition`'s
//! reference writers. `crate::task::json`'s fast writers print the same
//! bytes.

use serde_json::{Map, Value};

use crate::task::replay::InvalidHistory;
use crate::task::{EventBody, Evidence, TaskEvent, TaskState, Text, Transition};

/// The state as a JSON value: all nine fields, `null` where absent.
pub fn state_to_json(state: &TaskState) -> Value {
    let mut map = Map::new();
    map.insert("taskId".into(), text_value(&state.task_id));
    map.insert("status".into(), state.status.as_str().into());
    map.insert("version".into(), state.version.into());
    map.insert("attempt".into(), state.attempt.into());
    map.insert("workerId".into(), option_text_value(&state.worker_id));
    map.insert(
        "leaseUntilEpochMs".into(),
        state.lease_until_epoch_ms.map_or(Value::Null, Value::from),
    );
    map.insert(
        "cancellationSignalId".into(),
        option_text_value(&state.cancellation_signal_id),
    );
    map.insert(
        "artifactSha256".into(),
        option_text_value(&state.artifact_sha256),
    );
    map.insert(
        "terminalErrorCode".into(),
        option_text_value(&state.terminal_error_code),
    );
    Value::Object(map)
}

/// The event as a JSON value: the base fields and the fields of its type.
pub fn event_to_json(event: &TaskEvent) -> Value {
    let mut map = Map::new();
    map.insert("eventId".into(), text_value(&event.event_id));
    map.insert("taskId".into(), text_value(&event.task_id));
    map.insert("sequence".into(), event.sequence.into());
    map.insert("type".into(), event.event_type().as_str().into());
    match &event.body {
        EventBody::TaskStarted {
            attempt,
            worker_id,
            lease_until_epoch_ms,
        } => {
            map.insert("attempt".into(), (*attempt).into());
            map.insert("workerId".into(), text_value(worker_id));
            map.insert("leaseUntilEpochMs".into(), (*lease_until_epoch_ms).into());
        }
        EventBody::CancellationRequested {
            signal_id,
            requester,
            reason,
        } => {
            map.insert("signalId".into(), text_value(signal_id));
            map.insert("requester".into(), text_value(requester));
            map.insert("reason".into(), text_value(reason));
        }
        EventBody::TaskCompleted {
            attempt,
            artifact_sha256,
            artifact_verified,
        } => {
            map.insert("attempt".into(), (*attempt).into());
            map.insert("artifactSha256".into(), text_value(artifact_sha256));
            map.insert("artifactVerified".into(), (*artifact_verified).into());
        }
        EventBody::AttemptFailed {
            attempt,
            error_code,
            retryable,
            next_attempt,
        } => {
            map.insert("attempt".into(), (*attempt).into());
            map.insert("errorCode".into(), text_value(error_code));
            map.insert("retryable".into(), (*retryable).into());
            map.insert("nextAttempt".into(), (*next_attempt).into());
        }
        EventBody::TaskFailed {
            attempt,
            error_code,
        } => {
            map.insert("attempt".into(), (*attempt).into());
            map.insert("errorCode".into(), text_value(error_code));
        }
        EventBody::TaskCancelled {
            stopped_at_sequence,
            effects_reconciled,
        } => {
            map.insert("stoppedAtSequence".into(), (*stopped_at_sequence).into());
            map.insert("effectsReconciled".into(), (*effects_reconciled).into());
        }
    }
    Value::Object(map)
}

/// The lesson's `TransitionResult` for `current` and the outcome of
/// `transition(current, …)`.
pub fn result_to_json(current: &TaskState, outcome: &Transition) -> Value {
    let mut map = Map::new();
    match outcome {
        Transition::Accepted { next, evidence } => {
            map.insert("accepted".into(), true.into());
            map.insert("next".into(), state_to_json(next));
            map.insert("evidence".into(), evidence_to_json(evidence));
        }
        Transition::Rejected { reason } => {
            map.insert("accepted".into(), false.into());
            map.insert("reason".into(), reason.as_str().into());
            map.insert("current".into(), state_to_json(current));
        }
    }
    Value::Object(map)
}

fn evidence_to_json(evidence: &Evidence) -> Value {
    let mut map = Map::new();
    map.insert(
        "previousStatus".into(),
        evidence.previous_status.as_str().into(),
    );
    map.insert("nextStatus".into(), evidence.next_status.as_str().into());
    map.insert("eventId".into(), text_value(&evidence.event_id));
    map.insert(
        "completionWonCancellationRace".into(),
        evidence.completion_won_cancellation_race.into(),
    );
    Value::Object(map)
}

fn text_value(text: &Text) -> Value {
    Value::String(text.to_string())
}

fn option_text_value(text: &Option<Text>) -> Value {
    text.as_ref().map_or(Value::Null, text_value)
}

/// `{"invalid":{"eventId","reason","sequence"},"stateBefore":{…}}`, the
/// shape `sim replay-events` prints for a history that cannot be folded.
pub fn invalid_history_to_json(invalid: &InvalidHistory) -> Value {
    serde_json::json!({
        "invalid": {
            "eventId": &*invalid.event_id,
            "sequence": invalid.sequence,
            "reason": invalid.reason.as_str(),
        },
        "stateBefore": state_to_json(&invalid.state_before),
    })
}
