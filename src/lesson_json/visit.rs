//! The text route: serde_json's tokenizer feeds visitors that fill the
//! reader's `Fields` without building a `Value`.
//
// `serde_json::Deserializer` tokenizes the line and these visitors gather
// the known fields into the same `Fields` the value route fills, without
// building a `Value`: a string is borrowed from the line when it has no
// escapes, a container where a scalar belongs is skipped, an unknown key's
// value is skipped. Skipping goes through `deserialize_any` at every level
// (not `IgnoredAny`), so serde_json's nesting limit holds for skipped
// values too and this route accepts exactly the texts a `Value` does. The
// checks above then run in field order with their own wording.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::fields::{EventFields, Fields, Json, StateFields, event_key, keep_smallest, state_key};

/// What stood where an object was expected. The object's fields are
/// written in place, into the `Fields` the seed holds: returned by value
/// through serde's layers, a line's 26 fields (about 900 bytes) were
/// copied at every layer, 12% of `sim transition`'s time in `memcpy`.
#[derive(Clone, Copy)]
pub(super) enum Found {
    Object,
    /// The name of the JSON type found instead.
    Other(&'static str),
}

/// A JSON value as `Json`: scalars kept, containers skipped.
pub(super) struct JsonVisitor;

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
pub(super) struct KeyVisitor;

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
pub(super) struct FieldsSeed<'f, 'de, const N: usize> {
    pub(super) fields: &'f mut Fields<'de, N>,
    pub(super) position: fn(&str) -> Option<usize>,
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
pub(super) struct LineParts<'a> {
    pub(super) state: Option<Found>,
    pub(super) state_fields: StateFields<'a>,
    pub(super) event: Option<Found>,
    pub(super) event_fields: EventFields<'a>,
    pub(super) policy: Option<Json<'a>>,
    /// The smallest other key, if any.
    pub(super) unknown: Option<Cow<'a, str>>,
}

/// A whole `sim transition` line, into `parts`.
pub(super) struct LineSeed<'p, 'de> {
    pub(super) parts: &'p mut LineParts<'de>,
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
pub(super) fn read_whole<'de, S: DeserializeSeed<'de>>(
    line: &'de str,
    seed: S,
) -> Result<S::Value, String> {
    let mut deserializer = serde_json::Deserializer::from_str(line);
    let value = seed
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|error| syntax_message(line, &error))?;
    Ok(value)
}

/// serde_json's message, with its position as a character column.
pub(super) fn syntax_message(line: &str, error: &serde_json::Error) -> String {
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
