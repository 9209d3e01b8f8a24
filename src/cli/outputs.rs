//! Output files named on the command line, checked and opened before the
//! run: a directory, a device that refuses writes (`/dev/full`), the input
//! file itself or the same file named twice is exit 2 before a step runs,
//! and when one check fails the files already created for the others are
//! removed, so that on exit 2 nothing else is written.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::InputError;

/// An output file opened before the run.
#[derive(Debug)]
pub struct Output {
    pub path: PathBuf,
    pub file: File,
    /// Whether sim created it (then a failure later removes it).
    pub created: bool,
}

/// Checks every `(flag, path)` against the `inputs` and each other, then
/// opens them all. A regular file is emptied only once every check has
/// passed, so a refused run leaves an existing file as it was; files this
/// call created are removed again when a later one fails.
pub fn open_all(outputs: &[(&str, &Path)], inputs: &[&Path]) -> Result<Vec<Output>, InputError> {
    for (index, (flag, path)) in outputs.iter().enumerate() {
        check_path(flag, path, inputs)?;
        for (other_flag, other) in &outputs[..index] {
            if same_file(path, other) {
                return Err(InputError::new(format!(
                    "names the same file as {other_flag}; expected a file of its own"
                ))
                .in_file(path)
                .key(*flag));
            }
        }
    }
    let mut opened: Vec<Output> = Vec::new();
    for (_, path) in outputs {
        match open_one(path) {
            Ok(output) => opened.push(output),
            Err(error) => {
                remove_created(&opened);
                return Err(InputError::new(format!("cannot write: {error}")).in_file(path));
            }
        }
    }
    for output in &opened {
        if output.file.metadata().is_ok_and(|meta| meta.is_file())
            && let Err(error) = output.file.set_len(0)
        {
            remove_created(&opened);
            return Err(InputError::new(format!("cannot write: {error}")).in_file(&output.path));
        }
    }
    // From here a failed write anywhere (exit 2) removes them again.
    for output in opened.iter().filter(|output| output.created) {
        crate::output::created(&output.path);
    }
    Ok(opened)
}

/// Removes the files `open_all` created (never a file that was there).
pub fn remove_created(outputs: &[Output]) {
    for output in outputs.iter().filter(|output| output.created) {
        crate::output::remove_partial(&output.path);
    }
}

fn check_path(flag: &str, path: &Path, inputs: &[&Path]) -> Result<(), InputError> {
    let fail = |message: &str| Err(InputError::new(message).in_file(path).key(flag));
    if path.as_os_str().is_empty() {
        return fail("is empty; expected a file name");
    }
    if std::fs::metadata(path).is_ok_and(|meta| meta.is_dir()) {
        return fail("is a directory; expected a file");
    }
    if inputs.iter().any(|input| same_file(path, input)) {
        return fail("is an input of this run; refusing to overwrite it");
    }
    Ok(())
}

/// Whether two paths name one existing file: the same device and inode
/// (hard links and symbolic links included), else the same canonical path.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    matches!((identity(a), identity(b)), (Some(x), Some(y)) if x == y)
}

/// The canonical path of a file, or of its directory joined with its name
/// when the file does not exist yet.
fn identity(path: &Path) -> Option<PathBuf> {
    if let Ok(found) = std::fs::canonicalize(path) {
        return Some(found);
    }
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(parent).ok()?.join(name))
}

/// Opens without emptying; a write of no bytes finds a device that
/// refuses every write (`/dev/full` answers it with "no space left").
fn open_one(path: &Path) -> std::io::Result<Output> {
    let existed = std::fs::symlink_metadata(path).is_ok();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let output = Output {
        path: path.to_path_buf(),
        created: !existed,
        file: file.try_clone()?,
    };
    if let Err(error) = file.write(&[]) {
        remove_created(std::slice::from_ref(&output));
        return Err(error);
    }
    Ok(output)
}
