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
//! (`parse_transition_line`, `parse_event_line`), which builds no `Value`
//! because `sim transition` reads hundreds of thousands of lines a second.
//! Both gather the known fields into the same `Fields` and then run the same
//! checks, so both give the same answer and the same message (syntax errors
//! aside, which only the text route meets).

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

/// One line of `sim transition` input, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransitionInput {
    pub state: TaskState,
    pub event: TaskEvent,
    pub policy: Policy,
}

/// Reads a `TaskState` from a JSON value. All nine fields are required; the
/// nullable ones may be `null`. Unknown fields are ignored.
pub fn state_from_json(value: &Value) -> Result<TaskState, String> {
    match value {
        Value::Object(map) => state_from_fields("state", &fields_of_map(map, state_key::NAMES)),
        other => Err(format!(
            "state: expected an object, got {}",
            json_of_value(other).kind_name()
        )),
    }
}

/// Reads a `TaskEvent` from a JSON value: the base fields, then the fields of
/// its type. Unknown fields (including another type's) are ignored.
pub fn event_from_json(value: &Value) -> Result<TaskEvent, String> {
    match value {
        Value::Object(map) => event_from_fields("event", &fields_of_map(map, event_key::NAMES)),
        other => Err(format!(
            "event: expected an object, got {}",
            json_of_value(other).kind_name()
        )),
    }
}

/// Reads one `{"state":…,"event":…,"policy"?:…}` line without building a
/// `Value`. `policy` may be absent (completion-wins); any value other than
/// the two policy names is an error. Unknown keys are ignored.
pub fn parse_transition_line(line: &str) -> Result<TransitionInput, String> {
    let mut reader = Reader::new(line);
    let mut parts = LineParts {
        state: None,
        state_fields: Fields::new(state_key::NAMES),
        event: None,
        event_fields: Fields::new(event_key::NAMES),
        policy: None,
    };
    match read_line_parts(&mut reader, &mut parts) {
        Ok(Found::Object) => {}
        Ok(Found::Other(kind)) => {
            return Err(format!(
                "expected an object with \"state\" and \"event\", got {kind}"
            ));
        }
        Err(syntax) => return Err(reader.message(&syntax)),
    }
    let state = match parts.state {
        None => return Err("state: missing, expected an object".to_string()),
        Some(Found::Other(kind)) => return Err(format!("state: expected an object, got {kind}")),
        Some(Found::Object) => state_from_fields("state", &parts.state_fields)?,
    };
    let event = match parts.event {
        None => return Err("event: missing, expected an object".to_string()),
        Some(Found::Other(kind)) => return Err(format!("event: expected an object, got {kind}")),
        Some(Found::Object) => event_from_fields("event", &parts.event_fields)?,
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
    Ok(TransitionInput {
        state,
        event,
        policy,
    })
}

/// Reads one event line (the event object itself) without building a `Value`.
pub fn parse_event_line(line: &str) -> Result<TaskEvent, String> {
    let mut reader = Reader::new(line);
    let mut fields = Fields::new(event_key::NAMES);
    let found = reader
        .fields(event_key::position, &mut fields, 1)
        .and_then(|found| reader.end().map(|()| found));
    match found {
        Ok(Found::Object) => event_from_fields("event", &fields),
        Ok(Found::Other(kind)) => Err(format!("event: expected an object, got {kind}")),
        Err(syntax) => Err(reader.message(&syntax)),
    }
}

/// A JSON value as far as field checking needs it: scalars are kept,
/// containers are only named (their contents are skipped).
#[derive(Clone, Debug, PartialEq)]
enum Json<'a> {
    Null,
    Bool(bool),
    /// A number whose value is an integer that fits `i64`, written as an
    /// integer or as a float (`3.0`, `1e3`).
    Int(i64),
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
            Json::Int(_) | Json::NonIntegral(_) | Json::OutOfRange(_) => "number",
            Json::Str(_) => "string",
            Json::Array => "array",
            Json::Object => "object",
        }
    }
}

/// A number read as an f64: an integer when its value is one and fits i64.
fn json_of_f64(number: f64, written: Cow<'_, str>) -> Json<'_> {
    // 2^63 is exactly representable; every integral f64 in [-2^63, 2^63)
    // converts to i64 without loss.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if !number.is_finite() {
        Json::OutOfRange(written)
    } else if number.fract() != 0.0 {
        Json::NonIntegral(written)
    } else if (-LIMIT..LIMIT).contains(&number) {
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
            (None, Some(float)) if !number.is_u64() => {
                json_of_f64(float, Cow::Owned(number.to_string()))
            }
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
}

type StateFields<'a> = Fields<'a, { state_key::COUNT }>;
type EventFields<'a> = Fields<'a, { event_key::COUNT }>;

impl<'a, const N: usize> Fields<'a, N> {
    fn new(names: &'static [&'static str]) -> Fields<'a, N> {
        debug_assert_eq!(names.len(), N);
        Fields {
            names,
            values: std::array::from_fn(|_| None),
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
    fields
}

/// Checks one field at a time; the message names the field and the JSON type
/// that was expected.
struct Checker<'f, 'a, const N: usize> {
    prefix: &'static str,
    fields: &'f Fields<'a, N>,
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

    fn int(&self, field: usize) -> Result<i64, String> {
        const EXPECTED: &str = "an integer";
        match self.get(field, EXPECTED)? {
            Json::Int(number) => Ok(*number),
            other => Err(self.wrong(field, EXPECTED, other)),
        }
    }

    fn int_or_null(&self, field: usize) -> Result<Option<i64>, String> {
        const EXPECTED: &str = "an integer or null";
        match self.get(field, EXPECTED)? {
            Json::Int(number) => Ok(Some(*number)),
            Json::Null => Ok(None),
            other => Err(self.wrong(field, EXPECTED, other)),
        }
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

fn state_from_fields(prefix: &'static str, fields: &StateFields<'_>) -> Result<TaskState, String> {
    use state_key::*;
    let check = Checker { prefix, fields };
    // Fields are checked in the lesson's declaration order, so the first
    // problem reported is the same whichever route read the object.
    Ok(TaskState {
        task_id: check.string(TASK_ID)?,
        status: check.one_of(STATUS, STATUS_NAMES, Status::parse)?,
        version: check.int(VERSION)?,
        attempt: check.int(ATTEMPT)?,
        worker_id: check.string_or_null(WORKER_ID)?,
        lease_until_epoch_ms: check.int_or_null(LEASE_UNTIL_EPOCH_MS)?,
        cancellation_signal_id: check.string_or_null(CANCELLATION_SIGNAL_ID)?,
        artifact_sha256: check.string_or_null(ARTIFACT_SHA256)?,
        terminal_error_code: check.string_or_null(TERMINAL_ERROR_CODE)?,
    })
}

fn event_from_fields(prefix: &'static str, fields: &EventFields<'_>) -> Result<TaskEvent, String> {
    use event_key::*;
    let check = Checker { prefix, fields };
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
    Ok(TaskEvent {
        event_id,
        task_id,
        sequence,
        body,
    })
}

// --- the text route: a small JSON reader for exactly these shapes ---------
//
// Why not serde_json here: its default float parsing is not correctly
// rounded (the `float_roundtrip` feature is off), so `1037508080942616.000`
// reads as 1037508080942616.1 and an integral value would be refused as
// non-integral. Reading the text ourselves also lets a type problem be
// recorded instead of raised, so the checks above report it in field order
// with their own wording, and it skips building anything for unknown keys.
// The reader accepts RFC 8259 JSON as serde_json does (no comments, no
// trailing commas, no lone surrogates, at most `DEPTH_MAX` containers deep).

/// What stood where an object was expected.
#[derive(Clone, Copy)]
enum Found {
    Object,
    /// The name of the JSON type found instead.
    Other(&'static str),
}

/// The top level of a `sim transition` line. `None` where a key is absent;
/// a repeated key overwrites, as everywhere else.
struct LineParts<'a> {
    state: Option<Found>,
    state_fields: StateFields<'a>,
    event: Option<Found>,
    event_fields: EventFields<'a>,
    policy: Option<Json<'a>>,
}

/// The deepest nesting serde_json accepts (127 containers), kept so both
/// routes accept the same texts.
const DEPTH_MAX: usize = 127;

/// A syntax error: what was expected, at which byte.
struct Syntax {
    at: usize,
    message: &'static str,
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Reader<'a> {
        Reader {
            text,
            bytes: text.as_bytes(),
            at: 0,
        }
    }

    fn fail<T>(&self, message: &'static str) -> Result<T, Syntax> {
        Err(Syntax {
            at: self.at,
            message,
        })
    }

    /// The message for the line: the column counts characters from 1.
    fn message(&self, syntax: &Syntax) -> String {
        let column = self
            .text
            .get(..syntax.at)
            .map_or(syntax.at, |before| before.chars().count())
            + 1;
        format!("invalid JSON at column {column}: {}", syntax.message)
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes.get(self.at).copied()
    }

    /// Only whitespace may follow the value.
    fn end(&mut self) -> Result<(), Syntax> {
        match self.peek() {
            None => Ok(()),
            Some(_) => self.fail("trailing characters after the value"),
        }
    }

    /// Walks an object's members, handing each key to `member`, which must
    /// consume the value. The reader stands on `{`.
    fn object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Reader<'a>, &str, usize) -> Result<(), Syntax>,
    ) -> Result<(), Syntax> {
        if depth > DEPTH_MAX {
            return self.fail("nested too deeply");
        }
        self.at += 1;
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return self.fail("expected a string key");
            }
            let key = self.string()?;
            if self.peek() != Some(b':') {
                return self.fail("expected `:`");
            }
            self.at += 1;
            member(self, &key, depth + 1)?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return self.fail("expected `,` or `}`"),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Syntax> {
        if depth > DEPTH_MAX {
            return self.fail("nested too deeply");
        }
        self.at += 1;
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value(depth + 1)?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return self.fail("expected `,` or `]`"),
            }
        }
    }

    /// Any value; a container is checked and skipped, and only named.
    fn value(&mut self, depth: usize) -> Result<Json<'a>, Syntax> {
        match self.peek() {
            Some(b'{') => {
                self.object(depth, |reader, _, depth| reader.value(depth).map(drop))?;
                Ok(Json::Object)
            }
            Some(b'[') => {
                self.array(depth)?;
                Ok(Json::Array)
            }
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(_) => self.fail("expected a value"),
            None => self.fail("expected a value, found the end of the line"),
        }
    }

    /// An object read into `fields` (cleared first, so a repeated key of
    /// the parent replaces the whole object), or the name of the other value
    /// found.
    fn fields<const N: usize>(
        &mut self,
        position: fn(&str) -> Option<usize>,
        fields: &mut Fields<'a, N>,
        depth: usize,
    ) -> Result<Found, Syntax> {
        if self.peek() != Some(b'{') {
            return Ok(Found::Other(self.value(depth)?.kind_name()));
        }
        fields.values = std::array::from_fn(|_| None);
        self.object(depth, |reader, key, depth| {
            let value = reader.value(depth)?;
            // A repeated key keeps its last value, as `JSON.parse` and
            // `serde_json::Value` do.
            if let Some(index) = position(key) {
                fields.values[index] = Some(value);
            }
            Ok(())
        })?;
        Ok(Found::Object)
    }

    fn literal(&mut self, word: &'static str, value: Json<'a>) -> Result<Json<'a>, Syntax> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            self.fail("expected a value")
        }
    }

    /// A number as written: an integer token is read exactly; a token with a
    /// fraction or exponent is read as a correctly rounded f64 (what
    /// `JSON.parse` gives) and counts as an integer when its value is one.
    fn number(&mut self) -> Result<Json<'a>, Syntax> {
        let start = self.at;
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match self.bytes.get(self.at) {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return self.fail("invalid number"),
        }
        let mut integer = true;
        if self.bytes.get(self.at) == Some(&b'.') {
            integer = false;
            self.at += 1;
            if !matches!(self.bytes.get(self.at), Some(b'0'..=b'9')) {
                return self.fail("invalid number: expected a digit after `.`");
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            integer = false;
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            if !matches!(self.bytes.get(self.at), Some(b'0'..=b'9')) {
                return self.fail("invalid number: expected a digit in the exponent");
            }
            self.digits();
        }
        let token = &self.text[start..self.at];
        if integer {
            return Ok(match token.parse::<i64>() {
                Ok(number) => Json::Int(number),
                Err(_) => Json::OutOfRange(Cow::Borrowed(token)),
            });
        }
        match token.parse::<f64>() {
            Ok(number) => Ok(json_of_f64(number, Cow::Borrowed(token))),
            Err(_) => self.fail("invalid number"),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// A string; borrowed from the line unless it has escapes. The reader
    /// stands on the opening quote.
    fn string(&mut self) -> Result<Cow<'a, str>, Syntax> {
        self.at += 1;
        let start = self.at;
        loop {
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.at - 1]));
                }
                Some(b'\\') => break,
                Some(0x00..=0x1f) => return self.fail("control character in a string"),
                Some(_) => self.at += 1,
                None => return self.fail("unterminated string"),
            }
        }
        let mut owned = String::from(&self.text[start..self.at]);
        loop {
            let run_start = self.at;
            while let Some(byte) = self.bytes.get(self.at) {
                if matches!(byte, b'"' | b'\\' | 0x00..=0x1f) {
                    break;
                }
                self.at += 1;
            }
            // The run ends before an ASCII byte, so it ends on a char boundary.
            owned.push_str(&self.text[run_start..self.at]);
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(Cow::Owned(owned));
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escaped = match self.bytes.get(self.at) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            owned.push(self.unicode_escape()?);
                            continue;
                        }
                        _ => return self.fail("invalid escape"),
                    };
                    self.at += 1;
                    owned.push(escaped);
                }
                Some(_) => return self.fail("control character in a string"),
                None => return self.fail("unterminated string"),
            }
        }
    }

    /// `\uXXXX`, or a surrogate pair of two; the reader stands on the `u`.
    fn unicode_escape(&mut self) -> Result<char, Syntax> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if !self.bytes[self.at..].starts_with(b"\\u") {
                    return self.fail("lone surrogate in a \\u escape");
                }
                self.at += 1;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return self.fail("lone surrogate in a \\u escape");
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return self.fail("lone surrogate in a \\u escape"),
            other => other,
        };
        match char::from_u32(code) {
            Some(code) => Ok(code),
            None => self.fail("invalid \\u escape"),
        }
    }

    /// The four hex digits after a `u`; the reader stands on the `u`.
    fn hex4(&mut self) -> Result<u32, Syntax> {
        self.at += 1;
        let mut code = 0;
        for _ in 0..4 {
            let digit = self
                .bytes
                .get(self.at)
                .and_then(|byte| (*byte as char).to_digit(16));
            match digit {
                Some(digit) => code = code * 16 + digit,
                None => return self.fail("invalid \\u escape"),
            }
            self.at += 1;
        }
        Ok(code)
    }
}

/// Reads the whole line as one `{"state","event","policy"}` object.
fn read_line_parts<'a>(
    reader: &mut Reader<'a>,
    parts: &mut LineParts<'a>,
) -> Result<Found, Syntax> {
    if reader.peek() != Some(b'{') {
        let kind = reader.value(1)?.kind_name();
        reader.end()?;
        return Ok(Found::Other(kind));
    }
    reader.object(1, |reader, key, depth| {
        match key {
            "state" => {
                parts.state =
                    Some(reader.fields(state_key::position, &mut parts.state_fields, depth)?);
            }
            "event" => {
                parts.event =
                    Some(reader.fields(event_key::position, &mut parts.event_fields, depth)?);
            }
            "policy" => parts.policy = Some(reader.value(depth)?),
            _ => {
                reader.value(depth)?;
            }
        }
        Ok(())
    })?;
    reader.end()?;
    Ok(Found::Object)
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
