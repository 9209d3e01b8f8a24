//! Scenarios: the validated description of one run (world shape, seed,
//! requests, faults, expectations), parsed from TOML in `parse.rs` and
//! written back as TOML by reproducers in `write.rs`.

pub mod parse;
pub mod write;

use crate::config::Config;
use crate::faults::ScriptedFault;
use crate::mutants::Mutant;
use std::rc::Rc;

use crate::task::{TaskEvent, Text};
use crate::world::engine::ids::{DeadLetterId, OutboxId, TaskId};
use crate::world::stores::db::Input;

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
    pub expect: Expect,
    /// Where it came from, for messages and reproduce commands.
    pub path: Option<String>,
    /// Reproducers record these; a mismatch is a warning.
    pub sim_version: Option<String>,
    pub config_sha256: Option<String>,
}

/// Which task a cancel or a status read is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The task created under this idempotency key.
    Key(Text),
    Task(TaskId),
}

/// Which dead letter an operator replays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeadLetterRef {
    Id(DeadLetterId),
    /// The first dead letter of this message.
    Message(OutboxId),
    /// The first dead letter of this task.
    Task(TaskId),
}

#[derive(Clone, Debug, PartialEq)]
pub enum RequestKind {
    /// The input is parsed once, into its canonical JSON and hash: a
    /// request is cloned into the log and sent again on every retry.
    Create {
        key: Text,
        input: Rc<Input>,
    },
    Cancel {
        target: Target,
    },
    ReadStatus {
        target: Target,
    },
    ReplayDeadLetter {
        dead_letter: DeadLetterRef,
    },
    BumpHandlerVersion {
        version: u64,
    },
    AppendEvent {
        event: TaskEvent,
    },
    DeliverEvent {
        event: TaskEvent,
    },
}

impl RequestKind {
    pub fn name(&self) -> &'static str {
        match self {
            RequestKind::Create { .. } => "create",
            RequestKind::Cancel { .. } => "cancel",
            RequestKind::ReadStatus { .. } => "read-status",
            RequestKind::ReplayDeadLetter { .. } => "replay-dead-letter",
            RequestKind::BumpHandlerVersion { .. } => "bump-handler-version",
            RequestKind::AppendEvent { .. } => "append-event",
            RequestKind::DeliverEvent { .. } => "deliver-event",
        }
    }

    /// Requests a client sends to an API; the others are operator actions.
    pub fn from_client(&self) -> bool {
        matches!(
            self,
            RequestKind::Create { .. }
                | RequestKind::Cancel { .. }
                | RequestKind::ReadStatus { .. }
        )
    }
}

/// One `[[requests]]` entry. Two creates with the same key and the same
/// input are one client intent (the second is a retry); ground truth joins
/// them.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub at_ms: u64,
    pub kind: RequestKind,
    /// 0-based client index (`client-1` is 0).
    pub client: u16,
    /// 0-based API index the first send goes to; round-robin when absent.
    pub api: Option<u16>,
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
