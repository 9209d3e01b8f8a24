//! `sim fuzz`: a campaign over seeds with its summary — runs, steps, speed,
//! the swarm draw of a single seed, faults by site and kind, invariant
//! checks, coverage and "sometimes" targets, manual reviews, violations —
//! as text or as JSON, and `sim fuzz merge` to add up shards' JSON.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::error::{EXIT_INPUT, InputError};
use crate::mutants::Mutant;

use crate::fuzz::campaign::{CampaignOptions, run_seeds};
use crate::fuzz::summary::Summary;

#[derive(clap::Args, Clone, Debug)]
pub struct FuzzOptions {
    /// First seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Steps of each run's fault phase (1 to 10^12)
    #[arg(long, default_value_t = 10_000, value_parser = crate::cli::limits::steps())]
    pub steps: u64,
    /// Seeds to run: seed .. seed + runs - 1 (at most 10^6 in one process; see --shard)
    #[arg(long, default_value_t = 1, value_parser = crate::cli::limits::runs())]
    pub runs: u64,
    /// Threads (1 to 1024, at most one per seed); each simulation stays single-threaded and results are identical to --jobs 1
    #[arg(long, default_value_t = 1, value_parser = crate::cli::limits::jobs())]
    pub jobs: usize,
    /// Switch off one protocol guard (see `sim mutants`)
    #[arg(long, value_parser = crate::cli::args::parse_mutant)]
    pub mutant: Option<Mutant>,
    /// Run each seed twice and compare traceSha256
    #[arg(long)]
    pub check_determinism: bool,
    /// Directory for repro-<seed>.toml files (default: current directory)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// No progress line on stderr
    #[arg(long)]
    pub quiet: bool,
    /// Run the I-th (0-based) of N disjoint slices of the seed range, as I/N
    #[arg(long, value_parser = crate::cli::args::parse_shard)]
    pub shard: Option<(u64, u64)>,
    /// Print the summary as JSON (shards' JSON merges with `sim fuzz merge`)
    #[arg(long)]
    pub json: bool,
    /// Write each failing seed's reproducer as it ran, without shrinking it
    #[arg(long)]
    pub no_shrink: bool,
    /// Wall-clock budget in seconds for shrinking one failing seed
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = crate::cli::shrink::parse_seconds)]
    pub shrink_time: f64,
    /// Stop at the first seed that fails (the seeds already running finish)
    #[arg(long)]
    pub stop_at_first: bool,
    /// Start no seed after SECONDS of wall-clock time (the seeds running then finish)
    #[arg(long, value_name = "SECONDS", value_parser = crate::cli::shrink::parse_seconds)]
    pub time: Option<f64>,
}

/// One long seed's progress line, about every second.
fn seed_progress(seed: u64, steps: u64, fault_steps: u64, seconds: f64) {
    let phase = if steps <= fault_steps {
        format!("step {steps} of {fault_steps}")
    } else {
        format!("draining, step {steps}")
    };
    crate::errln!(
        "fuzz: seed {seed}: {phase} ({:.0} steps/s)",
        steps as f64 / seconds
    );
}

/// The seeds a shard `index/count` runs out of `first..first + runs`
/// (which `limits::seed_range` has checked fits in a u64).
pub fn shard_seeds(first: u64, runs: u64, shard: Option<(u64, u64)>) -> Vec<u64> {
    let (index, count) = shard.unwrap_or((0, 1));
    (index..runs)
        .step_by(usize::try_from(count).unwrap_or(usize::MAX))
        .map(|offset| first + offset)
        .collect()
}

pub fn fuzz_command(options: &FuzzOptions) -> u8 {
    let checked = crate::cli::limits::seed_range(options.seed, options.runs, options.shard)
        .and_then(|seeds| {
            let out = crate::fuzz::campaign::out_dir(options.out.as_deref());
            crate::cli::limits::check_out_dir(&out).map(|()| seeds)
        });
    let jobs = match checked {
        Ok(seeds) => crate::cli::limits::jobs_for(options.jobs, seeds, options.quiet),
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    let seeds = shard_seeds(options.seed, options.runs, options.shard);
    let campaign = CampaignOptions {
        steps: options.steps,
        jobs,
        mutant: options.mutant,
        check_determinism: options.check_determinism,
        out: crate::fuzz::campaign::out_dir(options.out.as_deref()),
        write_repro: true,
        stop_at_first: options.stop_at_first,
        shrink_seconds: (!options.no_shrink).then_some(options.shrink_time),
        time_seconds: options.time,
        progress_within_seed: (!options.quiet
            && seeds.len() == 1
            && options.steps >= 1_000_000
            && !options.json)
            .then_some(seed_progress as fn(u64, u64, u64, f64)),
    };
    let started = crate::stopwatch::Stopwatch::start();
    let terminal = std::io::stderr().is_terminal();
    let (mut done, mut steps, mut failing) = (0u64, 0u64, 0u64);
    let mut last_print = 0.0f64;
    let total = seeds.len();
    let quiet = options.quiet;
    let results = run_seeds(&seeds, &campaign, |result| {
        done += 1;
        steps += result.steps;
        if !result.outcome.converged() {
            failing += 1;
        }
        let elapsed = started.seconds();
        if !quiet && elapsed > 1.0 && (elapsed - last_print > 0.5 || done as usize == total) {
            last_print = elapsed;
            let line = format!(
                "fuzz: {done}/{total} seeds, {:.0} steps/s, {failing} failing",
                steps as f64 / elapsed
            );
            let mut err = std::io::stderr();
            let _ = if terminal {
                write!(err, "\r{line}\x1b[K")
            } else {
                writeln!(err, "{line}")
            };
        }
    });
    if !quiet && terminal && started.seconds() > 1.0 {
        crate::errln!();
    }
    if results.len() < total && (options.time.is_some() || options.stop_at_first) {
        crate::errln!(
            "fuzz: stopped after {} of {total} seeds ({})",
            results.len(),
            if results.iter().any(|r| !r.outcome.converged()) && options.stop_at_first {
                "--stop-at-first: a seed failed"
            } else {
                "--time: the time budget ran out"
            }
        );
    }
    let mut summary = Summary {
        seconds: started.seconds(),
        ..Summary::default()
    };
    if let (Some(first), Some(last)) = (seeds.first(), seeds.last()) {
        summary.seeds.push(match options.shard {
            Some((index, count)) => format!("{first}..={last} shard {index}/{count}"),
            None => format!("{first}..={last}"),
        });
    }
    for result in &results {
        summary.add_seed(result);
    }
    // A reproducer that could not be written is said on standard error
    // too, and the exit code is 2: the report's `reproduce:` line names a
    // file that is not there.
    let unwritten = crate::cli::limits::report_unwritten(&results);
    let exit = if unwritten {
        EXIT_INPUT
    } else {
        summary.exit_code()
    };
    if options.json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("a summary serializes")
        );
        return exit;
    }
    // A lone seed's draw is shown once: with its report when it failed.
    if results.len() == 1 && results[0].report.is_none() {
        crate::out!("{}", results[0].draw.describe());
    }
    for result in &results {
        if let Some(report) = &result.report {
            crate::outln!("\nseed {}:", result.seed);
            crate::out!("{}", result.draw.describe());
            // Reports name the --out directory, which came from the user.
            crate::out!("{}", crate::escape::escape_lines(report));
            if let Some(path) = &result.repro {
                let path = path.display().to_string();
                crate::outln!("  reproducer written: {}", crate::escape::escape(&path));
                if let Some(note) = &result.shrunk {
                    crate::outln!(
                        "  shrunk from {} requests and {} faults to {} and {}{} (the full run: repro-{}.full.toml)",
                        note.before.0,
                        note.before.1,
                        note.after.0,
                        note.after.1,
                        if note.stopped_early {
                            ", stopped at the time cap"
                        } else {
                            ""
                        },
                        result.seed
                    );
                }
            }
            if let Some(error) = &result.repro_error {
                crate::outln!("  REPRODUCER NOT WRITTEN: {}", crate::escape::escape(error));
            }
        }
        if let Some(difference) = &result.nondeterminism {
            crate::outln!("\nNONDETERMINISM {difference}");
        }
    }
    crate::out!("{}", summary.text());
    exit
}

/// `sim fuzz merge FILES…`: one report from shards' `--json` summaries.
pub fn merge_command(files: &[PathBuf], json: bool) -> u8 {
    // Checked field by field, sums and overlaps included (`cli/merge.rs`).
    let total = match crate::cli::merge::merge_files(files, read_summary) {
        Ok(total) => total,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&total).expect("a summary serializes")
        );
    } else {
        crate::out!("{}", total.text());
    }
    total.exit_code()
}

fn read_summary(path: &Path) -> Result<Summary, InputError> {
    let bytes = crate::input::read_file(path, crate::input::SUMMARY_BYTES_MAX)
        .map_err(|message| InputError::new(message).in_file(path))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| InputError::new("is not valid UTF-8; expected JSON").in_file(path))?;
    serde_json::from_str(&text).map_err(|error| {
        InputError::new(format!("expected a `sim fuzz --json` summary: {error}"))
            .in_file(path)
            .at(error.line(), error.column())
    })
}
