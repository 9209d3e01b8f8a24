//! The trace: one canonical record per step, the rolling SHA-256 over their
//! canonical bytes (none in an unhashed or silent trace), a ring of the
//! last records for reports, and the JSON lines written when `--trace FILE`
//! asks for the whole trace.
//!
//! The canonical bytes are a compact binary layout of varints (see
//! `Record::encode`), not the JSON or the story: the hash must not change when
//! a message is reworded, and binary keeps the hot path cheap.

use std::collections::VecDeque;
use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::faults::{FaultKind, Site};
use crate::hash::{Sha, push_hex};
use crate::world::engine::ids::{ActorId, EntryId, OutboxId, TaskId};
use crate::world::engine::step::{Action, Verb};

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
    /// The record a step starts from: the operator, nothing named yet.
    pub fn blank() -> Record {
        Record {
            step: 0,
            time_ms: 0,
            actor: ActorId::OPERATOR,
            verb: Verb::Send,
            outcome: "ok",
            task: None,
            message: None,
            entry: None,
            attempt: 0,
            version: None,
            hash: None,
            fault: None,
        }
    }

    pub fn action(&self) -> Action {
        Action::new(self.actor.kind, self.verb)
    }

    /// Writes the canonical bytes of this record to `out`: integers as
    /// LEB128 varints (ids, times and steps are small, so most take one to
    /// three bytes), and one byte saying which optional fields follow.
    /// Each field's length is known from its own bytes (varints end
    /// themselves, the outcome has its length, an optional field its bit),
    /// so a sequence of records reads back one way only and needs no
    /// length prefix: two traces that differ in any field, an absent id
    /// and id 0 included, hash differently.
    fn encode(&self, encoded: &mut Encoded) {
        encoded.append(|out| {
            out.put_varint(self.step);
            out.put_varint(self.time_ms);
            out.put_array([self.actor.kind as u8]);
            out.put_varint(u64::from(self.actor.index));
            // Outcomes are short words written in sim's own code, never input;
            // a longer one would make the length byte lie, so it is a bug.
            let outcome_len = u8::try_from(self.outcome.len()).expect("outcomes are short words");
            out.put_array([self.verb as u8, outcome_len]);
            out.put(self.outcome.as_bytes());
            out.put_varint(u64::from(self.attempt));
            let present = u8::from(self.task.is_some())
                | u8::from(self.message.is_some()) << 1
                | u8::from(self.entry.is_some()) << 2
                | u8::from(self.version.is_some()) << 3
                | u8::from(self.hash.is_some()) << 4
                | u8::from(self.fault.is_some()) << 5;
            out.put_array([present]);
            for id in [
                self.task.map(|t| t.0),
                self.message.map(|m| m.0),
                self.entry.map(|e| e.0),
            ]
            .into_iter()
            .flatten()
            {
                out.put_varint(u64::from(id));
            }
            if let Some(version) = self.version {
                // Zigzag: a small negative version is a short varint too.
                out.put_varint(((version << 1) ^ (version >> 63)) as u64);
            }
            if let Some(hash) = &self.hash {
                out.put_array(*hash);
            }
            if let Some((site, kind)) = self.fault {
                out.put_array([site as u8, kind as u8]);
            }
        });
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

    /// The header line of the human story, aligned with `story_line`: the
    /// ids a step was about follow its outcome (the README explains them).
    pub fn story_header() -> String {
        format!(
            "{:>6}  {:>10}  {:<12} {:<22} {:<28}{}",
            "step",
            "time",
            "actor",
            "action",
            "outcome",
            " task attempt-N vN message entry-N #hash"
        )
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

/// Records' canonical bytes, one after another, gathered in a fixed buffer
/// until a few kilobytes are there: the hasher then reads whole blocks in
/// place, instead of copying every record into its block buffer, and
/// encoding does no allocation.
#[derive(Clone)]
struct Encoded {
    /// `CAPACITY` bytes, or none in a trace that hashes nothing.
    bytes: Box<[u8]>,
    len: usize,
}

impl Encoded {
    /// The longest record: eight varints of at most ten bytes each (step,
    /// time, actor index, attempt, three ids, version), four single bytes
    /// (actor kind, verb, outcome length, presence), a hash, a fault and the
    /// longest outcome a one-byte length can announce.
    const RECORD_MAX: usize = 8 * 10 + 4 + 32 + 2 + u8::MAX as usize;
    /// Gathered bytes are hashed once fewer than `RECORD_MAX` are free.
    const CAPACITY: usize = 4096;

    fn new() -> Encoded {
        Encoded {
            bytes: vec![0; Encoded::CAPACITY].into_boxed_slice(),
            len: 0,
        }
    }

    /// The buffer of a trace that hashes nothing: nothing is ever
    /// gathered in it, and a copy of a world (the model checker's, at every
    /// branch) then copies no 4 KB of it.
    fn unused() -> Encoded {
        Encoded {
            bytes: Box::default(),
            len: 0,
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

    /// Appends what `write` puts through a cursor of its own, which starts
    /// after the gathered bytes.
    fn append(&mut self, write: impl FnOnce(&mut Writer<'_>)) {
        let mut out = Writer {
            at: self.len,
            bytes: &mut self.bytes[..],
        };
        write(&mut out);
        self.len = out.at;
    }

    fn clear(&mut self) {
        self.len = 0;
    }
}

/// Writes one record's bytes. Its position is a local the compiler keeps
/// in a register: as a field of `Encoded`, every byte stored (which may
/// alias any memory) made it reload and store the length again.
struct Writer<'a> {
    bytes: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.bytes[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    /// An unsigned integer as LEB128: seven bits a byte, low bits first,
    /// the top bit set on every byte but the last.
    fn put_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes[self.at] = value as u8 | 0x80;
            self.at += 1;
            value >>= 7;
        }
        self.bytes[self.at] = value as u8;
        self.at += 1;
    }

    /// `put` for a fixed-size field: the copy is a few stores, not a call.
    fn put_array<const N: usize>(&mut self, bytes: [u8; N]) {
        let field: &mut [u8; N] = (&mut self.bytes[self.at..self.at + N])
            .try_into()
            .expect("N bytes");
        *field = bytes;
        self.at += N;
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
    pub lines: Option<TraceFile>,
    json: String,
    /// Every record kept in memory (for the story and tests), when asked.
    pub kept: Option<Vec<Record>>,
    /// Keeps the last record only (`Trace::silent`).
    silent: bool,
}

/// A copy for the model checker, which forks a world at every branch. A
/// trace file is an open file written as the run goes: a fork cannot share
/// it, so a world writing one is never forked.
impl Clone for Trace {
    fn clone(&self) -> Trace {
        assert!(
            self.lines.is_none(),
            "a world writing a trace file is never forked"
        );
        Trace {
            hasher: self.hasher.clone(),
            buffer: self.buffer.clone(),
            ring: self.ring.clone(),
            lines: None,
            json: self.json.clone(),
            kept: self.kept.clone(),
            silent: self.silent,
        }
    }
}

impl Trace {
    pub fn new() -> Trace {
        Trace::gathering_into(Encoded::new())
    }

    /// A trace whose records are encoded into `buffer`: none are when it
    /// has no room (`Encoded::unused`), and then nothing is hashed.
    fn gathering_into(buffer: Encoded) -> Trace {
        Trace {
            hasher: Sha256::new(),
            buffer,
            ring: VecDeque::with_capacity(RING_LEN),
            lines: None,
            json: String::new(),
            kept: None,
            silent: false,
        }
    }

    /// A trace that keeps the last record only, and hashes nothing: the
    /// model checker's worlds, whose traces nobody reads past the step
    /// under way (a counterexample is replayed by `sim run`), and whose
    /// copies then carry one record, not a ring of them.
    pub fn silent() -> Trace {
        Trace {
            silent: true,
            ..Trace::unhashed()
        }
    }

    /// A trace that keeps its ring of recent records (and the whole trace
    /// or its lines, when asked) but encodes and hashes nothing: a fuzz
    /// seed's, whose `traceSha256` nobody reads unless its determinism is
    /// checked. Hashing was about 5% of a swarm campaign's time.
    pub fn unhashed() -> Trace {
        Trace::gathering_into(Encoded::unused())
    }

    /// Whether `sha256` may be asked for: the trace has a buffer to gather
    /// records in.
    pub fn hashed(&self) -> bool {
        !self.buffer.bytes.is_empty()
    }

    /// Appends `record` (borrowed: the ring keeps the one copy made).
    pub fn push(&mut self, record: &Record) {
        if self.silent {
            // Only the last record stays: the step's own code and the
            // invariant checker read it back once it is recorded.
            self.ring.clear();
            self.ring.push_back(record.clone());
            return;
        }
        if self.hashed() {
            record.encode(&mut self.buffer);
            if self.buffer.full() {
                self.hasher.update(self.buffer.gathered());
                self.buffer.clear();
            }
        }
        if let Some(out) = self.lines.as_mut() {
            self.json.clear();
            record.write_json(&mut self.json);
            self.json.push('\n');
            out.write(self.json.as_bytes());
        }
        if let Some(kept) = self.kept.as_mut() {
            kept.push(record.clone());
        }
        if self.ring.len() == RING_LEN {
            self.ring.pop_front();
        }
        self.ring.push_back(record.clone());
    }

    /// Flushes and closes the `--trace` file, if there is one.
    pub fn close_lines(&mut self) -> Result<(), crate::error::InputError> {
        match self.lines.take() {
            Some(lines) => lines.finish(),
            None => Ok(()),
        }
    }

    /// The rolling SHA-256 of every record so far. Asking it of a trace
    /// that hashes nothing is a bug in sim.
    pub fn sha256(&self) -> Sha {
        assert!(self.hashed(), "the hash of a trace that hashes nothing");
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

/// The `--trace FILE` writer. A failed write (a full disk) stops the
/// writing and is kept; `Trace::close_lines` returns it, naming the file,
/// and removes the partial file, so the caller reports it (exit 2) before
/// anything is said about the run. Nothing in the simulation prints.
pub struct TraceFile {
    path: std::path::PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    error: Option<std::io::Error>,
}

impl TraceFile {
    pub fn new(path: &std::path::Path, file: std::fs::File) -> TraceFile {
        TraceFile {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            error: None,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        use std::io::Write;
        if self.error.is_none()
            && let Err(error) = self.file.write_all(bytes)
        {
            self.error = Some(error);
        }
    }

    /// Flushes the file; the first failure of any write, if one failed.
    fn finish(mut self) -> Result<(), crate::error::InputError> {
        use std::io::Write;
        let failed = match self.error.take() {
            Some(error) => Some(error),
            None => self.file.flush().err(),
        };
        match failed {
            None => Ok(()),
            Some(error) => {
                crate::output::remove_partial(&self.path);
                Err(
                    crate::error::InputError::new(format!("cannot write the trace: {error}"))
                        .in_file(&self.path),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::engine::ids::ActorKind;

    /// One record's fields read back from canonical bytes.
    #[derive(Debug, PartialEq)]
    struct Fields {
        /// Step, time, actor kind, actor index, verb, attempt.
        numbers: [u64; 6],
        outcome: Vec<u8>,
        /// Task, message and entry ids.
        ids: [Option<u64>; 3],
        version: Option<i64>,
        hash: Option<Sha>,
        fault: Option<[u8; 2]>,
    }

    impl Fields {
        fn of(record: &Record) -> Fields {
            Fields {
                numbers: [
                    record.step,
                    record.time_ms,
                    record.actor.kind as u64,
                    u64::from(record.actor.index),
                    record.verb as u64,
                    u64::from(record.attempt),
                ],
                outcome: record.outcome.as_bytes().to_vec(),
                ids: [
                    record.task.map(|t| u64::from(t.0)),
                    record.message.map(|m| u64::from(m.0)),
                    record.entry.map(|e| u64::from(e.0)),
                ],
                version: record.version,
                hash: record.hash,
                fault: record.fault.map(|(site, kind)| [site as u8, kind as u8]),
            }
        }
    }

    fn varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = bytes[*at];
            *at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        value
    }

    fn byte(bytes: &[u8], at: &mut usize) -> u8 {
        *at += 1;
        bytes[*at - 1]
    }

    /// Reads records back, each from where the last one ended: what makes
    /// the layout need no length prefix.
    fn decode(bytes: &[u8]) -> Vec<Fields> {
        let mut at = 0;
        let mut records = Vec::new();
        while at < bytes.len() {
            let step = varint(bytes, &mut at);
            let time = varint(bytes, &mut at);
            let kind = u64::from(byte(bytes, &mut at));
            let index = varint(bytes, &mut at);
            let verb = u64::from(byte(bytes, &mut at));
            let outcome_len = usize::from(byte(bytes, &mut at));
            let outcome = bytes[at..at + outcome_len].to_vec();
            at += outcome_len;
            let attempt = varint(bytes, &mut at);
            let present = byte(bytes, &mut at);
            let mut ids = [None; 3];
            for (bit, id) in ids.iter_mut().enumerate() {
                if present & (1 << bit) != 0 {
                    *id = Some(varint(bytes, &mut at));
                }
            }
            let version = (present & 8 != 0).then(|| {
                let zigzag = varint(bytes, &mut at);
                (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64)
            });
            let hash = (present & 16 != 0).then(|| {
                let hash: Sha = bytes[at..at + 32].try_into().expect("32 bytes");
                at += 32;
                hash
            });
            let fault = (present & 32 != 0).then(|| [byte(bytes, &mut at), byte(bytes, &mut at)]);
            records.push(Fields {
                numbers: [step, time, kind, index, verb, attempt],
                outcome,
                ids,
                version,
                hash,
                fault,
            });
        }
        records
    }

    #[test]
    fn records_read_back_from_their_canonical_bytes() {
        let wide = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let mut encoded = Encoded::new();
        let mut expected = Vec::new();
        for n in 0..60usize {
            let number = |salt: usize| wide[(n + salt) % wide.len()];
            let record = Record {
                step: number(0),
                time_ms: number(1),
                actor: ActorId {
                    kind: ActorKind::ALL[n % ActorKind::ALL.len()],
                    index: number(2) as u16,
                },
                verb: Verb::ALL[n % Verb::ALL.len()],
                outcome: ["ok", "", "timeout"][n % 3],
                // Absent and id 0 both come up, and must differ.
                task: (n % 2 == 0).then(|| TaskId(number(3) as u32)),
                message: (n % 3 == 0).then(|| OutboxId(number(4) as u32)),
                entry: (n % 5 != 0).then(|| EntryId(number(5) as u32)),
                attempt: number(6) as u32,
                version: (n % 4 != 0).then(|| [-1, 0, 1, i64::MAX, i64::MIN][n % 5]),
                hash: (n % 3 != 1).then_some([n as u8; 32]),
                fault: (n % 7 == 0).then(|| (Site::ALL[n % Site::ALL.len()], FaultKind::Tamper)),
            };
            record.encode(&mut encoded);
            expected.push(Fields::of(&record));
        }
        assert_eq!(decode(encoded.gathered()), expected);
    }

    /// `RECORD_MAX` bounds the longest record there can be, which is what
    /// keeps every write inside the buffer.
    #[test]
    fn the_longest_record_fits_in_record_max() {
        let outcome: &'static str = Box::leak("x".repeat(usize::from(u8::MAX)).into_boxed_str());
        let record = Record {
            step: u64::MAX,
            time_ms: u64::MAX,
            actor: ActorId {
                kind: ActorKind::Reconciler,
                index: u16::MAX,
            },
            verb: Verb::ALL[Verb::ALL.len() - 1],
            outcome,
            task: Some(TaskId(u32::MAX)),
            message: Some(OutboxId(u32::MAX)),
            entry: Some(EntryId(u32::MAX)),
            attempt: u32::MAX,
            version: Some(i64::MIN),
            hash: Some([0xff; 32]),
            fault: Some((Site::ALL[0], FaultKind::Crash)),
        };
        let mut encoded = Encoded::new();
        record.encode(&mut encoded);
        assert!(encoded.gathered().len() <= Encoded::RECORD_MAX);
        assert_eq!(decode(encoded.gathered()), vec![Fields::of(&record)]);
    }

    /// A trace that hashes nothing keeps the same ring and whole list as
    /// one that hashes, and asking its hash is a bug, not a hash of nothing.
    #[test]
    fn an_unhashed_trace_keeps_what_a_hashed_one_keeps() {
        let mut hashed = Trace::new();
        let mut unhashed = Trace::unhashed();
        hashed.kept = Some(Vec::new());
        unhashed.kept = Some(Vec::new());
        let before = hashed.sha256();
        for step in 1..=(RING_LEN as u64 + 5) {
            let record = Record {
                step,
                time_ms: step * 3,
                verb: Verb::ALL[step as usize % Verb::ALL.len()],
                task: Some(TaskId(step as u32)),
                ..Record::blank()
            };
            hashed.push(&record);
            unhashed.push(&record);
        }
        assert_ne!(hashed.sha256(), before, "the hashed trace hashed");
        assert!(hashed.hashed());
        assert!(!unhashed.hashed());
        assert_eq!(unhashed.tail(RING_LEN), hashed.tail(RING_LEN));
        assert_eq!(unhashed.tail(RING_LEN).len(), RING_LEN);
        assert_eq!(unhashed.kept, hashed.kept);
        assert_eq!(unhashed.last().map(|r| r.step), Some(RING_LEN as u64 + 5));
        let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unhashed.sha256()));
        assert!(asked.is_err(), "an unhashed trace has no hash to give");
    }

    #[test]
    fn varints_take_seven_bits_a_byte() {
        let mut encoded = Encoded::new();
        encoded.append(|out| {
            for value in [0, 127, 128, 300, u64::MAX] {
                out.put_varint(value);
            }
        });
        let mut expected = vec![0x00, 0x7f, 0x80, 0x01, 0xac, 0x02];
        expected.extend([0xff; 9]);
        expected.push(0x01);
        assert_eq!(encoded.gathered(), expected.as_slice());
    }
}
