//! What both reading routes fill: a JSON value as far as field checks need
//! it, the shapes' field names, and the known fields of one object.

use std::borrow::Cow;

use serde_json::{Map, Value};

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

/// A JSON value as far as field checking needs it: scalars are kept,
/// containers are only named (their contents are skipped).
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Json<'a> {
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
    pub(super) fn kind_name(&self) -> &'static str {
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
pub(super) fn json_of_f64(number: f64, written: Cow<'_, str>) -> Json<'_> {
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

pub(super) fn json_of_value(value: &Value) -> Json<'_> {
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
        pub(super) mod $module {
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
pub(super) struct Fields<'a, const N: usize> {
    pub(super) names: &'static [&'static str],
    pub(super) values: [Option<Json<'a>>; N],
    /// The smallest key (by bytes) the shape does not have, if any: the
    /// same whichever route read the object, whatever the key order.
    pub(super) unknown: Option<Cow<'a, str>>,
}

pub(super) type StateFields<'a> = Fields<'a, { state_key::COUNT }>;
pub(super) type EventFields<'a> = Fields<'a, { event_key::COUNT }>;

impl<'a, const N: usize> Fields<'a, N> {
    pub(super) fn new(names: &'static [&'static str]) -> Fields<'a, N> {
        debug_assert_eq!(names.len(), N);
        Fields {
            names,
            values: std::array::from_fn(|_| None),
            unknown: None,
        }
    }

    pub(super) fn note_unknown(&mut self, key: Cow<'a, str>) {
        keep_smallest(&mut self.unknown, key);
    }

    /// In a strict reading: the first field present that the shape, as
    /// narrowed to `allowed` positions, does not have.
    pub(super) fn check_extra(
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

pub(super) fn fields_of_map<'a, const N: usize>(
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

/// Keeps the smallest key seen (by bytes), so both routes name the same
/// one whatever order the keys came in.
pub(super) fn keep_smallest<'a>(slot: &mut Option<Cow<'a, str>>, key: Cow<'a, str>) {
    if slot.as_ref().is_none_or(|known| key < *known) {
        *slot = Some(key);
    }
}
