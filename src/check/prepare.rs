//! The scenario a check explores, made from the one given: every actor
//! step takes no time (`latency_ms_min = latency_ms_max = 0`), since which
//! wake fires next is the checker's choice rather than the drawn delays';
//! expectations are dropped (a check judges invariants only); scripted
//! faults stay unless asked otherwise; a request's waits are dropped (a
//! turn passed without a request only placed it among its millisecond's
//! wakes, and the checker tries every placement anyway: each wait would be
//! a level of the search of its own).

use crate::faults::FaultRates;
use crate::mutants::Mutant;
use crate::scenario::{Expect, Request, Scenario};
use crate::trace::Trace;
use crate::world::World;

/// The scenario a check of `scenario` explores.
pub fn prepare(scenario: &Scenario, keep_faults: bool, mutant: Option<Mutant>) -> Scenario {
    let mut checked = scenario.clone();
    checked.config.latency_ms_min = 0;
    checked.config.latency_ms_max = 0;
    if !keep_faults {
        checked.faults.clear();
    }
    if mutant.is_some() {
        checked.mutant = mutant;
    }
    checked.expect = Expect::default();
    checked.schedule.clear();
    checked.requests.iter_mut().for_each(Request::drop_waits);
    checked
}

/// The initial world of a prepared scenario.
/// Its trace is silent (the last record only): nothing reads a checked
/// world's trace past the step under way, and every copy of it would
/// carry the ring of recent records.
pub fn initial_world(prepared: &Scenario) -> World {
    let mut world = World::new(prepared.setup(), &FaultRates::none(), None);
    world.trace = Trace::silent();
    world
}
