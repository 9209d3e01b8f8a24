//! What `sim check` is asked to explore and what it found: the options,
//! the path of a counterexample and the report. The explorer and the CLI
//! both read these; nothing here runs a world.

use std::collections::BTreeSet;

use crate::faults::{FaultKind, Injected, Site};
use crate::world::engine::schedule::Wake;

/// The bounds and fault menu of one exploration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Faults injected on any one path, at most (scripted faults of the
    /// scenario do not count: they fire as written).
    pub faults: u32,
    /// Wakes fired ahead of an earlier-due one on any one path, at most:
    /// a timer firing before time reached it, an actor paused past a
    /// later timer. `None`: any wake may fire next, always.
    pub early: Option<u32>,
    /// The (site, kind) pairs that may be injected.
    pub kinds: Vec<(Site, FaultKind)>,
    /// Transitions on any one path, at most (`None`: no bound).
    pub depth: Option<u32>,
    /// Unique states to keep, at most: the search stops there.
    pub max_states: u64,
    /// Threads expanding each breadth-first level.
    pub jobs: usize,
}

/// One transition of a path: the wake that fired, and the fault injected
/// in its step, if any (with the step number and actor it landed on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub wake: Wake,
    pub fault: Option<Injected>,
}

/// The first violation found: a shortest one, breadth first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The invariant id (`converges` for a quiet world that did not).
    pub invariant: &'static str,
    /// What it saw.
    pub detail: String,
    /// Transitions from the initial world.
    pub depth: u32,
    /// The world's step count at the violation.
    pub step: u64,
    pub path: Vec<Move>,
}

/// Why the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Every state within the fault budget (and depth bound, if any
    /// state reached it with something left to do) was explored.
    Exhausted,
    /// States at the depth bound had successors left unexplored.
    DepthBound,
    /// `max_states` unique states were reached.
    StateBound,
    /// A violation was found.
    Violation,
}

/// What an exploration did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explored {
    pub unique_states: u64,
    pub transitions: u64,
    /// The deepest level any unique state sits at.
    pub max_depth: u32,
    /// Quiet states (nothing left to do), each judged for `converges`.
    pub quiet_states: u64,
    pub ended: Ended,
    /// "Sometimes" targets reached on some explored path.
    pub sometimes: BTreeSet<&'static str>,
    pub found: Option<Found>,
}

impl Explored {
    /// The space within the bounds was explored to its end.
    pub fn exhausted(&self) -> bool {
        self.ended == Ended::Exhausted
    }
}
