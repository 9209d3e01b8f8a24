//! JSON shapes of lesson 003 (states, events, results) and the canonical event hash.
//! (Interim version; replaced by the transition-tool change.)

use serde_json::{Value, json};

use super::transition::{EventBody, EventType, Status, TaskEvent, TaskState, Text};
use crate::hash::{Sha, canonical_sha256};

fn opt(text: &Option<Text>) -> Value {
    text.as_ref()
        .map_or(Value::Null, |t| Value::String(t.to_string()))
}

pub fn state_to_json(state: &TaskState) -> Value {
    json!({
        "taskId": state.task_id.as_ref(),
        "status": state.status.as_str(),
        "version": state.version,
        "attempt": state.attempt,
        "workerId": opt(&state.worker_id),
        "leaseUntilEpochMs": state.lease_until_epoch_ms,
        "cancellationSignalId": opt(&state.cancellation_signal_id),
        "artifactSha256": opt(&state.artifact_sha256),
        "terminalErrorCode": opt(&state.terminal_error_code),
    })
}

pub fn event_to_json(event: &TaskEvent) -> Value {
    let mut value = json!({
        "eventId": event.event_id.as_ref(),
        "taskId": event.task_id.as_ref(),
        "sequence": event.sequence,
        "type": event.event_type().as_str(),
    });
    let object = value.as_object_mut().expect("object");
    let extra = match &event.body {
        EventBody::TaskStarted {
            attempt,
            worker_id,
            lease_until_epoch_ms,
        } => {
            json!({"attempt": attempt, "workerId": worker_id.as_ref(), "leaseUntilEpochMs": lease_until_epoch_ms})
        }
        EventBody::CancellationRequested {
            signal_id,
            requester,
            reason,
        } => {
            json!({"signalId": signal_id.as_ref(), "requester": requester.as_ref(), "reason": reason.as_ref()})
        }
        EventBody::TaskCompleted {
            attempt,
            artifact_sha256,
            artifact_verified,
        } => {
            json!({"attempt": attempt, "artifactSha256": artifact_sha256.as_ref(), "artifactVerified": artifact_verified})
        }
        EventBody::AttemptFailed {
            attempt,
            error_code,
            retryable,
            next_attempt,
        } => {
            json!({"attempt": attempt, "errorCode": error_code.as_ref(), "retryable": retryable, "nextAttempt": next_attempt})
        }
        EventBody::TaskFailed {
            attempt,
            error_code,
        } => json!({"attempt": attempt, "errorCode": error_code.as_ref()}),
        EventBody::TaskCancelled {
            stopped_at_sequence,
            effects_reconciled,
        } => {
            json!({"stoppedAtSequence": stopped_at_sequence, "effectsReconciled": effects_reconciled})
        }
    };
    for (k, v) in extra.as_object().expect("object") {
        object.insert(k.clone(), v.clone());
    }
    value
}

fn text(v: &Value, key: &str) -> Result<Text, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(Text::from)
        .ok_or_else(|| format!("event.{key}: expected a string"))
}
fn int(v: &Value, key: &str) -> Result<i64, String> {
    v.get(key)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("event.{key}: expected an integer"))
}
fn boolean(v: &Value, key: &str) -> Result<bool, String> {
    v.get(key)
        .and_then(Value::as_bool)
        .ok_or_else(|| format!("event.{key}: expected a boolean"))
}

pub fn event_from_json(v: &Value) -> Result<TaskEvent, String> {
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .and_then(EventType::parse)
        .ok_or("event.type: expected an event type")?;
    let body = match kind {
        EventType::TaskStarted => EventBody::TaskStarted {
            attempt: int(v, "attempt")?,
            worker_id: text(v, "workerId")?,
            lease_until_epoch_ms: int(v, "leaseUntilEpochMs")?,
        },
        EventType::CancellationRequested => EventBody::CancellationRequested {
            signal_id: text(v, "signalId")?,
            requester: text(v, "requester")?,
            reason: text(v, "reason")?,
        },
        EventType::TaskCompleted => EventBody::TaskCompleted {
            attempt: int(v, "attempt")?,
            artifact_sha256: text(v, "artifactSha256")?,
            artifact_verified: boolean(v, "artifactVerified")?,
        },
        EventType::AttemptFailed => EventBody::AttemptFailed {
            attempt: int(v, "attempt")?,
            error_code: text(v, "errorCode")?,
            retryable: boolean(v, "retryable")?,
            next_attempt: int(v, "nextAttempt")?,
        },
        EventType::TaskFailed => EventBody::TaskFailed {
            attempt: int(v, "attempt")?,
            error_code: text(v, "errorCode")?,
        },
        EventType::TaskCancelled => EventBody::TaskCancelled {
            stopped_at_sequence: int(v, "stoppedAtSequence")?,
            effects_reconciled: boolean(v, "effectsReconciled")?,
        },
    };
    Ok(TaskEvent {
        event_id: text(v, "eventId")?,
        task_id: text(v, "taskId")?,
        sequence: int(v, "sequence")?,
        body,
    })
}

pub fn state_from_json(v: &Value) -> Result<TaskState, String> {
    let o = |key: &str| v.get(key).and_then(Value::as_str).map(Text::from);
    Ok(TaskState {
        task_id: text(v, "taskId")?,
        status: v
            .get("status")
            .and_then(Value::as_str)
            .and_then(Status::parse)
            .ok_or("state.status")?,
        version: int(v, "version")?,
        attempt: int(v, "attempt")?,
        worker_id: o("workerId"),
        lease_until_epoch_ms: v.get("leaseUntilEpochMs").and_then(Value::as_i64),
        cancellation_signal_id: o("cancellationSignalId"),
        artifact_sha256: o("artifactSha256"),
        terminal_error_code: o("terminalErrorCode"),
    })
}

pub fn event_payload_sha256(event: &TaskEvent) -> Sha {
    canonical_sha256(&event_to_json(event))
}

pub fn state_sha256(state: &TaskState) -> Sha {
    canonical_sha256(&state_to_json(state))
}
