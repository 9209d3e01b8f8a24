//! `sim transition`: lesson 003's state machine as a command-line tool
//! over JSON lines (`sim replay-events` is in `replay_events.rs`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use crate::error::{EXIT_INPUT, EXIT_OK};
use crate::input::{LINE_BYTES_MAX, Line, read_line};
use crate::lesson_json::{Reading, parse_transition_line};
use crate::task::json::write_result;
use crate::task::transition;

/// Input and output buffers: large enough that a million lines cost a few
/// thousand system calls, small enough not to matter.
pub(super) const BUFFER_BYTES: usize = 1 << 16;

/// `sim transition [FILE]`: one result (or error) line per non-empty input
/// line, in order. Exit 0, or 2 when any line erred or the input could not
/// be read.
pub fn run_transition(file: Option<&Path>, reading: Reading) -> u8 {
    transition_to(file, reading, io::stdout().lock())
}

/// `sim transition [FILE]` with the results going to `output` (the bench
/// sends them to /dev/null, in its own process).
pub fn transition_to(file: Option<&Path>, reading: Reading, output: impl Write) -> u8 {
    let outcome = match file {
        Some(path) => match open_input(path) {
            Ok(input) => transition_lines(
                BufReader::with_capacity(BUFFER_BYTES, input),
                reading,
                output,
            ),
            Err(message) => {
                let path = path.display().to_string();
                crate::errln!("error: {}: {message}", crate::escape::escape(&path));
                return EXIT_INPUT;
            }
        },
        None => {
            let stdin = io::stdin();
            transition_lines(
                BufReader::with_capacity(BUFFER_BYTES, stdin.lock()),
                reading,
                output,
            )
        }
    };
    let name = file.map_or_else(|| "<stdin>".to_string(), |path| path.display().to_string());
    let name = crate::escape::escape(&name);
    match outcome {
        Ok(Lines { erred: false }) => EXIT_OK,
        Ok(Lines { erred: true }) => EXIT_INPUT,
        Err(Failure::Read(error)) => {
            crate::errln!("error: {name}: cannot read: {error}");
            EXIT_INPUT
        }
        // A reader that went away (`sim transition … | head`) is not an
        // error worth a message; the exit code still says whether any line
        // that was read had erred. Any other failed write ends sim there.
        Err(Failure::Write(error, erred)) => {
            crate::output::closed_or_exit(error, "standard output");
            if erred { EXIT_INPUT } else { EXIT_OK }
        }
    }
}

/// Opens a file for reading, refusing a directory up front: on Linux opening
/// one succeeds and only the first read fails.
pub(super) fn open_input(path: &Path) -> Result<File, String> {
    let metadata = std::fs::metadata(path).map_err(|error| error.to_string())?;
    if metadata.is_dir() {
        return Err("is a directory, expected a JSON-lines file".to_string());
    }
    File::open(path).map_err(|error| error.to_string())
}

struct Lines {
    erred: bool,
}

enum Failure {
    Read(io::Error),
    /// The write error, and whether a line had erred before it.
    Write(io::Error, bool),
}

fn transition_lines(
    mut input: impl BufRead,
    reading: Reading,
    mut output: impl Write,
) -> Result<Lines, Failure> {
    let mut raw = Vec::new();
    // Results accumulate here and go out in large writes.
    let mut text = String::with_capacity(BUFFER_BYTES + 4096);
    let mut line_number = 0usize;
    let mut erred = false;
    loop {
        let read = read_line(&mut input, &mut raw, LINE_BYTES_MAX).map_err(Failure::Read)?;
        if read == Line::End {
            break;
        }
        line_number += 1;
        if read == Line::TooLong {
            erred = true;
            push_error_line(&mut text, &too_long(), line_number);
            continue;
        }
        let bytes = physical_line(&raw, line_number);
        match std::str::from_utf8(bytes) {
            Err(error) => {
                erred = true;
                let message = format!("invalid UTF-8 at byte {}", error.valid_up_to() + 1);
                push_error_line(&mut text, &message, line_number);
            }
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => match parse_transition_line(line, reading) {
                Ok(parsed) => {
                    let outcome = transition(&parsed.state, &parsed.event, parsed.policy);
                    write_result(&mut text, &parsed.state, &outcome);
                    text.push('\n');
                }
                Err(message) => {
                    erred = true;
                    push_error_line(&mut text, &message, line_number);
                }
            },
        }
        if text.len() >= BUFFER_BYTES {
            output
                .write_all(text.as_bytes())
                .map_err(|error| Failure::Write(error, erred))?;
            text.clear();
        }
    }
    output
        .write_all(text.as_bytes())
        .and_then(|()| output.flush())
        .map_err(|error| Failure::Write(error, erred))?;
    Ok(Lines { erred })
}

/// The bytes of one physical line: without its `\n`, and without a UTF-8
/// byte-order mark when it is the first line (editors on some systems add
/// one; it is not part of the JSON).
pub(super) fn physical_line(raw: &[u8], line_number: usize) -> &[u8] {
    let bytes = raw.strip_suffix(b"\n").unwrap_or(raw);
    if line_number == 1 {
        bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
    } else {
        bytes
    }
}

pub(super) fn too_long() -> String {
    format!("line is longer than {LINE_BYTES_MAX} bytes; expected one JSON object per line")
}

fn push_error_line(text: &mut String, message: &str, line_number: usize) {
    // The message may echo input; JSON escapes C0 controls but not C1 or
    // U+2028, so it is escaped first.
    let message = crate::escape::escape(message);
    let value = serde_json::json!({ "error": message, "line": line_number });
    text.push_str(&value.to_string());
    text.push('\n');
}
