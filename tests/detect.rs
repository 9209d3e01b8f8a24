//! Detection by fuzzing alone: a campaign of 300 seeds x 10,000 steps on
//! the protocol as built must find nothing. This is the only test the
//! mutation run (`cargo mutants`, see `.cargo/mutants.toml`) runs, so a
//! mutant counts as caught only when a fuzz campaign reports it: an
//! invariant, a run that does not converge, or a panic inside a seed.

use sim::fuzz::campaign::{CampaignOptions, run_seeds};

/// Seeds and steps of the campaign (the "300 seeds x 10^4 steps").
const SEEDS: u64 = 300;
const STEPS: u64 = 10_000;

#[test]
fn a_fuzz_campaign_finds_nothing_in_the_protocol_as_built() {
    let options = CampaignOptions {
        steps: STEPS,
        jobs: 2,
        mutant: None,
        check_determinism: false,
        out: std::env::temp_dir(),
        write_repro: false,
        // The first failure is enough to catch a mutant.
        stop_at_first: true,
        shrink_seconds: None,
        time_seconds: None,
        progress_within_seed: None,
    };
    let seeds: Vec<u64> = (1..=SEEDS).collect();
    let results = run_seeds(&seeds, &options, |_| {});
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
