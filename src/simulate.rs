//! One run's phases: the fault phase (up to `steps_max` steps or until
//! nothing is left to do), then faults and workload stop and the system
//! drains for `drain_steps_max` steps (longer while it still makes
//! progress), then `converges` is judged.
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

/// The most tasks a world holds. A finished task keeps its row, key and
/// artifact for the dump and the invariants (about 1 KB, several in a
/// long run's backlog), so a fuzz run of 10^12 steps would grow until
/// memory ran out; a 10^7-step run holds some 360,000. Past this bound the
/// run stops and does not converge (exit 3), saying why.
pub const TASKS_MAX: usize = 1_000_000;

/// Steps between two looks at the world's size.
const SIZE_CHECK_EVERY: u64 = 4096;

thread_local! {
    /// `TASKS_MAX`, or a smaller bound a test sets for this thread.
    static TASKS_BOUND: std::cell::Cell<usize> = const { std::cell::Cell::new(TASKS_MAX) };
}

/// Runs `f` with the bound on a world's tasks set to `bound` on this
/// thread, so a test can reach it without a million tasks.
pub fn with_tasks_max<T>(bound: usize, f: impl FnOnce() -> T) -> T {
    let before = TASKS_BOUND.with(|cell| cell.replace(bound));
    let result = f();
    TASKS_BOUND.with(|cell| cell.set(before));
    result
}

/// Why a world that outgrew its bound on tasks stopped, if it did. Looks
/// once `SIZE_CHECK_EVERY` steps have passed since `next` was set (a step
/// may count several records, so step numbers are not all seen).
fn outgrown(world: &World, next: &mut u64) -> Option<String> {
    if world.steps < *next {
        return None;
    }
    *next = world.steps + SIZE_CHECK_EVERY;
    crate::fuzz::panic::deliberate(world);
    let bound = TASKS_BOUND.with(std::cell::Cell::get);
    let tasks = world.db.tasks.len();
    (tasks > bound).then(|| {
        format!(
            "stopped at step {}: the world holds {tasks} tasks, more than sim keeps ({bound}); run fewer steps",
            world.steps
        )
    })
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
    let mut too_big = None;
    let mut next_check = world.steps + SIZE_CHECK_EVERY;
    while world.steps < steps_max && world.violation.is_none() && too_big.is_none() {
        if !advance(world) {
            break;
        }
        too_big = outgrown(world, &mut next_check);
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
    if let Some(reason) = too_big {
        outcome.not_converged.push(reason);
        return outcome;
    }
    world.stop_faults();
    let budget = world.config.drain_steps_max;
    let window = (budget / 10).max(DRAIN_WINDOW_MIN);
    let hard_limit = world.steps + budget.saturating_mul(DRAIN_BUDGETS_WHILE_PROGRESSING);
    let mut limit = world.steps + budget;
    let mut progress = Progress::of(world);
    let mut quiet = false;
    loop {
        while world.steps < limit && world.violation.is_none() && too_big.is_none() {
            if !advance(world) {
                quiet = true;
                break;
            }
            too_big = outgrown(world, &mut next_check);
        }
        if quiet || world.violation.is_some() || too_big.is_some() || limit >= hard_limit {
            break;
        }
        let now = Progress::of(world);
        if !now.beyond(&progress) {
            break;
        }
        progress = now;
        limit = (limit + window).min(hard_limit);
    }
    outcome.drain_steps = world.steps - fault_steps;
    outcome.violation = world.violation.clone();
    if outcome.violation.is_some() {
        return outcome;
    }
    outcome.not_converged = world.convergence_failures();
    if let Some(reason) = too_big {
        outcome.not_converged.push(reason);
    } else if !quiet {
        outcome.not_converged.push(format!(
            "still busy after {} drain steps ({} wakes pending)",
            outcome.drain_steps,
            world.pending()
        ));
    }
    outcome
}

/// A drain that uses up `drain_steps_max` while the world still makes
/// progress gets another tenth of it (at least `DRAIN_WINDOW_MIN` steps),
/// again and again while progress goes on, up to this many budgets in all.
/// A backlog larger than the budget (one worker behind several clients:
/// seeds 8161 of the 10,000-seed campaign and 2504 of a 3,000-seed one
/// were still finishing tasks and publishing when their budget ran out) is
/// not a liveness failure; a world that stops making progress is judged
/// after one more window.
pub const DRAIN_BUDGETS_WHILE_PROGRESSING: u64 = 5;

/// The least extra drain a progressing world is given at a time: long
/// enough for a task to go from its message to its terminal state.
const DRAIN_WINDOW_MIN: u64 = 1_000;

/// What a draining world has finished so far: tasks brought to a terminal
/// state, outbox rows still to publish, and requests and API calls still
/// waiting. The last two are the work of a world whose only API froze
/// for seconds while its clients went on sending and retrying: tens of
/// thousands of calls wait at the thaw, and working them off is progress
/// even where it creates tasks faster than they finish (seeds 9046 and
/// 9300 of the 10,000-seed campaign, judged unconverged after 110,000
/// drain steps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Progress {
    terminal: u64,
    unpublished: usize,
    requests: usize,
    calls: usize,
}

impl Progress {
    fn of(world: &World) -> Progress {
        Progress {
            terminal: world.counters.tasks_terminal,
            unpublished: world.db.unpublished.len(),
            requests: world.outgoing.len(),
            calls: world.calls.len(),
        }
    }

    /// Whether more tasks finished, or fewer rows, requests or calls
    /// wait, than at `before`.
    fn beyond(&self, before: &Progress) -> bool {
        self.terminal > before.terminal
            || self.unpublished < before.unpublished
            || self.requests < before.requests
            || self.calls < before.calls
    }
}
