//! `sim fuzz`: a campaign over seeds with its summary: runs, steps, speed,
//! the swarm draw (for one seed), faults by site and kind, invariant
//! checks, coverage and "sometimes" targets, manual reviews, violations.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use crate::error::{EXIT_NOT_CONVERGED, EXIT_OK, EXIT_VIOLATION};
use crate::faults::{FaultKind, Site, catalogue};
use crate::mutants::Mutant;
use crate::report::{Coverage, RACES, SOMETIMES};
use crate::task::{EventType, Status};

use super::campaign::{CampaignOptions, SeedResult, run_seeds};

#[derive(Clone, Debug)]
pub struct FuzzOptions {
    pub seed: u64,
    pub runs: u64,
    pub steps: u64,
    pub jobs: usize,
    pub mutant: Option<Mutant>,
    pub check_determinism: bool,
    pub out: Option<PathBuf>,
    pub quiet: bool,
    pub shard: Option<(u64, u64)>,
}

/// Everything a campaign adds up to.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub runs: u64,
    pub steps: u64,
    pub tasks_terminal: u64,
    pub checks: u64,
    pub faults: BTreeMap<(Site, FaultKind), u64>,
    pub sites: BTreeMap<Site, u64>,
    pub sometimes: BTreeMap<&'static str, u64>,
    pub transitions: BTreeMap<(Status, EventType), u64>,
    pub rejections: BTreeMap<&'static str, u64>,
    pub races: BTreeMap<&'static str, u64>,
    pub review: BTreeMap<&'static str, u64>,
    pub violations: Vec<(u64, String, u64)>,
    pub not_converged: Vec<u64>,
    pub nondeterministic: Vec<u64>,
}

impl Totals {
    pub fn add(&mut self, result: &SeedResult) {
        self.runs += 1;
        self.steps += result.steps;
        self.tasks_terminal += result.tasks_terminal;
        self.checks += result.checks;
        for (key, n) in &result.faults {
            *self.faults.entry(*key).or_insert(0) += n;
        }
        for (key, n) in &result.sites {
            *self.sites.entry(*key).or_insert(0) += n;
        }
        for (key, n) in &result.sometimes {
            *self.sometimes.entry(key).or_insert(0) += n;
        }
        for (key, n) in &result.transitions {
            *self.transitions.entry(*key).or_insert(0) += n;
        }
        for (key, n) in &result.rejections {
            *self.rejections.entry(key).or_insert(0) += n;
        }
        for (key, n) in &result.races {
            *self.races.entry(key).or_insert(0) += n;
        }
        for (key, n) in &result.review {
            *self.review.entry(key).or_insert(0) += n;
        }
        if let Some(violation) = &result.outcome.violation {
            self.violations
                .push((result.seed, violation.invariant.to_string(), violation.step));
        } else if !result.outcome.not_converged.is_empty() {
            self.not_converged.push(result.seed);
        }
        if result.nondeterminism.is_some() {
            self.nondeterministic.push(result.seed);
        }
    }

    pub fn text(&self, seconds: f64) -> String {
        let mut out = String::new();
        let rate = if seconds > 0.0 {
            self.steps as f64 / seconds
        } else {
            0.0
        };
        let _ = writeln!(out, "runs          {}", self.runs);
        let _ = writeln!(
            out,
            "steps         {} ({:.0} steps/s over {:.2}s)",
            self.steps, rate, seconds
        );
        let _ = writeln!(
            out,
            "tasks         {} brought to a terminal state",
            self.tasks_terminal
        );
        let _ = writeln!(out, "checks        {} invariant checks", self.checks);
        let _ = writeln!(out, "faults injected by site/kind:");
        for (site, kind) in catalogue() {
            let n = self.faults.get(&(site, kind)).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "  {:<40} {n}",
                format!("{}/{}", site.as_str(), kind.as_str())
            );
        }
        let reached: Vec<String> = Site::ALL
            .iter()
            .map(|site| {
                format!(
                    "{} {}",
                    site.as_str(),
                    self.sites.get(site).copied().unwrap_or(0)
                )
            })
            .collect();
        let _ = writeln!(out, "fault sites reached: {}", reached.join(", "));
        let coverage = Coverage::of(&self.transitions, &self.rejections, &self.races);
        let _ = writeln!(out, "coverage      {}", coverage.line());
        let missing: Vec<&str> = RACES
            .iter()
            .copied()
            .filter(|race| !self.races.contains_key(race))
            .collect();
        if !missing.is_empty() {
            let _ = writeln!(out, "races not reached: {}", missing.join(", "));
        }
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
        if self.violations.is_empty() {
            let _ = writeln!(out, "violations    none");
        } else {
            let _ = writeln!(out, "violations    {}", self.violations.len());
            for (seed, invariant, step) in &self.violations {
                let _ = writeln!(out, "  seed {seed}: {invariant} at step {step}");
            }
        }
        if !self.not_converged.is_empty() {
            let _ = writeln!(out, "not converged seeds: {:?}", self.not_converged);
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
        seed: options.seed,
        runs: options.runs,
        steps: options.steps,
        jobs: options.jobs,
        mutant: options.mutant,
        check_determinism: options.check_determinism,
        out: super::campaign::out_dir(options.out.as_deref()),
        write_repro: true,
        stop_at_first: false,
    };
    let started = crate::stopwatch::Stopwatch::start();
    let terminal = std::io::stderr().is_terminal();
    let mut done = 0u64;
    let mut steps = 0u64;
    let mut failures = 0u64;
    let mut last_print = 0.0f64;
    let total = seeds.len();
    let quiet = options.quiet;
    let results = run_seeds(&seeds, &campaign, |result| {
        done += 1;
        steps += result.steps;
        if result.outcome.violation.is_some() || !result.outcome.not_converged.is_empty() {
            failures += 1;
        }
        let elapsed = started.seconds();
        if !quiet && elapsed > 1.0 && (elapsed - last_print > 0.5 || done as usize == total) {
            last_print = elapsed;
            let line = format!(
                "fuzz: {done}/{total} seeds, {:.0} steps/s, {failures} failing",
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
        eprintln!();
    }
    let seconds = started.seconds();
    let mut totals = Totals::default();
    for result in &results {
        totals.add(result);
    }
    if let Some(first) = results.first()
        && results.len() == 1
    {
        print!("{}", first.draw.describe());
    }
    for result in &results {
        if let Some(report) = &result.report {
            println!("\nseed {}:", result.seed);
            print!("{report}");
            if let Some(path) = &result.repro {
                println!("  reproducer written: {}", path.display());
            }
        }
        if let Some(difference) = &result.nondeterminism {
            println!("\nNONDETERMINISM {difference}");
        }
    }
    print!("{}", totals.text(seconds));
    if !totals.nondeterministic.is_empty() || !totals.violations.is_empty() {
        EXIT_VIOLATION
    } else if !totals.not_converged.is_empty() {
        EXIT_NOT_CONVERGED
    } else {
        EXIT_OK
    }
}
