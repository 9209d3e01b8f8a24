//! Detection by fuzzing alone: the only tests the mutation run
//! (`cargo mutants`, see `.cargo/mutants.toml`) runs, so a mutant counts as
//! caught only when a fuzz campaign reports it. A campaign of 300 seeds x
//! 10,000 steps on the protocol as built must find nothing (a violation, a
//! run that does not converge, or a panic inside a seed fails it); and the
//! same campaign must still catch each named mutant, or its checks have
//! stopped looking.

use sim::fuzz::campaign::{CampaignOptions, SeedResult, run_seeds};
use sim::mutants::{MUTANTS, Mutant};

/// Seeds and steps of the campaign (the "300 seeds x 10^4 steps").
const SEEDS: u64 = 300;
const STEPS: u64 = 10_000;
/// Seeds a named mutant gets to be caught in (`sim mutants --score`'s
/// budget).
const MUTANT_SEEDS: u64 = 100;

/// A campaign over seeds `1..=seeds` that stops at its first failure.
fn campaign(seeds: u64, mutant: Option<Mutant>) -> Vec<SeedResult> {
    let options = CampaignOptions {
        steps: STEPS,
        jobs: 2,
        mutant,
        check_determinism: false,
        out: std::env::temp_dir(),
        write_repro: false,
        stop_at_first: true,
        shrink_seconds: None,
        time_seconds: None,
        progress_within_seed: None,
    };
    let seeds: Vec<u64> = (1..=seeds).collect();
    run_seeds(&seeds, &options, |_| {})
}

#[test]
fn a_fuzz_campaign_finds_nothing_in_the_protocol_as_built() {
    let results = campaign(SEEDS, None);
    if let Some(failed) = results.iter().find(|result| !result.outcome.converged()) {
        let what = match &failed.outcome.violation {
            Some(violation) => format!(
                "{} at step {}: {}",
                violation.invariant, violation.step, violation.message
            ),
            None => failed.outcome.not_converged.join("; "),
        };
        panic!("seed {} failed: {what}", failed.seed);
    }
    assert_eq!(results.len() as u64, SEEDS, "every seed ran");
}

#[test]
fn the_same_campaign_still_catches_every_named_mutant() {
    for info in MUTANTS {
        let results = campaign(MUTANT_SEEDS, Some(info.mutant));
        assert!(
            results.iter().any(|result| !result.outcome.converged()),
            "{} survived {MUTANT_SEEDS} seeds x {STEPS} steps",
            info.name
        );
    }
}
