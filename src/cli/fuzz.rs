//! `sim fuzz`: a campaign over seeds with its summary — runs, steps, speed,
//! the swarm draw of a single seed, faults by site and kind, invariant
//! checks, coverage and "sometimes" targets, manual reviews, violations —
//! as text or as JSON, and `sim fuzz merge` to add up shards' JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{EXIT_INPUT, EXIT_NOT_CONVERGED, EXIT_OK, EXIT_VIOLATION, InputError};
use crate::faults::{Site, catalogue};
use crate::mutants::Mutant;
use crate::report::{Coverage, SOMETIMES};

use crate::fuzz::campaign::{CampaignOptions, SeedResult, run_seeds};

#[derive(clap::Args, Clone, Debug)]
pub struct FuzzOptions {
    /// First seed
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Steps of each run's fault phase
    #[arg(long, default_value_t = 10_000)]
    pub steps: u64,
    /// Seeds to run: seed .. seed + runs - 1
    #[arg(long, default_value_t = 1)]
    pub runs: u64,
    /// Threads; each simulation stays single-threaded and results are identical to --jobs 1
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Switch off one protocol guard (see `sim mutants`)
    #[arg(long, value_parser = crate::cli::parse_mutant)]
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
    #[arg(long, value_parser = crate::cli::parse_shard)]
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

/// A seed that failed, for the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub seed: u64,
    /// The invariant that fired, or `converges`.
    pub invariant: String,
    pub step: u64,
}

/// Everything a campaign (or several shards of one) adds up to. Maps are
/// keyed by stable names, so shards' JSON merges by adding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub runs: u64,
    pub steps: u64,
    /// Wall-clock seconds the runs took, summed over shards.
    pub seconds: f64,
    pub tasks_terminal: u64,
    pub checks: u64,
    pub faults: BTreeMap<String, u64>,
    pub sites: BTreeMap<String, u64>,
    pub sometimes: BTreeMap<String, u64>,
    pub transitions: BTreeMap<String, u64>,
    pub rejections: BTreeMap<String, u64>,
    pub races: BTreeMap<String, u64>,
    pub review: BTreeMap<String, u64>,
    pub failures: Vec<Failure>,
    pub nondeterministic: Vec<u64>,
    /// The seeds these runs covered, as `first..=last` ranges per shard.
    pub seeds: Vec<String>,
}

fn add(into: &mut BTreeMap<String, u64>, key: String, n: u64) {
    *into.entry(key).or_insert(0) += n;
}

impl Summary {
    pub fn add_seed(&mut self, result: &SeedResult) {
        self.runs += 1;
        self.steps += result.steps;
        self.tasks_terminal += result.tasks_terminal;
        self.checks += result.checks;
        for ((site, kind), n) in &result.faults {
            add(
                &mut self.faults,
                format!("{}/{}", site.as_str(), kind.as_str()),
                *n,
            );
        }
        for (site, n) in &result.sites {
            add(&mut self.sites, site.as_str().to_string(), *n);
        }
        for (key, n) in &result.sometimes {
            add(&mut self.sometimes, key.to_string(), *n);
        }
        for ((status, event), n) in &result.transitions {
            add(
                &mut self.transitions,
                format!("{}/{}", status.as_str(), event.as_str()),
                *n,
            );
        }
        for (key, n) in &result.rejections {
            add(&mut self.rejections, key.to_string(), *n);
        }
        for (key, n) in &result.races {
            add(&mut self.races, key.to_string(), *n);
        }
        for (key, n) in &result.review {
            add(&mut self.review, key.to_string(), *n);
        }
        if let Some(invariant) = result.outcome.fired() {
            self.failures.push(Failure {
                seed: result.seed,
                invariant: invariant.to_string(),
                step: result.outcome.failed_at(result.steps),
            });
        }
        if result.nondeterminism.is_some() {
            self.nondeterministic.push(result.seed);
        }
    }

    /// Adds another summary (a shard) to this one.
    pub fn merge(&mut self, other: &Summary) {
        self.runs += other.runs;
        self.steps += other.steps;
        self.seconds += other.seconds;
        self.tasks_terminal += other.tasks_terminal;
        self.checks += other.checks;
        for (into, from) in [
            (&mut self.faults, &other.faults),
            (&mut self.sites, &other.sites),
            (&mut self.sometimes, &other.sometimes),
            (&mut self.transitions, &other.transitions),
            (&mut self.rejections, &other.rejections),
            (&mut self.races, &other.races),
            (&mut self.review, &other.review),
        ] {
            for (key, n) in from {
                add(into, key.clone(), *n);
            }
        }
        self.failures.extend(other.failures.iter().cloned());
        self.failures.sort_by_key(|failure| failure.seed);
        self.nondeterministic
            .extend(other.nondeterministic.iter().copied());
        self.nondeterministic.sort();
        self.seeds.extend(other.seeds.iter().cloned());
    }

    pub fn exit_code(&self) -> u8 {
        let safety = self
            .failures
            .iter()
            .any(|failure| failure.invariant != crate::simulate::CONVERGES);
        if !self.nondeterministic.is_empty() || safety {
            EXIT_VIOLATION
        } else if !self.failures.is_empty() {
            EXIT_NOT_CONVERGED
        } else {
            EXIT_OK
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let rate = if self.seconds > 0.0 {
            self.steps as f64 / self.seconds
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "runs          {} (seeds {})",
            self.runs,
            self.seeds.join(", ")
        );
        let _ = writeln!(
            out,
            "steps         {} ({:.0} steps/s over {:.2}s)",
            self.steps, rate, self.seconds
        );
        let _ = writeln!(
            out,
            "tasks         {} brought to a terminal state",
            self.tasks_terminal
        );
        let _ = writeln!(out, "checks        {} invariant checks", self.checks);
        let _ = writeln!(out, "faults injected by site/kind:");
        for (site, kind) in catalogue() {
            let key = format!("{}/{}", site.as_str(), kind.as_str());
            let n = self.faults.get(&key).copied().unwrap_or(0);
            let _ = writeln!(out, "  {key:<40} {n}");
        }
        let reached: Vec<String> = Site::ALL
            .iter()
            .map(|site| {
                format!(
                    "{} {}",
                    site.as_str(),
                    self.sites.get(site.as_str()).copied().unwrap_or(0)
                )
            })
            .collect();
        let _ = writeln!(out, "fault sites reached: {}", reached.join(", "));
        let coverage = Coverage::of(
            self.transitions.len(),
            |reason| self.rejections.contains_key(reason),
            |race| self.races.contains_key(race),
        );
        let _ = writeln!(out, "coverage      {}", coverage.line());
        let missing = crate::report::not_reached(
            |status, event| {
                self.transitions
                    .contains_key(&format!("{}/{}", status.as_str(), event.as_str()))
            },
            |reason| self.rejections.contains_key(reason),
            |race| self.races.contains_key(race),
        );
        out.push_str(&crate::report::not_reached_lines(&missing));
        let _ = writeln!(out, "sometimes targets:");
        for target in SOMETIMES {
            let n = self.sometimes.get(target).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "  {:<40} {n}{}",
                target,
                if n == 0 { "  (NOT REACHED)" } else { "" }
            );
        }
        let review: Vec<String> = self
            .review
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "manual review {}",
            if review.is_empty() {
                "0".to_string()
            } else {
                review.join(", ")
            }
        );
        if self.failures.is_empty() {
            let _ = writeln!(out, "violations    none");
        } else {
            let _ = writeln!(out, "failures      {}", self.failures.len());
            for failure in &self.failures {
                let _ = writeln!(
                    out,
                    "  seed {}: {} at step {}",
                    failure.seed, failure.invariant, failure.step
                );
            }
        }
        if !self.nondeterministic.is_empty() {
            let _ = writeln!(
                out,
                "NONDETERMINISTIC seeds (a bug in sim itself): {:?}",
                self.nondeterministic
            );
        }
        out
    }
}

/// The seeds a shard `index/count` runs out of `first..first + runs`.
pub fn shard_seeds(first: u64, runs: u64, shard: Option<(u64, u64)>) -> Vec<u64> {
    (first..first + runs)
        .filter(|seed| shard.is_none_or(|(index, count)| (seed - first) % count == index))
        .collect()
}

pub fn fuzz_command(options: &FuzzOptions) -> u8 {
    let seeds = shard_seeds(options.seed, options.runs, options.shard);
    let campaign = CampaignOptions {
        steps: options.steps,
        jobs: options.jobs,
        mutant: options.mutant,
        check_determinism: options.check_determinism,
        out: crate::fuzz::campaign::out_dir(options.out.as_deref()),
        write_repro: true,
        stop_at_first: options.stop_at_first,
        shrink_seconds: (!options.no_shrink).then_some(options.shrink_time),
        time_seconds: options.time,
        progress_within_seed: !options.quiet
            && seeds.len() == 1
            && options.steps >= 1_000_000
            && !options.json,
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
    if options.json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&summary).expect("a summary serializes")
        );
        return summary.exit_code();
    }
    // A lone seed's draw is shown once: with its report when it failed.
    if results.len() == 1 && results[0].report.is_none() {
        crate::out!("{}", results[0].draw.describe());
    }
    for result in &results {
        if let Some(report) = &result.report {
            crate::outln!("\nseed {}:", result.seed);
            crate::out!("{}", result.draw.describe());
            crate::out!("{report}");
            if let Some(path) = &result.repro {
                crate::outln!("  reproducer written: {}", path.display());
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
        }
        if let Some(difference) = &result.nondeterminism {
            crate::outln!("\nNONDETERMINISM {difference}");
        }
    }
    crate::out!("{}", summary.text());
    summary.exit_code()
}

/// `sim fuzz merge FILES…`: one report from shards' `--json` summaries.
pub fn merge_command(files: &[PathBuf], json: bool) -> u8 {
    let mut total = Summary::default();
    for file in files {
        match read_summary(file) {
            Ok(summary) => total.merge(&summary),
            Err(error) => {
                crate::errln!("{error}");
                return EXIT_INPUT;
            }
        }
    }
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
    let text = std::fs::read_to_string(path)
        .map_err(|error| InputError::new(format!("cannot read: {error}")).in_file(path))?;
    serde_json::from_str(&text).map_err(|error| {
        InputError::new(format!("expected a `sim fuzz --json` summary: {error}"))
            .in_file(path)
            .at(error.line(), error.column())
    })
}
