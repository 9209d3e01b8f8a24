//! The trace: one canonical record per step, the rolling SHA-256 over their
//! canonical bytes, a ring of the last records for reports, and the JSON
//! lines written when `--trace FILE` asks for the whole trace.
//!
//! The canonical bytes are a fixed little-endian binary layout (see
//! `Record::encode`), not the JSON or the story: the hash must not change when
//! a message is reworded, and binary keeps the hot path cheap.

use std::collections::VecDeque;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::faults::{FaultKind, Site};
use crate::hash::{Sha, push_hex};
use crate::world::ids::{ActorId, EntryId, OutboxId, TaskId};
use crate::world::step::{Action, Verb};

/// One step, canonically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub step: u64,
    pub time_ms: u64,
    pub actor: ActorId,
    pub verb: Verb,
    /// What happened: `ok`, `timeout`, a reject reason, an error code.
    pub outcome: &'static str,
    pub task: Option<TaskId>,
    /// The message (outbox row) id the step was about.
    pub message: Option<OutboxId>,
    /// The broker entry the step was about.
    pub entry: Option<EntryId>,
    /// The attempt the step was about (0: none).
    pub attempt: u32,
    /// The task version the step left or saw, where it matters.
    pub version: Option<i64>,
    /// The hash the step involved: payload, artifact or event hash.
    pub hash: Option<Sha>,
    /// A fault injected during this step.
    pub fault: Option<(Site, FaultKind)>,
}

impl Record {
    pub fn action(&self) -> Action {
        Action::new(self.actor.kind, self.verb)
    }

    /// Appends the canonical bytes of this record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.step.to_le_bytes());
        out.extend_from_slice(&self.time_ms.to_le_bytes());
        out.push(self.actor.kind as u8);
        out.extend_from_slice(&self.actor.index.to_le_bytes());
        out.push(self.verb as u8);
        out.push(self.outcome.len() as u8);
        out.extend_from_slice(self.outcome.as_bytes());
        out.extend_from_slice(&self.task.map_or(0, |t| t.0).to_le_bytes());
        out.extend_from_slice(&self.message.map_or(0, |m| m.0).to_le_bytes());
        out.extend_from_slice(&self.entry.map_or(0, |e| e.0).to_le_bytes());
        out.extend_from_slice(&self.attempt.to_le_bytes());
        match self.version {
            Some(version) => {
                out.push(1);
                out.extend_from_slice(&version.to_le_bytes());
            }
            None => out.push(0),
        }
        match &self.hash {
            Some(hash) => {
                out.push(1);
                out.extend_from_slice(hash);
            }
            None => out.push(0),
        }
        match self.fault {
            Some((site, kind)) => {
                out.push(site as u8);
                out.push(kind as u8);
            }
            None => out.extend_from_slice(&[0xff, 0xff]),
        }
    }

    /// The record as one JSON object (for `--trace FILE`).
    pub fn write_json(&self, out: &mut String) {
        let _ = write!(
            out,
            r#"{{"step":{},"timeMs":{},"actor":"{}","action":"{}","outcome":"{}""#,
            self.step,
            self.time_ms,
            self.actor,
            self.action(),
            self.outcome
        );
        if let Some(task) = self.task {
            let _ = write!(out, r#","task":"{task}""#);
        }
        if let Some(message) = self.message {
            let _ = write!(out, r#","message":"{message}""#);
        }
        if let Some(entry) = self.entry {
            let _ = write!(out, r#","entry":"{entry}""#);
        }
        if self.attempt > 0 {
            let _ = write!(out, r#","attempt":{}"#, self.attempt);
        }
        if let Some(version) = self.version {
            let _ = write!(out, r#","version":{version}"#);
        }
        if let Some(hash) = &self.hash {
            out.push_str(r#","hash":""#);
            push_hex(out, hash);
            out.push('"');
        }
        if let Some((site, kind)) = self.fault {
            let _ = write!(out, r#","fault":"{}/{}""#, site.as_str(), kind.as_str());
        }
        out.push('}');
    }

    /// One aligned line of the human story.
    pub fn story_line(&self, colour: bool) -> String {
        let mut ids = String::new();
        if let Some(task) = self.task {
            let _ = write!(ids, " {task}");
        }
        if self.attempt > 0 {
            let _ = write!(ids, " attempt-{}", self.attempt);
        }
        if let Some(version) = self.version {
            let _ = write!(ids, " v{version}");
        }
        if let Some(message) = self.message {
            let _ = write!(ids, " {message}");
        }
        if let Some(entry) = self.entry {
            let _ = write!(ids, " {entry}");
        }
        if let Some(hash) = &self.hash {
            ids.push_str(" #");
            push_hex(&mut ids, &hash[..4]);
        }
        let mut line = format!(
            "{:>6}  {:>8}ms  {:<12} {:<22} {:<28}{}",
            self.step,
            self.time_ms,
            self.actor.to_string(),
            self.action().to_string(),
            self.outcome,
            ids
        );
        if let Some((site, kind)) = self.fault {
            let mark = format!("  <<< FAULT {}/{}", site.as_str(), kind.as_str());
            if colour {
                let _ = write!(line, "\x1b[33m{mark}\x1b[0m");
            } else {
                line.push_str(&mark);
            }
        }
        line
    }
}

/// How many records the ring keeps for reports.
pub const RING_LEN: usize = 32;

/// The trace of one run: rolling hash, ring of recent records, and the
/// optional full JSON-lines output.
pub struct Trace {
    hasher: Sha256,
    buffer: Vec<u8>,
    ring: VecDeque<Record>,
    /// Every record as a JSON line, when the whole trace was asked for.
    pub lines: Option<Box<dyn std::io::Write>>,
    json: String,
    /// Every record kept in memory (for the story and tests), when asked.
    pub kept: Option<Vec<Record>>,
    pub records: u64,
}

impl Trace {
    pub fn new() -> Trace {
        Trace {
            hasher: Sha256::new(),
            buffer: Vec::with_capacity(128),
            ring: VecDeque::with_capacity(RING_LEN),
            lines: None,
            json: String::new(),
            kept: None,
            records: 0,
        }
    }

    pub fn push(&mut self, record: Record) -> std::io::Result<()> {
        self.buffer.clear();
        record.encode(&mut self.buffer);
        // Length-prefixed so that record boundaries are part of the hash.
        self.hasher.update((self.buffer.len() as u32).to_le_bytes());
        self.hasher.update(&self.buffer);
        self.records += 1;
        if let Some(out) = self.lines.as_mut() {
            self.json.clear();
            record.write_json(&mut self.json);
            self.json.push('\n');
            out.write_all(self.json.as_bytes())?;
        }
        if let Some(kept) = self.kept.as_mut() {
            kept.push(record.clone());
        }
        if self.ring.len() == RING_LEN {
            self.ring.pop_front();
        }
        self.ring.push_back(record);
        Ok(())
    }

    /// The rolling SHA-256 of every record so far.
    pub fn sha256(&self) -> Sha {
        self.hasher.clone().finalize().into()
    }

    /// The last `n` records, oldest first.
    pub fn tail(&self, n: usize) -> Vec<&Record> {
        let skip = self.ring.len().saturating_sub(n);
        self.ring.iter().skip(skip).collect()
    }

    pub fn last(&self) -> Option<&Record> {
        self.ring.back()
    }
}

impl Default for Trace {
    fn default() -> Trace {
        Trace::new()
    }
}
