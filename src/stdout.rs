//! Standard output the way a command-line tool should treat it: a reader
//! that goes away early (`sim mutants | head -3`) ends sim quietly, where
//! `println!` would panic.

use std::io::Write as _;

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        gone(&error);
    }
}

/// Ends sim after standard output failed: quietly with exit 0 when the
/// reader closed the pipe (it has read all it wanted), with a message and
/// exit 2 for anything else (a full disk, say).
pub fn gone(error: &std::io::Error) -> ! {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("error: cannot write to standard output: {error}");
    std::process::exit(i32::from(crate::error::EXIT_INPUT));
}

/// `print!` that never panics on a closed pipe.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::print(&format!($($arg)*))
    };
}

/// `println!` that never panics on a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::print("\n")
    };
    ($($arg:tt)*) => {
        $crate::stdout::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// A writer that ends sim as `gone` does when a write fails, so a story
/// streamed into a closed pipe stops the run instead of running on unseen.
pub struct OrExit<W>(pub W);

impl<W: std::io::Write> std::io::Write for OrExit<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes).or_else(|error| gone(&error))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().or_else(|error| gone(&error))
    }
}
