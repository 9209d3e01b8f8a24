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

    /// Writes the canonical bytes of this record to `out`.
    pub fn encode(&self, out: &mut Encoded) {
        out.put_array(self.step.to_le_bytes());
        out.put_array(self.time_ms.to_le_bytes());
        out.put_array([self.actor.kind as u8]);
        out.put_array(self.actor.index.to_le_bytes());
        // Outcomes are short words written in sim's own code, never input.
        debug_assert!(
            self.outcome.len() <= usize::from(u8::MAX),
            "{}",
            self.outcome
        );
        out.put_array([self.verb as u8, self.outcome.len() as u8]);
        out.put(self.outcome.as_bytes());
        out.put_array(self.task.map_or(0, |t| t.0).to_le_bytes());
        out.put_array(self.message.map_or(0, |m| m.0).to_le_bytes());
        out.put_array(self.entry.map_or(0, |e| e.0).to_le_bytes());
        out.put_array(self.attempt.to_le_bytes());
        match self.version {
            Some(version) => {
                out.put_array([1]);
                out.put_array(version.to_le_bytes());
            }
            None => out.put_array([0]),
        }
        match &self.hash {
            Some(hash) => {
                out.put_array([1]);
                out.put_array(*hash);
            }
            None => out.put_array([0]),
        }
        match self.fault {
            Some((site, kind)) => out.put_array([site as u8, kind as u8]),
            None => out.put_array([0xff, 0xff]),
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

/// Records' canonical bytes, each preceded by its length (little-endian
/// `u32`), gathered in a fixed buffer until a few kilobytes are there: the
/// hasher then reads whole blocks in place, instead of copying every
/// record into its block buffer, and encoding does no allocation.
pub struct Encoded {
    bytes: Box<[u8; Encoded::CAPACITY]>,
    len: usize,
    /// Where the record being encoded starts (its length prefix).
    start: usize,
}

impl Encoded {
    /// The length prefix, the fixed fields (81 bytes) and the longest
    /// outcome a one-byte length can announce.
    const RECORD_MAX: usize = 4 + 81 + u8::MAX as usize;
    /// Gathered bytes are hashed once fewer than `RECORD_MAX` are free.
    const CAPACITY: usize = 4096;

    pub fn new() -> Encoded {
        Encoded {
            bytes: Box::new([0; Encoded::CAPACITY]),
            len: 0,
            start: 0,
        }
    }

    /// Whether the next record might not fit.
    fn full(&self) -> bool {
        self.len + Encoded::RECORD_MAX > Encoded::CAPACITY
    }

    /// The gathered bytes; `clear` starts over.
    fn gathered(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn put(&mut self, bytes: &[u8]) {
        self.bytes[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// `put` for a fixed-size field: the copy is a few stores, not a call.
    fn put_array<const N: usize>(&mut self, bytes: [u8; N]) {
        let field: &mut [u8; N] = (&mut self.bytes[self.len..self.len + N])
            .try_into()
            .expect("N bytes");
        *field = bytes;
        self.len += N;
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Starts a record: room for its length prefix.
    fn begin(&mut self) {
        self.start = self.len;
        self.len += 4;
    }

    /// Ends a record by writing its length before it: the rolling hash
    /// reads the prefix too, so record boundaries are part of the hash.
    fn end(&mut self) {
        let len = (self.len - self.start - 4) as u32;
        self.bytes[self.start..self.start + 4].copy_from_slice(&len.to_le_bytes());
    }
}

impl Default for Encoded {
    fn default() -> Encoded {
        Encoded::new()
    }
}

/// How many records the ring keeps for reports.
pub const RING_LEN: usize = 32;

/// The trace of one run: rolling hash, ring of recent records, and the
/// optional full JSON-lines output.
pub struct Trace {
    hasher: Sha256,
    buffer: Encoded,
    ring: VecDeque<Record>,
    /// Every record as a JSON line, when the whole trace was asked for.
    pub lines: Option<Box<dyn std::io::Write>>,
    json: String,
    /// Every record kept in memory (for the story and tests), when asked.
    pub kept: Option<Vec<Record>>,
}

impl Trace {
    pub fn new() -> Trace {
        Trace {
            hasher: Sha256::new(),
            buffer: Encoded::new(),
            ring: VecDeque::with_capacity(RING_LEN),
            lines: None,
            json: String::new(),
            kept: None,
        }
    }

    /// Appends `record` (borrowed: the ring keeps the one copy made).
    pub fn push(&mut self, record: &Record) -> std::io::Result<()> {
        self.buffer.begin();
        record.encode(&mut self.buffer);
        self.buffer.end();
        if self.buffer.full() {
            self.hasher.update(self.buffer.gathered());
            self.buffer.clear();
        }
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
        self.ring.push_back(record.clone());
        Ok(())
    }

    /// The rolling SHA-256 of every record so far.
    pub fn sha256(&self) -> Sha {
        let mut hasher = self.hasher.clone();
        hasher.update(self.buffer.gathered());
        hasher.finalize().into()
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

/// The `--trace FILE` writer: a failed write (a full disk) ends sim with a
/// message naming the file and exit 2, and removes the partial file.
pub struct TraceFile {
    path: std::path::PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl TraceFile {
    pub fn new(path: &std::path::Path, file: std::fs::File) -> TraceFile {
        TraceFile {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
        }
    }

    fn fail(&self, error: &std::io::Error) -> ! {
        crate::output::remove_partial(&self.path);
        let message = crate::error::InputError::new(format!("cannot write the trace: {error}"))
            .in_file(&self.path);
        crate::errln!("{message}");
        std::process::exit(i32::from(crate::error::EXIT_INPUT));
    }
}

impl std::io::Write for TraceFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.file.write(bytes).or_else(|error| self.fail(&error))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush().or_else(|error| self.fail(&error))
    }
}
