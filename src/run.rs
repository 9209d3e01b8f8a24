//! Running one scenario to its end: build its world, simulate both phases,
//! write the dump and judge the scenario's expectations into the exit code
//! of DESIGN §8. Prints nothing; `sim run` (`cli/run.rs`) tells the story.

use crate::error::{EXIT_NOT_CONVERGED, EXIT_OK, EXIT_VIOLATION};
use crate::faults::FaultRates;
use crate::scenario::{Matcher, Scenario};
use crate::simulate::{Outcome, simulate};
use crate::world::World;

/// A finished run: the world, how it ended, and how it measured up.
pub struct Finished {
    pub world: World,
    pub outcome: Outcome,
    pub dump: serde_json::Value,
    /// Expectation failures (empty when the run ended as expected).
    pub unmet: Vec<String>,
    pub exit: u8,
}

/// Runs a validated scenario to the end and judges it. `on_step` sees the
/// world after each step.
pub fn execute(
    scenario: &Scenario,
    mut world: World,
    on_step: impl FnMut(&World, u64),
) -> Finished {
    let outcome = simulate(&mut world, scenario.steps_max, on_step);
    let name = scenario.name.clone();
    let dump = world.dump(&name);
    let mut unmet = Vec::new();
    for (pointer, expected) in &scenario.expect.facts {
        if let Some(failed) = Matcher::of(expected).judge(pointer, dump.pointer(pointer)) {
            unmet.push(failed);
        }
    }
    let fired = outcome.fired();
    let exit = match (&scenario.expect.violation, fired) {
        (Some(expected), Some(fired)) if expected == fired => {
            if unmet.is_empty() {
                EXIT_OK
            } else {
                EXIT_VIOLATION
            }
        }
        (Some(expected), Some(fired)) => {
            unmet.push(format!("expected `{expected}` to fire, but `{fired}` did"));
            EXIT_VIOLATION
        }
        (Some(expected), None) => {
            unmet.push(format!(
                "expected `{expected}` to fire, but the run converged with no violation"
            ));
            EXIT_VIOLATION
        }
        (None, Some(_)) if outcome.violation.is_some() => EXIT_VIOLATION,
        (None, Some(_)) => EXIT_NOT_CONVERGED,
        (None, None) if unmet.is_empty() => EXIT_OK,
        (None, None) => EXIT_VIOLATION,
    };
    Finished {
        world,
        outcome,
        dump,
        unmet,
        exit,
    }
}

/// Builds the world a scenario describes (no random faults, no workload).
/// It keeps what each request got back, for the dump's `requests` key.
pub fn world_for(scenario: &Scenario) -> World {
    let mut world = World::new(scenario.setup(), &FaultRates::none(), None);
    world.answers = Some(Default::default());
    world
}

/// The command that reproduces a run of this scenario.
pub fn reproduce_command(scenario: &Scenario) -> String {
    let path = scenario.path.clone().unwrap_or_else(|| "<scenario>".into());
    let mut command = format!("sim run {path} --seed {}", scenario.seed);
    if let Some(mutant) = scenario.mutant {
        command.push_str(&format!(" --mutant {}", mutant.name()));
    }
    command
}

/// Every trace record of a run of `scenario`, from a second run (runs are
/// deterministic): a violation report's causal slice reads the whole
/// trace, which the first run does not keep.
pub fn full_trace(scenario: &Scenario) -> Vec<crate::trace::Record> {
    let mut world = world_for(scenario);
    world.trace.kept = Some(Vec::new());
    let _ = simulate(&mut world, scenario.steps_max, |_, _| {});
    world.trace.kept.take().unwrap_or_default()
}
