//! Breadth-first exploration of every schedule of a world: at each state,
//! every queued wake may fire next (timers at any point after they are
//! armed), and each step may be run again with a fault forced at any site
//! it reached while the path's fault budget lasts (`successors.rs`).
//! States are merged by fingerprint; the first violation found is a
//! shortest one. On several threads a level's states are expanded in
//! parallel (`level.rs`) and their successors taken in the same order one
//! thread takes them, so every count and counterexample is the same.

use std::collections::BTreeSet;

use crate::invariants::CONVERGES;
use crate::world::World;
use crate::world::engine::schedule::Wake;

use super::fingerprint::{Fingerprints, fingerprint};
use super::level::expand_level;
use super::options::{CheckOptions, Ended, Explored, Found, Move};
use super::successors::{Outcome, Pending, Reused, Successor, successors};

/// A state's place in the search tree, for rebuilding its path.
struct Node {
    /// Index of the parent node; the root is its own parent.
    parent: u32,
    step: Move,
}

/// The search's memory and tallies.
struct Search<'o> {
    options: &'o CheckOptions,
    nodes: Vec<Node>,
    /// Fingerprints of every state kept.
    seen: Fingerprints,
    /// The targets the last world `note_sometimes` added had reached, in
    /// key order: all in `explored.sometimes` already.
    last_sometimes: Vec<&'static str>,
    explored: Explored,
}

/// Explores every schedule of `root` within `options`' bounds.
pub fn explore(root: World, options: &CheckOptions) -> Explored {
    let mut search = Search {
        options,
        nodes: Vec::new(),
        seen: Fingerprints::default(),
        last_sometimes: Vec::new(),
        explored: Explored {
            unique_states: 0,
            transitions: 0,
            max_depth: 0,
            quiet_states: 0,
            ended: Ended::Exhausted,
            sometimes: BTreeSet::new(),
            found: None,
        },
    };
    search.nodes.push(Node {
        parent: 0,
        step: Move {
            wake: Wake::Housekeeping,
            fault: None,
        },
    });
    search
        .seen
        .insert(fingerprint(&root, 0, 0, &mut Vec::new()));
    search.explored.unique_states = 1;
    let mut frontier = Vec::new();
    if root.menu().is_empty() {
        search.explored.quiet_states += 1;
        let failures = root.convergence_failures();
        if !failures.is_empty() {
            search.found(0, 0, CONVERGES, failures.join("; "), root.steps);
            return search.explored;
        }
    } else {
        frontier.push(Pending {
            world: Box::new(root),
            node: 0,
            spent: 0,
            early: 0,
        });
    }
    let mut depth = 0u32;
    while !frontier.is_empty() {
        if options.depth.is_some_and(|bound| depth >= bound) {
            search.explored.ended = Ended::DepthBound;
            break;
        }
        let mut next = Vec::new();
        let ended = if options.jobs <= 1 {
            search.level_here(frontier, depth + 1, &mut next)
        } else {
            search.level_in_parallel(frontier, depth + 1, &mut next)
        };
        if let Some(ended) = ended {
            search.explored.ended = ended;
            return search.explored;
        }
        frontier = next;
        depth += 1;
    }
    search.explored
}

impl Search<'_> {
    /// Expands a level on this thread, taking each state's successors as
    /// they come. `Some` when the search must stop.
    fn level_here(
        &mut self,
        frontier: Vec<Pending>,
        depth: u32,
        next: &mut Vec<Pending>,
    ) -> Option<Ended> {
        let mut out = Vec::new();
        let mut reused = Reused::default();
        for pending in frontier {
            let parent = pending.node;
            let known = &self.seen;
            successors(pending, self.options, known, None, &mut reused, &mut out);
            if let Some(ended) = self.take(parent, out.drain(..), depth, next) {
                return Some(ended);
            }
        }
        None
    }

    /// Expands a level on `options.jobs` threads, then takes the
    /// successors in the order `level_here` would.
    fn level_in_parallel(
        &mut self,
        frontier: Vec<Pending>,
        depth: u32,
        next: &mut Vec<Pending>,
    ) -> Option<Ended> {
        for share in expand_level(frontier, self.options, &self.seen) {
            let mut successors = share.successors.into_iter();
            for (parent, count) in share.states {
                if let Some(ended) = self.take(parent, successors.by_ref().take(count), depth, next)
                {
                    return Some(ended);
                }
            }
        }
        None
    }

    /// Counts the successors of node `parent`, in order; keeps the new
    /// states in `next`. `Some` when the search must stop (a violation,
    /// the state bound).
    fn take(
        &mut self,
        parent: u32,
        successors: impl Iterator<Item = Successor>,
        depth: u32,
        next: &mut Vec<Pending>,
    ) -> Option<Ended> {
        for successor in successors {
            self.explored.transitions += 1;
            let Successor {
                step,
                spent,
                early,
                outcome,
            } = successor;
            let (fingerprint, world, quiet, new_targets) = match outcome {
                Outcome::Violation {
                    invariant,
                    detail,
                    step: at_step,
                } => {
                    let node = self.add_node(parent, step);
                    self.found(node, depth, invariant, detail, at_step);
                    return Some(Ended::Violation);
                }
                Outcome::Seen => continue,
                Outcome::Fresh {
                    fingerprint,
                    world,
                    quiet,
                    new_targets,
                } => (fingerprint, world, quiet, new_targets),
            };
            if !self.seen.insert(fingerprint) {
                continue;
            }
            self.explored.unique_states += 1;
            self.explored.max_depth = self.explored.max_depth.max(depth);
            if new_targets {
                self.note_sometimes(&world);
            }
            let node = self.add_node(parent, step);
            match quiet {
                // A quiet world (nothing left to do) is judged for
                // `converges`, as a run judges its world once drained.
                Some(failures) => {
                    self.explored.quiet_states += 1;
                    if !failures.is_empty() {
                        self.found(node, depth, CONVERGES, failures.join("; "), world.steps);
                        return Some(Ended::Violation);
                    }
                }
                None => next.push(Pending {
                    world,
                    node,
                    spent,
                    early,
                }),
            }
            if self.explored.unique_states >= self.options.max_states {
                return Some(Ended::StateBound);
            }
        }
        None
    }

    /// Adds the "sometimes" targets `world` reached to the search's. Most
    /// kept worlds reached the same targets as the one before them: that
    /// list is compared first, in order, and only a different one is
    /// added target by target (a lookup per target per kept state was
    /// most of the time the search spent between levels on two threads).
    fn note_sometimes(&mut self, world: &World) {
        let reached = world.counters.sometimes.keys();
        if reached.len() == self.last_sometimes.len()
            && reached.clone().eq(self.last_sometimes.iter())
        {
            return;
        }
        self.last_sometimes.clear();
        for target in reached {
            self.explored.sometimes.insert(target);
            self.last_sometimes.push(target);
        }
    }

    fn add_node(&mut self, parent: u32, step: Move) -> u32 {
        let node = u32::try_from(self.nodes.len()).expect("fewer than 2^32 states");
        self.nodes.push(Node { parent, step });
        node
    }

    /// Records the violation reached at node `node`.
    fn found(&mut self, node: u32, depth: u32, invariant: &'static str, detail: String, step: u64) {
        self.explored.found = Some(Found {
            invariant,
            detail,
            depth,
            step,
            path: self.path_to(node),
        });
        self.explored.ended = Ended::Violation;
    }

    /// The moves from the initial world to node `node`.
    fn path_to(&self, mut node: u32) -> Vec<Move> {
        let mut path = Vec::new();
        while node != 0 {
            let at = &self.nodes[node as usize];
            path.push(at.step.clone());
            node = at.parent;
        }
        path.reverse();
        path
    }
}
