//! Lesson 003's JSON shapes as input and output formats: reading states,
//! events and `sim transition` lines (for `sim transition`, `sim
//! replay-events` and scenario files), and writing them as `serde_json`
//! values (for the dump and `sim transition`'s reference output).
//!
//! Reading has two routes with one set of checks: from a `serde_json::Value`
//! (`state_from_json`, `event_from_json`) and straight from text
//! (`parse_transition_line`, `parse_event_line`), where serde_json's
//! tokenizer feeds visitors that build no `Value` (`visit.rs`). Both gather
//! the known fields into the same `Fields` and then run the same checks, so
//! both give the same answer and the same message (syntax errors aside,
//! which only the text route meets). The text route replaced a hand-written
//! reader: on `sim bench`'s transition workload it reads 11% fewer lines a
//! second (README, Decisions), under the 25% that would justify a parser of
//! our own.
//!
//! `names.rs` reads statuses, event types and policies back from text.
//!
//! None of this is the protocol: no step of the world reads or builds a
//! `Value`. The canonical writers and hashes the protocol keeps are in
//! `crate::task::json`.

mod fields;
mod names;
mod read;
mod value;
mod visit;

pub use fields::Reading;
pub use read::{
    TransitionInput, event_from_json, parse_event_line, parse_transition_line, state_from_json,
};
pub use value::{event_to_json, invalid_history_to_json, result_to_json, state_to_json};
