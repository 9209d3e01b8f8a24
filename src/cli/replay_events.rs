//! `sim replay-events FILE [--task ID] [--policy P]`: lesson 003's replay
//! as a command-line tool. It folds one task's JSON-lines history and
//! prints the state (exit 0), or the first event that cannot be applied,
//! with its line (exit 1); a file that is not a history is exit 2, naming
//! the line and column.

use std::io::{BufReader, Read as _};
use std::path::Path;

use crate::error::{EXIT_INPUT, EXIT_OK, EXIT_VIOLATION, InputError};
use crate::input::{HISTORY_BYTES_MAX, LINE_BYTES_MAX, Line, read_line};
use crate::lesson_json::{Reading, invalid_history_to_json, parse_event_line};
use crate::task::json::write_state;
use crate::task::replay::{InvalidHistory, replay};
use crate::task::{Policy, TaskEvent, Text};

use super::transition::{BUFFER_BYTES, open_input, physical_line, too_long};

/// One event of the file and where it stands.
struct Located {
    line: usize,
    event: TaskEvent,
}

/// `sim replay-events`. The task is `--task`, or else the task of the
/// file's first event; an event of another task is an invalid history
/// (TASK_ID_MISMATCH at its line), as lesson 003's replay, which is given
/// the task, answers it. An empty history is the task's initial state
/// when `--task` names it, and exit 2 without it.
pub fn run_replay_events(file: &Path, policy: Policy, task: Option<&str>, reading: Reading) -> u8 {
    let events = match read_events(file, reading) {
        Ok(events) => events,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    let task_id: Text = match (task, events.first()) {
        (Some(task), _) => task.into(),
        (None, Some(first)) => first.event.task_id.clone(),
        (None, None) => {
            crate::errln!(
                "{}",
                InputError::new(
                    "no events, expected JSON lines of one task's events (--task ID replays an empty history to the task's initial state)"
                )
                .in_file(file)
            );
            return EXIT_INPUT;
        }
    };
    let (lines, ordered) = in_sequence_order(events);
    let (line, code) = match replay(task_id, &ordered, policy) {
        Ok(state) => {
            let mut line = String::new();
            write_state(&mut line, &state);
            (line, EXIT_OK)
        }
        Err(invalid) => {
            let at = lines[failing_index(&ordered, policy, &invalid)];
            let mut json = invalid_history_to_json(&invalid);
            json["invalid"]["line"] = at.into();
            (json.to_string(), EXIT_VIOLATION)
        }
    };
    crate::outln!("{line}");
    code
}

/// The events sorted by sequence as `fold` sorts them (stably), and each
/// one's line.
fn in_sequence_order(mut events: Vec<Located>) -> (Vec<usize>, Vec<TaskEvent>) {
    events.sort_by_key(|located| located.event.sequence);
    events
        .into_iter()
        .map(|located| (located.line, located.event))
        .unzip()
}

/// The index (in sequence order) of the event the replay stopped at: the
/// shortest prefix whose replay fails ends with it. A prefix of a history
/// that fails at event k fails there too, so the search halves.
fn failing_index(ordered: &[TaskEvent], policy: Policy, invalid: &InvalidHistory) -> usize {
    let task = invalid.state_before.task_id.clone();
    let (mut low, mut high) = (0, ordered.len() - 1);
    while low < high {
        let middle = low + (high - low) / 2;
        if replay(task.clone(), &ordered[..=middle], policy).is_err() {
            high = middle;
        } else {
            low = middle + 1;
        }
    }
    low
}

/// Every event of the file, in file order, each with its line. Blank lines
/// are skipped; anything else that is not a well-typed event is an error
/// naming its line and column.
fn read_events(path: &Path, reading: Reading) -> Result<Vec<Located>, InputError> {
    let whole = |message: String| InputError::new(message).in_file(path);
    let file = open_input(path).map_err(whole)?;
    // One byte past the bound tells a history that is too long.
    let mut input = BufReader::with_capacity(BUFFER_BYTES, file.take(HISTORY_BYTES_MAX + 1));
    let mut raw = Vec::new();
    let mut events = Vec::new();
    let mut line_number = 0usize;
    loop {
        let read = read_line(&mut input, &mut raw, LINE_BYTES_MAX)
            .map_err(|error| whole(format!("cannot read: {error}")))?;
        if input.get_ref().limit() == 0 {
            return Err(whole(format!(
                "is longer than {HISTORY_BYTES_MAX} bytes, the most sim reads as one task's history"
            )));
        }
        if read == Line::End {
            break;
        }
        line_number += 1;
        if read == Line::TooLong {
            return Err(whole(too_long()).at(line_number, LINE_BYTES_MAX + 1));
        }
        let line = std::str::from_utf8(physical_line(&raw, line_number)).map_err(|error| {
            let column = error.valid_up_to() + 1;
            whole(format!(
                "invalid UTF-8 at byte {column}, expected a JSON event"
            ))
            .at(line_number, column)
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let event = parse_event_line(line, reading)
            .map_err(|message| whole(message.clone()).at(line_number, column_of(line, &message)))?;
        events.push(Located {
            line: line_number,
            event,
        });
    }
    Ok(events)
}

/// Where on its line an event's error is: the column the message states
/// (`invalid JSON at column 12`), else serde_json's column for broken
/// JSON, else the column of the field the message names
/// (`event.taskId: …`), else 1.
fn column_of(line: &str, message: &str) -> usize {
    let stated = message.split_once("column ").and_then(|(_, rest)| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<usize>().ok()
    });
    if let Some(column) = stated.filter(|column| *column > 0) {
        return column;
    }
    if let Err(error) = serde_json::from_str::<serde_json::Value>(line) {
        return error.column().max(1);
    }
    let field = message
        .strip_prefix("event.")
        .and_then(|rest| rest.split([':', '.', ' ']).next())
        .filter(|field| !field.is_empty());
    field
        .and_then(|field| line.find(&format!("\"{field}\"")))
        .map_or(1, |at| line[..at].chars().count() + 1)
}
