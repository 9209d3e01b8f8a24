//! Scenarios: the validated description of one run (world shape, seed,
//! requests, faults, expectations), parsed from TOML in `parse.rs` and
//! written back as TOML by reproducers in `write.rs`; `names.rs` reads the
//! world's actor, step and wake names back from text.

mod names;
pub mod parse;
pub mod write;

use crate::config::Config;
use crate::faults::ScriptedFault;
use crate::mutants::Mutant;
use crate::world::engine::schedule::Wake;
use crate::world::input::Setup;

/// A scenario's requests are the world's own input: the parser and the
/// fuzz generator both produce `world::input` values.
pub use crate::world::input::{DeadLetterRef, Request, RequestKind, Target};

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub steps_max: u64,
    pub mutant: Option<Mutant>,
    pub config: Config,
    pub requests: Vec<Request>,
    pub faults: Vec<ScriptedFault>,
    /// Wakes fired first, in this order (a model checker's counterexample).
    pub schedule: Vec<Wake>,
    pub expect: Expect,
    /// Where it came from, for messages and reproduce commands.
    pub path: Option<String>,
    /// Reproducers record these; a mismatch is a warning.
    pub sim_version: Option<String>,
    pub config_sha256: Option<String>,
}

impl Scenario {
    /// What the world is built from: everything but the name, the step
    /// budget and the expectations, which judge the run from outside.
    pub fn setup(&self) -> Setup {
        Setup {
            seed: self.seed,
            mutant: self.mutant,
            config: self.config.clone(),
            requests: self.requests.clone(),
            faults: self.faults.clone(),
            schedule: self.schedule.clone(),
        }
    }
}

/// What an `[expect]` fact demands of the value at its pointer: equal to
/// a JSON value, or one of the three forms a value cannot say, written as
/// a one-key inline table: `{ null = true }` (present and null),
/// `{ absent = true }` (no value there) and `{ len = N }` (an array or
/// object of N entries, or a string of N characters).
#[derive(Clone, Debug, PartialEq)]
pub enum Matcher<'a> {
    Equals(&'a serde_json::Value),
    Null,
    Absent,
    Len(u64),
}

impl Matcher<'_> {
    /// The matcher an expected value spells.
    pub fn of(expected: &serde_json::Value) -> Matcher<'_> {
        if let Some(map) = expected.as_object()
            && map.len() == 1
        {
            let (name, value) = map.iter().next().expect("one entry");
            match (name.as_str(), value) {
                ("null", serde_json::Value::Bool(true)) => return Matcher::Null,
                ("absent", serde_json::Value::Bool(true)) => return Matcher::Absent,
                ("len", value) if value.is_u64() => {
                    return Matcher::Len(value.as_u64().expect("u64"));
                }
                _ => {}
            }
        }
        Matcher::Equals(expected)
    }

    /// `None` when `actual` (the dump's value, if any) is what the matcher
    /// demands; else what was found instead, as a sentence.
    pub fn judge(&self, pointer: &str, actual: Option<&serde_json::Value>) -> Option<String> {
        let len = |value: &serde_json::Value| match value {
            serde_json::Value::Array(items) => Some(items.len() as u64),
            serde_json::Value::Object(map) => Some(map.len() as u64),
            serde_json::Value::String(text) => Some(text.chars().count() as u64),
            _ => None,
        };
        match (self, actual) {
            (Matcher::Equals(expected), Some(actual)) if actual == *expected => None,
            (Matcher::Equals(expected), Some(actual)) => {
                Some(format!("{pointer} is {actual}, expected {expected}"))
            }
            (Matcher::Equals(expected), None) => Some(format!(
                "{pointer} is absent from the dump, expected {expected}"
            )),
            (Matcher::Null, Some(serde_json::Value::Null)) => None,
            (Matcher::Null, Some(actual)) => Some(format!("{pointer} is {actual}, expected null")),
            (Matcher::Null, None) => {
                Some(format!("{pointer} is absent from the dump, expected null"))
            }
            (Matcher::Absent, None) => None,
            (Matcher::Absent, Some(_)) => Some(format!(
                "{pointer} is present, expected it absent from the dump"
            )),
            (Matcher::Len(n), Some(actual)) if len(actual) == Some(*n) => None,
            (Matcher::Len(n), Some(actual)) => Some(match len(actual) {
                Some(found) => format!("{pointer} has {found} entries, expected {n}"),
                None => format!("{pointer} is {actual}, which has no length; expected {n} entries"),
            }),
            (Matcher::Len(n), None) => Some(format!(
                "{pointer} is absent from the dump, expected {n} entries"
            )),
        }
    }
}

/// `[expect]`: facts about the final dump, and the violation a scenario
/// must produce, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// JSON pointer into the dump → expected JSON value, or a matcher
    /// (`Matcher::of`) spelled as a one-key table.
    pub facts: Vec<(String, serde_json::Value)>,
    pub violation: Option<String>,
}
