//! Canonical JSON of lesson 003's shapes (states, events, transition
//! results) and the hashes the protocol keeps: the event payload and state
//! SHA-256.
//!
//! Every object sim writes is canonical JSON: keys sorted by byte order at
//! every depth, no whitespace. That is exactly what `serde_json` prints for
//! a `Value` (its map is a `BTreeMap`), so the `Value` writers of
//! `crate::lesson_json` and the fast `write_*` writers here agree byte for
//! byte, and a hash is the SHA-256 of what the writer prints. Reading these
//! shapes (input of `sim transition`, `sim replay-events` and scenario
//! files) lives in `crate::lesson_json`: no step of the protocol reads JSON.

use sha2::{Digest, Sha256};

use crate::hash::Sha;
use crate::task::{EventBody, TaskEvent, TaskState, Transition};

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
