//! JSON shapes of lesson 003 (states, events, transition results): well-typed
//! reading, compact canonical writing, and the event payload and state hashes.
//!
//! Every object sim writes here is canonical JSON: keys sorted by byte order
//! at every depth, no whitespace. That is exactly what `serde_json` prints for
//! a `Value` (its map is a `BTreeMap`), so the `*_to_json` functions and the
//! fast `write_*` writers agree byte for byte, and a hash is the SHA-256 of
//! what the writer prints.
//!
//! Reading has two routes with one set of checks: from a `serde_json::Value`
//! (`state_from_json`, `event_from_json`) and straight from text
//! (`parse_transition_line`, `parse_event_line`), where serde_json's
//! tokenizer feeds visitors that build no `Value`. Both gather the known
//! fields into the same `Fields` and then run the same checks, so both give
//! the same answer and the same message (syntax errors aside, which only the
//! text route meets). The text route replaced a hand-written reader: on
//! `sim bench`'s transition workload it reads 11% fewer lines a second
//! (README, Decisions), under the 25% that would justify a parser of our
//! own.

use std::borrow::Cow;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::hash::Sha;
use crate::task::{
    EventBody, EventType, Evidence, Policy, Status, TaskEvent, TaskState, Text, Transition,
};

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// How strictly input is read. `Strict` (the default of `sim transition`
/// and `sim replay-events`, and of scenario files) takes exactly the
/// lesson's shapes: integers written as integers (no fraction, no
/// exponent) and never negative, and no field the shape does not have
/// (another event type's included). `Lenient` is the older reading: an
/// integral number in any notation is an integer, negatives pass, unknown
/// fields are ignored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reading {
    #[default]
    Strict,
    Lenient,
}

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

/// A JSON value as far as field checking needs it: scalars are kept,
/// containers are only named (their contents are skipped).
#[derive(Clone, Debug, PartialEq)]
enum Json<'a> {
    Null,
    Bool(bool),
    /// An integer literal that fits `i64`.
    Int(i64),
    /// A number written with a fraction or an exponent, or an integer
    /// literal beyond 64 bits, as the f64 it reads as.
    Float(f64),
    /// A number with a fraction, as written.
    NonIntegral(Cow<'a, str>),
    /// An integral number outside `i64`, as written.
    OutOfRange(Cow<'a, str>),
    Str(Cow<'a, str>),
    Array,
    Object,
}

impl Json<'_> {
    fn kind_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Int(_) | Json::Float(_) | Json::NonIntegral(_) | Json::OutOfRange(_) => "number",
            Json::Str(_) => "string",
            Json::Array => "array",
            Json::Object => "object",
        }
    }
}

/// A number read as an f64: an integer when its value is one and fits i64.
fn json_of_f64(number: f64, written: Cow<'_, str>) -> Json<'_> {
    // 2^63 is exactly representable; every integral f64 in (-2^63, 2^63)
    // converts to i64 without loss. -2^63 itself is left out: an integer
    // literal that fits i64 never reaches here (serde_json reads it as an
    // integer), so a float of that value is a literal below i64's range
    // rounded up to it.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !number.is_finite() {
        Json::OutOfRange(written)
    } else if number.fract() != 0.0 {
        Json::NonIntegral(written)
    } else if number > -LIMIT && number < LIMIT {
        Json::Int(number as i64)
    } else {
        Json::OutOfRange(written)
    }
}

fn json_of_value(value: &Value) -> Json<'_> {
    match value {
        Value::Null => Json::Null,
        Value::Bool(flag) => Json::Bool(*flag),
        Value::Number(number) => match (number.as_i64(), number.as_f64()) {
            (Some(number), _) => Json::Int(number),
            // A `Value` keeps integers exactly (as i64 or u64) and everything
            // else as the f64 its parser produced; precision lost there is
            // lost before this function sees it.
            (None, Some(float)) if !number.is_u64() => Json::Float(float),
            _ => Json::OutOfRange(Cow::Owned(number.to_string())),
        },
        Value::String(text) => Json::Str(Cow::Borrowed(text)),
        Value::Array(_) => Json::Array,
        Value::Object(_) => Json::Object,
    }
}

/// Declares an object shape: its field names in the lesson's order, one
/// constant per field (its position), and the name-to-position lookup the
/// reader uses for every key it meets (a `match`, not a scan of the names).
macro_rules! shape {
    ($(#[$doc:meta])* $module:ident { $($constant:ident = $name:literal),+ $(,)? }) => {
        $(#[$doc])*
        mod $module {
            pub const NAMES: &[&str] = &[$($name),+];
            pub const COUNT: usize = NAMES.len();
            shape!(@positions 0; $($constant)+);
            pub fn position(name: &str) -> Option<usize> {
                match name {
                    $($name => Some($constant),)+
                    _ => None,
                }
            }
        }
    };
    (@positions $next:expr; $first:ident $($rest:ident)*) => {
        pub const $first: usize = $next;
        shape!(@positions $next + 1; $($rest)*);
    };
    (@positions $next:expr;) => {};
}

shape!(
    /// The lesson's `TaskState`.
    state_key {
        TASK_ID = "taskId",
        STATUS = "status",
        VERSION = "version",
        ATTEMPT = "attempt",
        WORKER_ID = "workerId",
        LEASE_UNTIL_EPOCH_MS = "leaseUntilEpochMs",
        CANCELLATION_SIGNAL_ID = "cancellationSignalId",
        ARTIFACT_SHA256 = "artifactSha256",
        TERMINAL_ERROR_CODE = "terminalErrorCode",
    }
);

shape!(
    /// Every field any event type has; each type reads the ones it owns.
    event_key {
        EVENT_ID = "eventId",
        TASK_ID = "taskId",
        SEQUENCE = "sequence",
        TYPE = "type",
        ATTEMPT = "attempt",
        WORKER_ID = "workerId",
        LEASE_UNTIL_EPOCH_MS = "leaseUntilEpochMs",
        SIGNAL_ID = "signalId",
        REQUESTER = "requester",
        REASON = "reason",
        ARTIFACT_SHA256 = "artifactSha256",
        ARTIFACT_VERIFIED = "artifactVerified",
        ERROR_CODE = "errorCode",
        RETRYABLE = "retryable",
        NEXT_ATTEMPT = "nextAttempt",
        STOPPED_AT_SEQUENCE = "stoppedAtSequence",
        EFFECTS_RECONCILED = "effectsReconciled",
    }
);

/// The known fields of one object, by position in its shape; `None` where
/// the key is absent.
struct Fields<'a, const N: usize> {
    names: &'static [&'static str],
    values: [Option<Json<'a>>; N],
    /// The smallest key (by bytes) the shape does not have, if any: the
    /// same whichever route read the object, whatever the key order.
    unknown: Option<Cow<'a, str>>,
}

type StateFields<'a> = Fields<'a, { state_key::COUNT }>;
type EventFields<'a> = Fields<'a, { event_key::COUNT }>;

impl<'a, const N: usize> Fields<'a, N> {
    fn new(names: &'static [&'static str]) -> Fields<'a, N> {
        debug_assert_eq!(names.len(), N);
        Fields {
            names,
            values: std::array::from_fn(|_| None),
            unknown: None,
        }
    }

    fn note_unknown(&mut self, key: Cow<'a, str>) {
        keep_smallest(&mut self.unknown, key);
    }

    /// In a strict reading: the first field present that the shape, as
    /// narrowed to `allowed` positions, does not have.
    fn check_extra(
        &self,
        prefix: &str,
        reading: Reading,
        allowed: [&[usize]; 2],
        owner: &str,
    ) -> Result<(), String> {
        if reading == Reading::Lenient {
            return Ok(());
        }
        let allowed = || allowed.into_iter().flatten();
        for (at, value) in self.values.iter().enumerate() {
            if value.is_some() && !allowed().any(|own| *own == at) {
                return Err(format!(
                    "{prefix}.{}: not a field of {owner}",
                    self.names[at]
                ));
            }
        }
        match &self.unknown {
            Some(key) => Err(format!(
                "{prefix}.{key}: unknown field; {owner} has {}",
                allowed()
                    .map(|at| self.names[*at])
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => Ok(()),
        }
    }
}

fn fields_of_map<'a, const N: usize>(
    map: &'a Map<String, Value>,
    names: &'static [&'static str],
) -> Fields<'a, N> {
    let mut fields = Fields::new(names);
    for (value, name) in fields.values.iter_mut().zip(names) {
        *value = map.get(*name).map(json_of_value);
    }
    if let Some(key) = map.keys().find(|key| !names.contains(&key.as_str())) {
        fields.note_unknown(Cow::Borrowed(key));
    }
    fields
}

/// Checks one field at a time; the message names the field and the JSON type
/// that was expected.
struct Checker<'f, 'a, const N: usize> {
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

const STATUS_NAMES: &str = "queued, running, cancelling, completed, failed, cancelled";
const EVENT_TYPE_NAMES: &str =
    "TaskStarted, CancellationRequested, TaskCompleted, AttemptFailed, TaskFailed, TaskCancelled";

fn state_from_fields(
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

fn event_from_fields(
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

// --- the text route: serde_json reads the text -----------------------------
//
// `serde_json::Deserializer` tokenizes the line and these visitors gather
// the known fields into the same `Fields` the value route fills, without
// building a `Value`: a string is borrowed from the line when it has no
// escapes, a container where a scalar belongs is skipped, an unknown key's
// value is skipped. Skipping goes through `deserialize_any` at every level
// (not `IgnoredAny`), so serde_json's nesting limit holds for skipped
// values too and this route accepts exactly the texts a `Value` does. The
// checks above then run in field order with their own wording.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// What stood where an object was expected. The object's fields are
/// written in place, into the `Fields` the seed holds: returned by value
/// through serde's layers, a line's 26 fields (about 900 bytes) were
/// copied at every layer, 12% of `sim transition`'s time in `memcpy`.
#[derive(Clone, Copy)]
enum Found {
    Object,
    /// The name of the JSON type found instead.
    Other(&'static str),
}

/// A JSON value as `Json`: scalars kept, containers skipped.
struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("a JSON value")
    }

    fn visit_bool<E>(self, flag: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(flag))
    }

    fn visit_i64<E>(self, number: i64) -> Result<Json<'de>, E> {
        Ok(Json::Int(number))
    }

    fn visit_u64<E>(self, number: u64) -> Result<Json<'de>, E> {
        Ok(i64::try_from(number)
            .map(Json::Int)
            .unwrap_or_else(|_| Json::OutOfRange(Cow::Owned(number.to_string()))))
    }

    fn visit_f64<E>(self, number: f64) -> Result<Json<'de>, E> {
        Ok(Json::Float(number))
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(text.to_string())))
    }

    fn visit_string<E>(self, text: String) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(text)))
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        while seq.next_element_seed(JsonVisitor)?.is_some() {}
        Ok(Json::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        while map.next_entry_seed(KeyVisitor, JsonVisitor)?.is_some() {}
        Ok(Json::Object)
    }
}

impl<'de> DeserializeSeed<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// An object key, borrowed from the line when it has no escapes.
struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("a key")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(text))
    }

    fn visit_str<E>(self, text: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(text.to_string()))
    }
}

impl<'de> DeserializeSeed<'de> for KeyVisitor {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

/// The visits of a `Found` visitor for everything but an object: the
/// JSON type found instead (a container's contents skipped).
macro_rules! not_an_object {
    () => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Found::Other("boolean"))
        }

        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Found::Other("number"))
        }

        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Found::Other("number"))
        }

        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Found::Other("number"))
        }

        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Found::Other("string"))
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(Found::Other("null"))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element_seed(JsonVisitor)?.is_some() {}
            Ok(Found::Other("array"))
        }
    };
}

/// One object of a known shape: its known fields gathered by position into
/// `fields` (a repeated key overwrites, as in a `Value`), anything else
/// skipped.
struct FieldsSeed<'f, 'de, const N: usize> {
    fields: &'f mut Fields<'de, N>,
    position: fn(&str) -> Option<usize>,
}

impl<'de, const N: usize> Visitor<'de> for FieldsSeed<'_, 'de, N> {
    type Value = Found;

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        while let Some(key) = map.next_key_seed(KeyVisitor)? {
            match (self.position)(&key) {
                Some(at) => self.fields.values[at] = Some(map.next_value_seed(JsonVisitor)?),
                None => {
                    map.next_value_seed(JsonVisitor)?;
                    self.fields.note_unknown(key);
                }
            }
        }
        Ok(Found::Object)
    }

    not_an_object!();
}

impl<'de, const N: usize> DeserializeSeed<'de> for FieldsSeed<'_, 'de, N> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Found, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// The top level of a `sim transition` line. `None` where a key is absent;
/// a repeated key overwrites, as everywhere else.
struct LineParts<'a> {
    state: Option<Found>,
    state_fields: StateFields<'a>,
    event: Option<Found>,
    event_fields: EventFields<'a>,
    policy: Option<Json<'a>>,
    /// The smallest other key, if any.
    unknown: Option<Cow<'a, str>>,
}

/// A whole `sim transition` line, into `parts`.
struct LineSeed<'p, 'de> {
    parts: &'p mut LineParts<'de>,
}

impl<'de> Visitor<'de> for LineSeed<'_, 'de> {
    type Value = Found;

    fn expecting(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        out.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Found, A::Error> {
        let parts = self.parts;
        while let Some(key) = map.next_key_seed(KeyVisitor)? {
            match &*key {
                "state" => {
                    parts.state = Some(map.next_value_seed(FieldsSeed {
                        fields: &mut parts.state_fields,
                        position: state_key::position,
                    })?);
                }
                "event" => {
                    parts.event = Some(map.next_value_seed(FieldsSeed {
                        fields: &mut parts.event_fields,
                        position: event_key::position,
                    })?);
                }
                "policy" => parts.policy = Some(map.next_value_seed(JsonVisitor)?),
                _ => {
                    map.next_value_seed(JsonVisitor)?;
                    keep_smallest(&mut parts.unknown, key);
                }
            }
        }
        Ok(Found::Object)
    }

    not_an_object!();
}

impl<'de> DeserializeSeed<'de> for LineSeed<'_, 'de> {
    type Value = Found;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Found, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Reads `line` whole as one value through `seed`.
fn read_whole<'de, S: DeserializeSeed<'de>>(line: &'de str, seed: S) -> Result<S::Value, String> {
    let mut deserializer = serde_json::Deserializer::from_str(line);
    let value = seed
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|error| syntax_message(line, &error))?;
    Ok(value)
}

/// Keeps the smallest key seen (by bytes), so both routes name the same
/// one whatever order the keys came in.
fn keep_smallest<'a>(slot: &mut Option<Cow<'a, str>>, key: Cow<'a, str>) {
    if slot.as_ref().is_none_or(|known| key < *known) {
        *slot = Some(key);
    }
}

/// serde_json's message, with its position as a character column.
fn syntax_message(line: &str, error: &serde_json::Error) -> String {
    let text = error.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    // serde_json counts the column in bytes; a column counts characters.
    let byte = error.column().saturating_sub(1);
    let column = line
        .get(..byte.min(line.len()))
        .map_or(byte, |before| before.chars().count())
        + 1;
    format!("invalid JSON at column {column}: {what}")
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

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

/// Appends the canonical JSON of `state` to `out`; equal, byte for byte, to
/// `serde_json::to_string(&state_to_json(state))`.
pub fn write_state(out: &mut String, state: &TaskState) {
    emit_state(out, state);
}

/// Appends the canonical JSON of `event` to `out`; equal, byte for byte, to
/// `serde_json::to_string(&event_to_json(event))`.
pub fn write_event(out: &mut String, event: &TaskEvent) {
    emit_event(out, event);
}

/// Appends the canonical JSON of the transition result to `out`; equal, byte
/// for byte, to `serde_json::to_string(&result_to_json(current, outcome))`.
pub fn write_result(out: &mut String, current: &TaskState, outcome: &Transition) {
    match outcome {
        Transition::Accepted { next, evidence } => {
            out.push_str(r#"{"accepted":true,"evidence":{"completionWonCancellationRace":"#);
            out.push_str(bool_text(evidence.completion_won_cancellation_race));
            out.push_str(r#","eventId":"#);
            emit_str(out, &evidence.event_id);
            out.push_str(r#","nextStatus":""#);
            out.push_str(evidence.next_status.as_str());
            out.push_str(r#"","previousStatus":""#);
            out.push_str(evidence.previous_status.as_str());
            out.push_str(r#""},"next":"#);
            emit_state(out, next);
            out.push('}');
        }
        Transition::Rejected { reason } => {
            out.push_str(r#"{"accepted":false,"current":"#);
            emit_state(out, current);
            out.push_str(r#","reason":""#);
            out.push_str(reason.as_str());
            out.push_str(r#""}"#);
        }
    }
}

/// The event store's payload hash: SHA-256 of the event's canonical JSON.
/// Computed for every appended event, so the JSON streams into the hasher
/// through a small stack buffer instead of being built first.
pub fn event_payload_sha256(event: &TaskEvent) -> Sha {
    let mut sink = HashSink::new();
    emit_event(&mut sink, event);
    sink.finish()
}

/// A snapshot's hash: SHA-256 of the state's canonical JSON.
pub fn state_sha256(state: &TaskState) -> Sha {
    let mut sink = HashSink::new();
    emit_state(&mut sink, state);
    sink.finish()
}

/// Somewhere text can go: a string, a hasher, or an id being built
/// (`ids::TextBuf`).
pub trait Sink {
    fn put(&mut self, text: &str);
}

impl Sink for String {
    fn put(&mut self, text: &str) {
        self.push_str(text);
    }
}

/// Feeds a SHA-256 in 128-byte chunks; the writers emit many short pieces
/// and one `update` per piece would cost more than the hashing.
struct HashSink {
    hasher: Sha256,
    buffer: [u8; 128],
    len: usize,
}

impl HashSink {
    fn new() -> HashSink {
        HashSink {
            hasher: Sha256::new(),
            buffer: [0; 128],
            len: 0,
        }
    }

    fn finish(mut self) -> Sha {
        self.hasher.update(&self.buffer[..self.len]);
        self.hasher.finalize().into()
    }
}

impl Sink for HashSink {
    fn put(&mut self, text: &str) {
        let bytes = text.as_bytes();
        if self.len + bytes.len() > self.buffer.len() {
            self.hasher.update(&self.buffer[..self.len]);
            self.len = 0;
            if bytes.len() > self.buffer.len() {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buffer[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }
}

fn bool_text(flag: bool) -> &'static str {
    if flag { "true" } else { "false" }
}

// The emitters below print keys in byte order by hand; the tests compare
// them with the `Value` route on many inputs, which would catch a slip.

fn emit_state<S: Sink>(out: &mut S, state: &TaskState) {
    out.put(r#"{"artifactSha256":"#);
    emit_option_str(out, state.artifact_sha256.as_deref());
    out.put(r#","attempt":"#);
    emit_i64(out, state.attempt);
    out.put(r#","cancellationSignalId":"#);
    emit_option_str(out, state.cancellation_signal_id.as_deref());
    out.put(r#","leaseUntilEpochMs":"#);
    match state.lease_until_epoch_ms {
        Some(lease) => emit_i64(out, lease),
        None => out.put("null"),
    }
    out.put(r#","status":""#);
    out.put(state.status.as_str());
    out.put(r#"","taskId":"#);
    emit_str(out, &state.task_id);
    out.put(r#","terminalErrorCode":"#);
    emit_option_str(out, state.terminal_error_code.as_deref());
    out.put(r#","version":"#);
    emit_i64(out, state.version);
    out.put(r#","workerId":"#);
    emit_option_str(out, state.worker_id.as_deref());
    out.put("}");
}

fn emit_event<S: Sink>(out: &mut S, event: &TaskEvent) {
    // Shared tail of every event in key order: `sequence` and `taskId`,
    // `type`; what sorts before or between them depends on the type.
    let kind = event.event_type().as_str();
    match &event.body {
        EventBody::TaskStarted {
            attempt,
            worker_id,
            lease_until_epoch_ms,
        } => {
            out.put(r#"{"attempt":"#);
            emit_i64(out, *attempt);
            emit_event_id(out, event);
            out.put(r#","leaseUntilEpochMs":"#);
            emit_i64(out, *lease_until_epoch_ms);
            emit_sequence_task_type(out, event, kind);
            out.put(r#","workerId":"#);
            emit_str(out, worker_id);
        }
        EventBody::CancellationRequested {
            signal_id,
            requester,
            reason,
        } => {
            out.put(r#"{"eventId":"#);
            emit_str(out, &event.event_id);
            out.put(r#","reason":"#);
            emit_str(out, reason);
            out.put(r#","requester":"#);
            emit_str(out, requester);
            out.put(r#","sequence":"#);
            emit_i64(out, event.sequence);
            out.put(r#","signalId":"#);
            emit_str(out, signal_id);
            emit_task_type(out, event, kind);
        }
        EventBody::TaskCompleted {
            attempt,
            artifact_sha256,
            artifact_verified,
        } => {
            out.put(r#"{"artifactSha256":"#);
            emit_str(out, artifact_sha256);
            out.put(r#","artifactVerified":"#);
            out.put(bool_text(*artifact_verified));
            out.put(r#","attempt":"#);
            emit_i64(out, *attempt);
            emit_event_id(out, event);
            emit_sequence_task_type(out, event, kind);
        }
        EventBody::AttemptFailed {
            attempt,
            error_code,
            retryable,
            next_attempt,
        } => {
            out.put(r#"{"attempt":"#);
            emit_i64(out, *attempt);
            out.put(r#","errorCode":"#);
            emit_str(out, error_code);
            emit_event_id(out, event);
            out.put(r#","nextAttempt":"#);
            emit_i64(out, *next_attempt);
            out.put(r#","retryable":"#);
            out.put(bool_text(*retryable));
            emit_sequence_task_type(out, event, kind);
        }
        EventBody::TaskFailed {
            attempt,
            error_code,
        } => {
            out.put(r#"{"attempt":"#);
            emit_i64(out, *attempt);
            out.put(r#","errorCode":"#);
            emit_str(out, error_code);
            emit_event_id(out, event);
            emit_sequence_task_type(out, event, kind);
        }
        EventBody::TaskCancelled {
            stopped_at_sequence,
            effects_reconciled,
        } => {
            out.put(r#"{"effectsReconciled":"#);
            out.put(bool_text(*effects_reconciled));
            emit_event_id(out, event);
            out.put(r#","sequence":"#);
            emit_i64(out, event.sequence);
            out.put(r#","stoppedAtSequence":"#);
            emit_i64(out, *stopped_at_sequence);
            emit_task_type(out, event, kind);
        }
    }
    out.put("}");
}

fn emit_event_id<S: Sink>(out: &mut S, event: &TaskEvent) {
    out.put(r#","eventId":"#);
    emit_str(out, &event.event_id);
}

fn emit_sequence_task_type<S: Sink>(out: &mut S, event: &TaskEvent, kind: &str) {
    out.put(r#","sequence":"#);
    emit_i64(out, event.sequence);
    emit_task_type(out, event, kind);
}

fn emit_task_type<S: Sink>(out: &mut S, event: &TaskEvent, kind: &str) {
    out.put(r#","taskId":"#);
    emit_str(out, &event.task_id);
    out.put(r#","type":""#);
    out.put(kind);
    out.put("\"");
}

/// `number` in decimal, with its sign.
pub fn emit_i64<S: Sink>(out: &mut S, number: i64) {
    if number < 0 {
        out.put("-");
    }
    let mut digits = [0u8; 20];
    out.put(decimal(&mut digits, number.unsigned_abs()));
}

/// `number`'s decimal digits, written into the end of `digits` (a `u64`
/// has at most 20): ids and numbers are rendered on hot paths, where
/// `format!`'s machinery costs several times the digits.
pub fn decimal(digits: &mut [u8; 20], mut number: u64) -> &str {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    std::str::from_utf8(&digits[start..]).expect("ASCII digits")
}

/// Whether `emit_str` escapes `byte`: the quote, the backslash and the
/// controls below 0x20.
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

fn emit_option_str<S: Sink>(out: &mut S, text: Option<&str>) {
    match text {
        Some(text) => emit_str(out, text),
        None => out.put("null"),
    }
}

/// A JSON string with serde_json's escaping: `"` and `\`, the short forms
/// `\b \f \n \r \t`, `\u00xx` (lowercase hex) for the other controls below
/// 0x20, everything else (DEL and non-ASCII included) as is.
fn emit_str<S: Sink>(out: &mut S, text: &str) {
    out.put("\"");
    let bytes = text.as_bytes();
    // Ids, hashes and codes need no escape: a plain scan for one costs
    // less per byte than the escape loop below, which they then skip.
    if !bytes.iter().any(|&byte| needs_escape(byte)) {
        out.put(text);
        out.put("\"");
        return;
    }
    let mut run_start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        if !needs_escape(byte) {
            continue;
        }
        let mut control = [b'\\', b'u', b'0', b'0', 0, 0];
        let escape: &str = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            _ => {
                [control[4], control[5]] = crate::hash::hex_pair(byte);
                std::str::from_utf8(&control).expect("ASCII escape")
            }
        };
        // Escaped bytes are ASCII, so these slices fall on char boundaries.
        out.put(&text[run_start..index]);
        out.put(escape);
        run_start = index + 1;
    }
    out.put(&text[run_start..]);
    out.put("\"");
}
