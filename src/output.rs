//! Where sim's output goes. Standard output and error survive a reader
//! that goes away early (`sim run repro.toml | head -3`): the rest of the
//! output is dropped but not the verdict (the exit code is the run's), where
//! `println!` would panic. Any other write failure (a full disk) is an error
//! naming the stream or file, exit 2, and a file that could not be written
//! whole is removed. Text that came from input is shown through `escape`,
//! so a scenario cannot drive the terminal.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output's reader has gone: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to standard output and flushes it.
pub fn print(text: &str) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(error) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        closed_or_exit(error, "standard output");
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// The one rule for a failed write to `stream`: a reader that went away
/// returns (the caller drops the rest of its output); anything else ends
/// sim with exit 2.
pub(crate) fn closed_or_exit(error: std::io::Error, stream: &str) {
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        crate::errln!("error: cannot write to {stream}: {error}");
        exit_input();
    }
}

/// A writer for standard output or error with the same rules as `print`:
/// once its reader has gone, the rest is dropped and the run goes on to
/// its verdict; any other failure ends sim with exit 2.
pub struct Guarded<W> {
    stream: &'static str,
    inner: W,
    closed: bool,
}

impl<W> Guarded<W> {
    pub fn new(stream: &'static str, inner: W) -> Guarded<W> {
        Guarded {
            stream,
            inner,
            closed: false,
        }
    }

    fn failed(&mut self, error: std::io::Error) {
        closed_or_exit(error, self.stream);
        self.closed = true;
    }
}

impl<W: std::io::Write> std::io::Write for Guarded<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if !self.closed
            && let Err(error) = self.inner.write_all(bytes)
        {
            self.failed(error);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.closed
            && let Err(error) = self.inner.flush()
        {
            self.failed(error);
        }
        Ok(())
    }
}

/// `print!` that never panics on a closed pipe.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::print(&format!($($arg)*))
    };
}

/// `println!` that never panics on a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::print("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Files this run created for its output, removed if it ends with exit 2:
/// then nothing else is written.
static CREATED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Registers an output file this run created.
pub fn created(path: &std::path::Path) {
    if let Ok(mut created) = CREATED.lock() {
        created.push(path.to_path_buf());
    }
}

/// Ends sim with exit 2 after a failed write, removing the output files it
/// created.
pub fn exit_input() -> ! {
    remove_created();
    std::process::exit(i32::from(crate::error::EXIT_INPUT));
}

/// Removes the output files this run created (see `created`).
pub fn remove_created() {
    if let Ok(mut created) = CREATED.lock() {
        for path in created.drain(..) {
            remove_partial(&path);
        }
    }
}

/// Removes what a failed write left behind, if it is a regular file (never
/// a device or a pipe the user named).
pub fn remove_partial(path: &std::path::Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_file()) {
        let _ = std::fs::remove_file(path);
    }
}

/// `eprintln!` that never panics: when standard error itself cannot be
/// written there is nowhere left to say so, and the exit code still tells.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
