//! `sim mutants --score`: for each mutant, fuzz until the first kill (a
//! safety violation or a failure to converge) or the budget; print the
//! table and the mutation score.

use std::fmt::Write as _;

use crate::error::{EXIT_INPUT, EXIT_OK, EXIT_VIOLATION};
use crate::mutants::{MUTANTS, Mutant};
use crate::stopwatch::Stopwatch;

use crate::fuzz::campaign::{CampaignOptions, run_seeds};

#[derive(clap::Args, Clone, Debug)]
pub struct ScoreOptions {
    /// First seed of each mutant's campaign
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seeds per mutant (the budget; at most 10^6)
    #[arg(long, default_value_t = 100, value_parser = crate::cli::limits::runs())]
    pub runs: u64,
    /// Steps per seed (1 to 10^12)
    #[arg(long, default_value_t = 10_000, value_parser = crate::cli::limits::steps())]
    pub steps: u64,
    /// Threads (1 to 1024, at most one per seed)
    #[arg(long, default_value_t = 1, value_parser = crate::cli::limits::jobs())]
    pub jobs: usize,
    /// Score only these mutants
    #[arg(long = "only", value_parser = crate::cli::args::parse_mutant)]
    pub only: Vec<Mutant>,
}

/// How one mutant fared.
#[derive(Clone, Debug)]
pub struct Kill {
    pub mutant: Mutant,
    /// (invariant, seed, step, seeds run to the kill, total steps to it).
    pub killed: Option<(String, u64, u64, u64, u64)>,
    pub seconds: f64,
}

/// Mutants no invariant can catch because another layer masks them, with
/// the reason. Empty: every mutant here is caught.
pub const EQUIVALENT: &[(Mutant, &str)] = &[];

pub fn score(options: &ScoreOptions) -> Vec<Kill> {
    let mutants: Vec<Mutant> = if options.only.is_empty() {
        MUTANTS.iter().map(|info| info.mutant).collect()
    } else {
        options.only.clone()
    };
    // `limits::seed_range` checked that the last seed fits in a u64.
    let seeds: Vec<u64> = (0..options.runs).map(|n| options.seed + n).collect();
    mutants
        .into_iter()
        .map(|mutant| {
            let watch = Stopwatch::start();
            let campaign =
                CampaignOptions::until_first_failure(options.steps, options.jobs, Some(mutant));
            let results = run_seeds(&seeds, &campaign, |_| {});
            let mut steps = 0;
            let mut killed = None;
            for (index, result) in results.iter().enumerate() {
                match result.outcome.fired() {
                    Some(invariant) => {
                        let step = result.outcome.failed_at(result.steps);
                        let seeds = index as u64 + 1;
                        killed = Some((
                            invariant.to_string(),
                            result.seed,
                            step,
                            seeds,
                            steps + step,
                        ));
                        break;
                    }
                    None => steps += result.steps,
                }
            }
            Kill {
                mutant,
                killed,
                seconds: watch.seconds(),
            }
        })
        .collect()
}

pub fn table(kills: &[Kill], options: &ScoreOptions) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<30} {:<8} {:<34} {:>6} {:>8} {:>6} {:>10} {:>8}",
        "mutant", "killed", "invariant", "seed", "step", "seeds", "steps", "time"
    );
    let mut killed = 0;
    let mut counted = 0;
    let mut seeds_to_kill = Vec::new();
    for kill in kills {
        let equivalent = EQUIVALENT.iter().find(|(m, _)| *m == kill.mutant);
        if equivalent.is_none() {
            counted += 1;
        }
        match (&kill.killed, equivalent) {
            (_, Some((_, reason))) => {
                let _ = writeln!(out, "{:<30} {:<8} {reason}", kill.mutant.name(), "equiv.");
            }
            (found, None) => {
                let dash = || "-".to_string();
                let [verdict, invariant, seed, step, seeds, steps] = match found {
                    Some((invariant, seed, step, seeds, steps)) => {
                        killed += 1;
                        seeds_to_kill.push(*seeds);
                        let [seed, step, seeds, steps] =
                            [seed, step, seeds, steps].map(u64::to_string);
                        ["yes".into(), invariant.clone(), seed, step, seeds, steps]
                    }
                    // A survivor used the whole budget of seeds and found nothing.
                    None => [
                        "NO".into(),
                        dash(),
                        dash(),
                        dash(),
                        options.runs.to_string(),
                        dash(),
                    ],
                };
                let _ = writeln!(
                    out,
                    "{:<30} {verdict:<8} {invariant:<34} {seed:>6} {step:>8} {seeds:>6} {steps:>10} {:>7.2}s",
                    kill.mutant.name(),
                    kill.seconds
                );
            }
        }
    }
    seeds_to_kill.sort();
    let median = seeds_to_kill
        .get(seeds_to_kill.len() / 2)
        .copied()
        .unwrap_or(0);
    let percent = if counted == 0 {
        100.0
    } else {
        100.0 * killed as f64 / counted as f64
    };
    let _ = writeln!(
        out,
        "budget: {} seeds x {} steps from seed {}; median seeds to kill: {median}",
        options.runs, options.steps, options.seed
    );
    let _ = writeln!(out, "score: {killed}/{counted} killed ({percent:.0}%)");
    out
}

pub fn score_command(options: &ScoreOptions) -> u8 {
    let mut options = options.clone();
    match crate::cli::limits::seed_range(options.seed, options.runs, None) {
        Ok(seeds) => options.jobs = crate::cli::limits::jobs_for(options.jobs, seeds, false),
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    }
    let options = &options;
    let kills = score(options);
    crate::out!("{}", table(&kills, options));
    let survivors = kills
        .iter()
        .filter(|kill| kill.killed.is_none() && !EQUIVALENT.iter().any(|(m, _)| *m == kill.mutant))
        .count();
    if survivors == 0 {
        EXIT_OK
    } else {
        EXIT_VIOLATION
    }
}
