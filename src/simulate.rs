//! One run's phases: the fault phase (up to `steps_max` steps or until
//! nothing is left to do), then faults and workload stop and the system
//! drains for at most `drain_steps_max` steps, then `converges` is judged.
//! Scenario runs, fuzz, mutants and benchmarks all run through here.

use crate::invariants::{CONVERGES, Violation};
use crate::world::{Stepped, World};

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The first safety violation, if any (the run stopped there).
    pub violation: Option<Violation>,
    /// What did not converge; empty when it converged. Not judged after a
    /// safety violation.
    pub not_converged: Vec<String>,
    /// Steps of the fault phase and of the drain.
    pub fault_steps: u64,
    pub drain_steps: u64,
}

impl Outcome {
    pub fn converged(&self) -> bool {
        self.violation.is_none() && self.not_converged.is_empty()
    }

    /// What the run broke: the violated invariant, or `CONVERGES` for a run
    /// that did not converge; `None` for a clean run.
    pub fn fired(&self) -> Option<&'static str> {
        match &self.violation {
            Some(violation) => Some(violation.invariant),
            None if !self.not_converged.is_empty() => Some(CONVERGES),
            None => None,
        }
    }

    /// The step a failure is reported at: the violation's, or the last
    /// step (`steps`) of a run that did not converge.
    pub fn failed_at(&self, steps: u64) -> u64 {
        self.violation
            .as_ref()
            .map_or(steps, |violation| violation.step)
    }
}

/// Runs `world` through both phases, calling `on_step` after every step
/// with the number of records added.
pub fn simulate(
    world: &mut World,
    steps_max: u64,
    mut on_step: impl FnMut(&World, u64),
) -> Outcome {
    let mut last = world.steps;
    let mut advance = |world: &mut World| -> bool {
        match world.step() {
            Stepped::Step => {
                let added = world.steps - last;
                last = world.steps;
                on_step(world, added);
                true
            }
            Stepped::Quiet => false,
        }
    };
    while world.steps < steps_max && world.violation.is_none() {
        if !advance(world) {
            break;
        }
    }
    let fault_steps = world.steps;
    let mut outcome = Outcome {
        violation: world.violation.clone(),
        not_converged: Vec::new(),
        fault_steps,
        drain_steps: 0,
    };
    if outcome.violation.is_some() {
        return outcome;
    }
    world.stop_faults();
    let limit = world.steps + world.config.drain_steps_max;
    let mut quiet = false;
    while world.steps < limit && world.violation.is_none() {
        if !advance(world) {
            quiet = true;
            break;
        }
    }
    outcome.drain_steps = world.steps - fault_steps;
    outcome.violation = world.violation.clone();
    if outcome.violation.is_some() {
        return outcome;
    }
    outcome.not_converged = world.convergence_failures();
    if !quiet {
        outcome.not_converged.push(format!(
            "still busy after {} drain steps ({} wakes pending)",
            world.config.drain_steps_max,
            world.pending()
        ));
    }
    outcome
}
