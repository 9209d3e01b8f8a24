//! Protocol mutants: each has a scenario under `scenarios/mutants/` that
//! breaks exactly the invariant `sim mutants` says catches it, and the same
//! scenario without the mutant converges with no violation. A small score
//! run kills every mutant.

use std::path::Path;

use sim::mutants::MUTANTS;
use sim::run::{execute, world_for};
use sim::scenario::parse::load;

fn mutant_scenario(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/mutants")
        .join(format!("{name}.toml"))
}

#[test]
fn every_mutant_has_a_scenario_that_breaks_its_invariant() {
    for info in MUTANTS {
        let path = mutant_scenario(info.name);
        let scenario = load(&path).unwrap_or_else(|error| panic!("{}: {error}", info.name));
        assert_eq!(scenario.mutant, Some(info.mutant), "{}", info.name);
        assert_eq!(
            scenario.expect.violation.as_deref(),
            Some(info.expected),
            "{}: the scenario and `sim mutants` name the same invariant",
            info.name
        );
        let finished = execute(&scenario, world_for(&scenario), |_, _| {});
        assert_eq!(
            finished.outcome.fired(),
            Some(info.expected),
            "{}",
            info.name
        );
    }
}

#[test]
fn every_mutant_scenario_converges_cleanly_without_its_mutant() {
    for info in MUTANTS {
        let mut scenario = load(&mutant_scenario(info.name)).expect("loads");
        scenario.mutant = None;
        scenario.expect.violation = None;
        let finished = execute(&scenario, world_for(&scenario), |_, _| {});
        assert_eq!(
            finished.outcome.violation, None,
            "{} without its mutant",
            info.name
        );
        assert!(
            finished.outcome.not_converged.is_empty(),
            "{} without its mutant: {:?}",
            info.name,
            finished.outcome.not_converged
        );
    }
}

#[test]
fn a_small_score_run_kills_every_mutant() {
    let options = sim::cli::score::ScoreOptions {
        seed: 1,
        runs: 50,
        steps: 10_000,
        jobs: 1,
        only: Vec::new(),
    };
    let kills = sim::cli::score::score(&options);
    let survivors: Vec<&str> = kills
        .iter()
        .filter(|kill| kill.killed.is_none())
        .map(|kill| kill.mutant.name())
        .collect();
    assert!(survivors.is_empty(), "survived: {survivors:?}");
}

/// A status read by key looks the key up once: the steps after its cache
/// miss read and fill the task it found. The early-expiry mutant drops a
/// key's record between those steps on these seeds, and the API used to
/// look the key up again and panic on finding nothing.
#[test]
fn a_read_outlives_its_keys_record() {
    use sim::fuzz::campaign::{CampaignOptions, run_seed};
    use sim::mutants::Mutant;
    let options = CampaignOptions {
        steps: 3_000,
        jobs: 1,
        mutant: Mutant::parse("early-idempotency-expiry"),
        check_determinism: false,
        out: std::env::temp_dir(),
        write_repro: false,
        stop_at_first: false,
        shrink_seconds: None,
        time_seconds: None,
        progress_within_seed: None,
    };
    assert!(options.mutant.is_some());
    let killed = [56, 187, 190, 197, 319]
        .into_iter()
        .filter(|&seed| !run_seed(seed, &options).outcome.converged())
        .count();
    assert!(killed > 0, "the mutant still breaks its invariant");
}
