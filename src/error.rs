//! Exit codes and the one error type for bad usage or input.
//!
//! A bad scenario file is an `InputError` with a clear message (exit 2). A
//! broken assumption inside sim is a panic. A violation of an invariant by
//! the simulated system is neither: it is a reported outcome (exit 1 or 3).

use std::fmt;
use std::path::Path;

/// The run ended as the scenario expects.
pub const EXIT_OK: u8 = 0;
/// A safety invariant fired or an expectation failed.
pub const EXIT_VIOLATION: u8 = 1;
/// Bad usage or input.
pub const EXIT_INPUT: u8 = 2;
/// The system did not converge after the faults stopped.
pub const EXIT_NOT_CONVERGED: u8 = 3;

/// Bad usage or input: which file, where in it, which key, what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub file: Option<String>,
    /// 1-based line and column, where the input has them.
    pub position: Option<(usize, usize)>,
    pub key: Option<String>,
    pub message: String,
}

impl InputError {
    pub fn new(message: impl Into<String>) -> InputError {
        InputError {
            file: None,
            position: None,
            key: None,
            message: message.into(),
        }
    }

    pub fn in_file(mut self, file: &Path) -> InputError {
        self.file = Some(file.display().to_string());
        self
    }

    pub fn at(mut self, line: usize, column: usize) -> InputError {
        self.position = Some((line, column));
        self
    }

    pub fn key(mut self, key: impl Into<String>) -> InputError {
        self.key = Some(key.into());
        self
    }
}

/// Every part may carry text from the input (a file name, a key, a value
/// echoed back), so each is shown through `escape::escape`.
impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::escape::escape;
        write!(f, "error: ")?;
        if let Some(file) = &self.file {
            write!(f, "{}", escape(file))?;
            if let Some((line, column)) = self.position {
                write!(f, ":{line}:{column}")?;
            }
            write!(f, ": ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "`{}`: ", escape(key))?;
        }
        write!(f, "{}", escape(&self.message))
    }
}

impl std::error::Error for InputError {}

/// 1-based (line, column) of a byte offset in `text`; the column counts
/// characters, not bytes, so it matches what an editor shows.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |index| index + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_column_counts_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, 9), (2, 3));
    }

    #[test]
    fn display_names_file_position_and_key() {
        let error = InputError::new("expected an integer")
            .in_file(Path::new("s.toml"))
            .at(3, 7)
            .key("config.apis");
        assert_eq!(
            error.to_string(),
            "error: s.toml:3:7: `config.apis`: expected an integer"
        );
    }

    #[test]
    fn display_escapes_what_came_from_the_input() {
        let error = InputError::new("found \"\u{1b}]0;x\u{7}\"")
            .in_file(Path::new("a\nb.toml"))
            .key("expect.\u{2028}");
        assert_eq!(
            error.to_string(),
            "error: a\\nb.toml: `expect.\\u{2028}`: found \"\\x1b]0;x\\x07\""
        );
    }
}
