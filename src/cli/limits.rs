//! The ranges of the command line's numbers and the checks of its output
//! directory, made before anything runs: a flag out of range is exit 2
//! with a message naming it and its range, never a wrapped-around seed
//! range, an allocation that aborts, or a thread per job.

use std::path::Path;

use crate::error::InputError;

/// The longest fault phase a flag may ask for: a scenario's `steps_max`
/// allows no more.
pub const STEPS_MAX: u64 = 1_000_000_000_000;

/// Seeds one process runs. Each seed's result stays in memory until the
/// summary (a few KB each), so a million seeds is a few GB; a larger
/// campaign is split with `--shard I/N`.
pub const SEEDS_PER_PROCESS_MAX: u64 = 1_000_000;

/// Threads a campaign may ask for; more than there are seeds is clamped.
pub const JOBS_MAX: u64 = 1024;

/// `sim bench --repeat`: rounds of every workload, each a child process.
pub const REPEAT_MAX: u64 = 1000;

/// Clap's parser for `--steps`.
pub fn steps() -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::<u64>::new().range(1..=STEPS_MAX)
}

/// Clap's parser for `--jobs`.
pub fn jobs() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=JOBS_MAX)
}

/// Clap's parser for `--repeat`.
pub fn repeat() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=REPEAT_MAX)
}

/// Clap's parser for `--runs`: at least one seed; the upper bound depends
/// on `--seed` and `--shard` and is checked by `seed_range`.
pub fn runs() -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::<u64>::new().range(1..=u64::MAX)
}

/// Checks that `seed .. seed + runs - 1` fits in a u64 and that the seeds
/// this process runs (its shard's, if any) are within
/// `SEEDS_PER_PROCESS_MAX`. Returns how many seeds this process runs.
pub fn seed_range(seed: u64, runs: u64, shard: Option<(u64, u64)>) -> Result<u64, InputError> {
    if runs == 0 || seed.checked_add(runs - 1).is_none() {
        let most = u64::MAX - seed + 1;
        return Err(InputError::new(format!(
            "expected 1 to {most} runs from --seed {seed} (the last seed must not pass {}), found {runs}",
            u64::MAX
        ))
        .key("--runs"));
    }
    let mine = match shard {
        // Seeds first + index, first + index + count, … below first + runs.
        Some((index, count)) if index < runs => (runs - index).div_ceil(count),
        Some(_) => 0,
        None => runs,
    };
    if mine > SEEDS_PER_PROCESS_MAX {
        return Err(InputError::new(format!(
            "expected at most {SEEDS_PER_PROCESS_MAX} seeds in one process, found {mine}; split the range with --shard I/N"
        ))
        .key("--runs"));
    }
    Ok(mine)
}

/// The threads worth starting for `seeds` seeds: never more than the
/// seeds. Says so on standard error when it clamps, unless quiet.
pub fn jobs_for(jobs: usize, seeds: u64, quiet: bool) -> usize {
    let work = usize::try_from(seeds.max(1)).unwrap_or(usize::MAX);
    if jobs > work {
        if !quiet {
            crate::errln!("note: --jobs {jobs} clamped to {work}, one thread per seed");
        }
        return work;
    }
    jobs
}

/// Checks, before a campaign starts, that reproducers can be written to
/// `dir`: it is a directory (or can become one: its nearest existing
/// ancestor is a directory) and a file can be created in it. Nothing is
/// left behind.
pub fn check_out_dir(dir: &Path) -> Result<(), InputError> {
    let fail = |message: String| Err(InputError::new(message).in_file(dir).key("--out"));
    let mut existing = dir;
    loop {
        match std::fs::metadata(existing) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) if existing == dir => {
                return fail("is not a directory; expected a directory for reproducers".into());
            }
            Ok(_) => {
                return fail(format!(
                    "{} is not a directory; expected a directory for reproducers",
                    existing.display()
                ));
            }
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                return fail(format!("cannot use: {error}"));
            }
            Err(error) => match existing.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
                _ if existing != Path::new(".") => existing = Path::new("."),
                _ => return fail(format!("cannot use: {error}")),
            },
        }
    }
    let probe = existing.join(format!(".sim-write-check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) => fail(format!("cannot write reproducers here: {error}")),
    }
}

/// Says on standard error which reproducers could not be written; true
/// when any could not.
pub fn report_unwritten(results: &[crate::fuzz::campaign::SeedResult]) -> bool {
    let mut any = false;
    for error in results
        .iter()
        .filter_map(|result| result.repro_error.as_ref())
    {
        crate::errln!(
            "error: cannot write reproducer {}",
            crate::escape::escape(error)
        );
        any = true;
    }
    any
}
