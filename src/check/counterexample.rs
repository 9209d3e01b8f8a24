//! A violation's path written back as a scenario: the prepared scenario
//! with a `schedule` pinning the order of the wakes and a fault placed at
//! the step and actor each injected fault landed on, so that `sim run`
//! replays the path to the same violation at the same step.

use crate::faults::ScriptedFault;
use crate::scenario::Scenario;

use super::options::Found;

/// The scenario that replays `found` from `prepared`'s initial world.
pub fn counterexample(prepared: &Scenario, found: &Found) -> Scenario {
    let mut scenario = prepared.clone();
    scenario.name = format!("{}-counterexample", prepared.name);
    scenario.description = format!(
        "Found by `sim check`: {} after {} transitions (step {}). The schedule pins the order of the wakes; the faults after the scenario's own are the ones the checker injected. {}",
        found.invariant, found.depth, found.step, prepared.description
    )
    .trim_end()
    .to_string();
    scenario.steps_max = scenario.steps_max.max(found.step + 1);
    scenario.schedule = found.path.iter().map(|step| step.wake).collect();
    scenario.faults.extend(
        found
            .path
            .iter()
            .filter_map(|step| step.fault.as_ref())
            .map(|fault| ScriptedFault {
                site: fault.site,
                kind: fault.kind,
                placement: fault.placement(),
                actor: Some(fault.actor),
            }),
    );
    scenario.path = None;
    scenario.sim_version = None;
    scenario.config_sha256 = None;
    scenario
}
