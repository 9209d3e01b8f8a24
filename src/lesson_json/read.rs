//! Reading states, events and transition lines: the field checks both
//! routes share, and the value route.

use std::borrow::Cow;

use serde_json::Value;

use super::fields::{
    EventFields, Fields, Json, Reading, StateFields, event_key, fields_of_map, json_of_f64,
    json_of_value, state_key,
};
use super::visit::{FieldsSeed, Found, LineParts, LineSeed, read_whole};
use crate::task::{EventBody, EventType, Policy, Status, TaskEvent, TaskState, Text};

/// One line of `sim transition` input, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionInput {
    pub state: TaskState,
    pub event: TaskEvent,
    pub policy: Policy,
}

/// Reads a `TaskState` from a JSON value. All nine fields are required; the
/// nullable ones may be `null`. Other fields are refused unless `reading`
/// is lenient.
pub fn state_from_json(value: &Value, reading: Reading) -> Result<TaskState, String> {
    match value {
        Value::Object(map) => {
            state_from_fields("state", &fields_of_map(map, state_key::NAMES), reading)
        }
        other => Err(format!(
            "state: expected an object, got {}",
            json_of_value(other).kind_name()
        )),
    }
}

/// Reads a `TaskEvent` from a JSON value: the base fields, then the fields of
/// its type. Other fields (another type's included) are refused unless
/// `reading` is lenient.
pub fn event_from_json(value: &Value, reading: Reading) -> Result<TaskEvent, String> {
    match value {
        Value::Object(map) => {
            event_from_fields("event", &fields_of_map(map, event_key::NAMES), reading)
        }
        other => Err(format!(
            "event: expected an object, got {}",
            json_of_value(other).kind_name()
        )),
    }
}

/// Reads one `{"state":…,"event":…,"policy"?:…}` line without building a
/// `Value`. `policy` may be absent (completion-wins); any value other than
/// the two policy names is an error. Other keys are refused unless
/// `reading` is lenient.
pub fn parse_transition_line(line: &str, reading: Reading) -> Result<TransitionInput, String> {
    let mut parts = LineParts {
        state: None,
        state_fields: Fields::new(state_key::NAMES),
        event: None,
        event_fields: Fields::new(event_key::NAMES),
        policy: None,
        unknown: None,
    };
    if let Found::Other(kind) = read_whole(line, LineSeed { parts: &mut parts })? {
        return Err(format!(
            "expected an object with \"state\" and \"event\", got {kind}"
        ));
    }
    let state = match parts.state {
        None => return Err("state: missing, expected an object".to_string()),
        Some(Found::Other(kind)) => return Err(format!("state: expected an object, got {kind}")),
        Some(Found::Object) => state_from_fields("state", &parts.state_fields, reading)?,
    };
    let event = match parts.event {
        None => return Err("event: missing, expected an object".to_string()),
        Some(Found::Other(kind)) => return Err(format!("event: expected an object, got {kind}")),
        Some(Found::Object) => event_from_fields("event", &parts.event_fields, reading)?,
    };
    const EXPECTED: &str = "\"completion-wins\" or \"cancel-wins\"";
    let policy = match parts.policy {
        None => Policy::default(),
        Some(Json::Str(text)) => Policy::parse(&text)
            .ok_or_else(|| format!("policy: expected {EXPECTED}, got {text:?}"))?,
        Some(other) => {
            return Err(format!(
                "policy: expected {EXPECTED}, got {}",
                other.kind_name()
            ));
        }
    };
    if let (Some(key), Reading::Strict) = (&parts.unknown, reading) {
        return Err(format!(
            "{key}: unknown key; a line has state, event and an optional policy"
        ));
    }
    Ok(TransitionInput {
        state,
        event,
        policy,
    })
}

/// Reads one event line (the event object itself) without building a `Value`.
pub fn parse_event_line(line: &str, reading: Reading) -> Result<TaskEvent, String> {
    let mut fields = Fields::new(event_key::NAMES);
    let seed = FieldsSeed {
        fields: &mut fields,
        position: event_key::position,
    };
    match read_whole(line, seed)? {
        Found::Object => event_from_fields("event", &fields, reading),
        Found::Other(kind) => Err(format!("event: expected an object, got {kind}")),
    }
}

/// Checks one field at a time; the message names the field and the JSON type
/// that was expected.
pub(super) struct Checker<'f, 'a, const N: usize> {
    prefix: &'static str,
    fields: &'f Fields<'a, N>,
    reading: Reading,
}

impl<'a, const N: usize> Checker<'_, 'a, N> {
    fn get(&self, field: usize, expected: &str) -> Result<&Json<'a>, String> {
        self.fields.values[field].as_ref().ok_or_else(|| {
            format!(
                "{}.{}: missing, expected {expected}",
                self.prefix, self.fields.names[field]
            )
        })
    }

    fn wrong(&self, field: usize, expected: &str, got: &Json<'_>) -> String {
        let (prefix, name) = (self.prefix, self.fields.names[field]);
        match got {
            Json::NonIntegral(written) => {
                format!("{prefix}.{name}: expected {expected}, got non-integral number {written}")
            }
            Json::OutOfRange(written) => format!(
                "{prefix}.{name}: expected {expected}, got {written}, outside the 64-bit integer range"
            ),
            other => format!(
                "{prefix}.{name}: expected {expected}, got {}",
                other.kind_name()
            ),
        }
    }

    /// An integer field's value; `null` is allowed when `nullable`.
    fn integer(&self, field: usize, nullable: bool) -> Result<Option<i64>, String> {
        let expected = if nullable {
            "an integer or null"
        } else {
            "an integer"
        };
        let (prefix, name) = (self.prefix, self.fields.names[field]);
        let number = match self.get(field, expected)? {
            Json::Int(number) => *number,
            Json::Null if nullable => return Ok(None),
            Json::Float(float) if self.reading == Reading::Lenient => {
                match json_of_f64(*float, Cow::Owned(format!("{float:?}"))) {
                    Json::Int(number) => number,
                    other => return Err(self.wrong(field, expected, &other)),
                }
            }
            Json::Float(float) => {
                return Err(format!(
                    "{prefix}.{name}: expected {expected}, got {float:?}: an integer is written without a fraction or an exponent, within 64 bits (--lenient reads integral numbers in any notation)"
                ));
            }
            other => return Err(self.wrong(field, expected, other)),
        };
        if number < 0 && self.reading == Reading::Strict {
            return Err(format!(
                "{prefix}.{name}: expected an integer of 0 or more, got {number}"
            ));
        }
        Ok(Some(number))
    }

    fn int(&self, field: usize) -> Result<i64, String> {
        Ok(self.integer(field, false)?.expect("not nullable"))
    }

    fn int_or_null(&self, field: usize) -> Result<Option<i64>, String> {
        self.integer(field, true)
    }

    fn text(&self, field: usize) -> Result<&str, String> {
        const EXPECTED: &str = "a string";
        match self.get(field, EXPECTED)? {
            Json::Str(text) => Ok(text),
            other => Err(self.wrong(field, EXPECTED, other)),
        }
    }

    fn string(&self, field: usize) -> Result<Text, String> {
        self.text(field).map(Text::from)
    }

    fn string_or_null(&self, field: usize) -> Result<Option<Text>, String> {
        const EXPECTED: &str = "a string or null";
        match self.get(field, EXPECTED)? {
            Json::Str(text) => Ok(Some(Text::from(&**text))),
            Json::Null => Ok(None),
            other => Err(self.wrong(field, EXPECTED, other)),
        }
    }

    fn boolean(&self, field: usize) -> Result<bool, String> {
        const EXPECTED: &str = "a boolean";
        match self.get(field, EXPECTED)? {
            Json::Bool(flag) => Ok(*flag),
            other => Err(self.wrong(field, EXPECTED, other)),
        }
    }

    fn one_of<T>(
        &self,
        field: usize,
        names: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, String> {
        let text = self.text(field)?;
        parse(text).ok_or_else(|| {
            format!(
                "{}.{}: expected one of {names}, got {text:?}",
                self.prefix, self.fields.names[field]
            )
        })
    }
}

pub(super) const STATUS_NAMES: &str = "queued, running, cancelling, completed, failed, cancelled";
pub(super) const EVENT_TYPE_NAMES: &str =
    "TaskStarted, CancellationRequested, TaskCompleted, AttemptFailed, TaskFailed, TaskCancelled";

pub(super) fn state_from_fields(
    prefix: &'static str,
    fields: &StateFields<'_>,
    reading: Reading,
) -> Result<TaskState, String> {
    use state_key::*;
    let check = Checker {
        prefix,
        fields,
        reading,
    };
    // Fields are checked in the lesson's declaration order, so the first
    // problem reported is the same whichever route read the object.
    let state = TaskState {
        task_id: check.string(TASK_ID)?,
        status: check.one_of(STATUS, STATUS_NAMES, Status::parse)?,
        version: check.int(VERSION)?,
        attempt: check.int(ATTEMPT)?,
        worker_id: check.string_or_null(WORKER_ID)?,
        lease_until_epoch_ms: check.int_or_null(LEASE_UNTIL_EPOCH_MS)?,
        cancellation_signal_id: check.string_or_null(CANCELLATION_SIGNAL_ID)?,
        artifact_sha256: check.string_or_null(ARTIFACT_SHA256)?,
        terminal_error_code: check.string_or_null(TERMINAL_ERROR_CODE)?,
    };
    const ALL: [usize; COUNT] = [
        TASK_ID,
        STATUS,
        VERSION,
        ATTEMPT,
        WORKER_ID,
        LEASE_UNTIL_EPOCH_MS,
        CANCELLATION_SIGNAL_ID,
        ARTIFACT_SHA256,
        TERMINAL_ERROR_CODE,
    ];
    fields.check_extra(prefix, reading, [&ALL, &[]], "a state")?;
    Ok(state)
}

pub(super) fn event_from_fields(
    prefix: &'static str,
    fields: &EventFields<'_>,
    reading: Reading,
) -> Result<TaskEvent, String> {
    use event_key::*;
    let check = Checker {
        prefix,
        fields,
        reading,
    };
    let event_id = check.string(EVENT_ID)?;
    let task_id = check.string(TASK_ID)?;
    let sequence = check.int(SEQUENCE)?;
    let body = match check.one_of(TYPE, EVENT_TYPE_NAMES, EventType::parse)? {
        EventType::TaskStarted => EventBody::TaskStarted {
            attempt: check.int(ATTEMPT)?,
            worker_id: check.string(WORKER_ID)?,
            lease_until_epoch_ms: check.int(LEASE_UNTIL_EPOCH_MS)?,
        },
        EventType::CancellationRequested => EventBody::CancellationRequested {
            signal_id: check.string(SIGNAL_ID)?,
            requester: check.string(REQUESTER)?,
            reason: check.string(REASON)?,
        },
        EventType::TaskCompleted => EventBody::TaskCompleted {
            attempt: check.int(ATTEMPT)?,
            artifact_sha256: check.string(ARTIFACT_SHA256)?,
            artifact_verified: check.boolean(ARTIFACT_VERIFIED)?,
        },
        EventType::AttemptFailed => EventBody::AttemptFailed {
            attempt: check.int(ATTEMPT)?,
            error_code: check.string(ERROR_CODE)?,
            retryable: check.boolean(RETRYABLE)?,
            next_attempt: check.int(NEXT_ATTEMPT)?,
        },
        EventType::TaskFailed => EventBody::TaskFailed {
            attempt: check.int(ATTEMPT)?,
            error_code: check.string(ERROR_CODE)?,
        },
        EventType::TaskCancelled => EventBody::TaskCancelled {
            stopped_at_sequence: check.int(STOPPED_AT_SEQUENCE)?,
            effects_reconciled: check.boolean(EFFECTS_RECONCILED)?,
        },
    };
    let (owner, own): (&str, &[usize]) = match &body {
        EventBody::TaskStarted { .. } => {
            ("TaskStarted", &[ATTEMPT, WORKER_ID, LEASE_UNTIL_EPOCH_MS])
        }
        EventBody::CancellationRequested { .. } => {
            ("CancellationRequested", &[SIGNAL_ID, REQUESTER, REASON])
        }
        EventBody::TaskCompleted { .. } => (
            "TaskCompleted",
            &[ATTEMPT, ARTIFACT_SHA256, ARTIFACT_VERIFIED],
        ),
        EventBody::AttemptFailed { .. } => (
            "AttemptFailed",
            &[ATTEMPT, ERROR_CODE, RETRYABLE, NEXT_ATTEMPT],
        ),
        EventBody::TaskFailed { .. } => ("TaskFailed", &[ATTEMPT, ERROR_CODE]),
        EventBody::TaskCancelled { .. } => {
            ("TaskCancelled", &[STOPPED_AT_SEQUENCE, EFFECTS_RECONCILED])
        }
    };
    const BASE: [usize; 4] = [EVENT_ID, TASK_ID, SEQUENCE, TYPE];
    fields.check_extra(prefix, reading, [&BASE, own], owner)?;
    Ok(TaskEvent {
        event_id,
        task_id,
        sequence,
        body,
    })
}
