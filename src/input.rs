//! Reading input with a bound: a scenario file, a JSON line, an event
//! history. `/dev/zero`, or one line of three gigabytes, is an error that
//! names the bound, never an allocation that aborts.

use std::io::{self, BufRead, Read};
use std::path::Path;

/// The longest scenario file read. A reproducer of a 10^6-step fuzz run,
/// every request and fault written out, is some ten megabytes.
pub const SCENARIO_BYTES_MAX: u64 = 256 << 20;

/// The longest JSON line of `sim transition` and `sim replay-events`: a
/// task state with its event is a few hundred bytes.
pub const LINE_BYTES_MAX: usize = 1 << 20;

/// The longest `sim fuzz --json` summary `sim fuzz merge` reads: one is a
/// few KB, its failures a few dozen bytes each.
pub const SUMMARY_BYTES_MAX: u64 = 64 << 20;

/// The longest event history `sim replay-events` reads: one task's.
pub const HISTORY_BYTES_MAX: u64 = 64 << 20;

/// What `read_line` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// The input has ended.
    End,
    /// A line (with its `\n`, if it had one) is in the buffer.
    Read,
    /// The line was longer than the bound; it was read to its end and
    /// dropped, and the buffer is empty.
    TooLong,
}

/// Reads one line into `raw` (cleared first), keeping at most `max`
/// bytes before its `\n`; a longer line is consumed to its end without
/// being kept.
pub fn read_line(input: &mut impl BufRead, raw: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    raw.clear();
    let mut any = false;
    let mut too_long = false;
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if buffer.is_empty() {
            break;
        }
        any = true;
        let (taken, ended) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let content = if ended { taken - 1 } else { taken };
        if !too_long && raw.len() + content > max {
            too_long = true;
            *raw = Vec::new();
        }
        if !too_long {
            raw.extend_from_slice(&buffer[..taken]);
        }
        input.consume(taken);
        if ended {
            break;
        }
    }
    Ok(match (any, too_long) {
        (false, _) => Line::End,
        (true, false) => Line::Read,
        (true, true) => Line::TooLong,
    })
}

/// The whole of `path`, if it has at most `max` bytes. `Err` carries the
/// message for an `InputError` on the file.
pub fn read_file(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|error| format!("cannot read: {error}"))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot read: {error}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("is longer than {max} bytes, the most sim reads"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_dropped_and_the_next_one_read() {
        let text = format!("ab\n{}\ncd", "x".repeat(100));
        let mut input = io::BufReader::with_capacity(7, text.as_bytes());
        let mut raw = Vec::new();
        assert_eq!(read_line(&mut input, &mut raw, 10).unwrap(), Line::Read);
        assert_eq!(raw, b"ab\n");
        assert_eq!(read_line(&mut input, &mut raw, 10).unwrap(), Line::TooLong);
        assert!(raw.is_empty());
        assert_eq!(read_line(&mut input, &mut raw, 10).unwrap(), Line::Read);
        assert_eq!(raw, b"cd");
        assert_eq!(read_line(&mut input, &mut raw, 10).unwrap(), Line::End);
    }

    #[test]
    fn a_line_of_exactly_the_bound_is_kept() {
        let mut input = io::BufReader::with_capacity(3, &b"0123456789\n"[..]);
        let mut raw = Vec::new();
        assert_eq!(read_line(&mut input, &mut raw, 10).unwrap(), Line::Read);
        assert_eq!(raw, b"0123456789\n");
    }
}
