//! Breadth-first exploration of every schedule of a world: at each state,
//! every queued wake may fire next (timers at any point after they are
//! armed), and each step may be run again with a fault forced at any site
//! it reached while the path's fault budget lasts. States are merged by
//! fingerprint; the first violation found is a shortest one.

use std::collections::BTreeSet;

use crate::faults::{FaultKind, Injected, Probe, Site};
use crate::invariants::CONVERGES;
use crate::world::World;
use crate::world::engine::schedule::Wake;

use super::fingerprint::fingerprint;
use super::options::{CheckOptions, Ended, Explored, Found, Move};

/// How a step was run: as it came, or with one fault forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forced {
    Nothing,
    /// The kind at the occurrence with this index of the probe's `reached`.
    Site(usize, FaultKind),
    /// A crash of the stepping actor after its step.
    Crash,
}

/// A state's place in the search tree, for rebuilding its path.
struct Node {
    /// Index of the parent node; the root is its own parent.
    parent: u32,
    step: Move,
}

/// A state waiting to be expanded.
struct Pending {
    world: World,
    node: u32,
    /// Faults injected on the path so far.
    spent: u32,
    /// Wakes fired ahead of an earlier-due one on the path so far.
    early: u32,
}

/// The search's memory and tallies.
struct Search<'o> {
    options: &'o CheckOptions,
    nodes: Vec<Node>,
    /// Fingerprints of every state kept (a B-tree: sim walks no hash
    /// order, and a lookup costs little beside a fingerprint).
    seen: BTreeSet<u128>,
    explored: Explored,
}

/// Explores every schedule of `root` within `options`' bounds.
pub fn explore(root: World, options: &CheckOptions) -> Explored {
    let mut search = Search {
        options,
        nodes: Vec::new(),
        seen: BTreeSet::new(),
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
    search.seen.insert(fingerprint(&root, 0, 0));
    search.explored.unique_states = 1;
    let mut frontier = Vec::new();
    if let Some(found) = search.judge_quiet(&root, 0, 0) {
        search.explored.found = Some(found);
        search.explored.ended = Ended::Violation;
        return search.explored;
    }
    if !root.menu().is_empty() {
        frontier.push(Pending {
            world: root,
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
        for pending in frontier {
            if let Some(ended) = search.expand(&pending, depth + 1, &mut next) {
                search.explored.ended = ended;
                return search.explored;
            }
        }
        frontier = next;
        depth += 1;
    }
    search.explored
}

impl Search<'_> {
    /// Runs every successor of `pending`, keeping the new ones in `next`.
    /// `Some` when the search must stop (a violation, the state bound).
    fn expand(&mut self, pending: &Pending, depth: u32, next: &mut Vec<Pending>) -> Option<Ended> {
        let menu = pending.world.menu();
        let due_first = menu.iter().map(|(at, _)| *at).min().unwrap_or(0);
        let mut tried: Vec<Wake> = Vec::with_capacity(menu.len());
        for (index, (at, wake)) in menu.iter().enumerate() {
            // Of two equal wakes queued for different times, the earlier
            // fires: the later one is the same event, later.
            if tried.contains(wake) {
                continue;
            }
            tried.push(*wake);
            let early = pending.early + u32::from(*at > due_first);
            if self.options.early.is_some_and(|bound| early > bound) {
                continue;
            }
            let (plain, probe) = run(&pending.world, index, Forced::Nothing);
            let forced = if pending.spent < self.options.faults {
                self.fault_menu(&probe)
            } else {
                Vec::new()
            };
            if let Some(ended) = self.visit(plain, pending, *wake, None, early, depth, next) {
                return Some(ended);
            }
            for force in forced {
                let (child, probe) = run(&pending.world, index, force);
                // A forced fault always fires (the step runs as it did
                // when it reached the site); if one did not, the copy is
                // the plain successor again and costs nothing new.
                let Some(fault) = probe.fired else {
                    continue;
                };
                if let Some(ended) =
                    self.visit(child, pending, *wake, Some(fault), early, depth, next)
                {
                    return Some(ended);
                }
            }
        }
        None
    }

    /// The faults that may be forced in a step that reached what `probe`
    /// saw: every allowed kind at the first occurrence of each (site,
    /// actor) in the step where no scripted fault fired (a replay's fault
    /// placed at that step fires at its site's first occurrence there),
    /// and a crash of the stepping actor after it.
    fn fault_menu(&self, probe: &Probe) -> Vec<Forced> {
        let allowed = |site: Site, kind: FaultKind| self.options.kinds.contains(&(site, kind));
        let mut menu = Vec::new();
        let mut places = Vec::new();
        for (occurrence, (site, actor, scripted)) in probe.reached.iter().enumerate() {
            if places.contains(&(*site, *actor)) {
                continue;
            }
            places.push((*site, *actor));
            if *scripted {
                continue;
            }
            for kind in site.kinds() {
                if allowed(*site, *kind) {
                    menu.push(Forced::Site(occurrence, *kind));
                }
            }
        }
        if probe.crash_reached.is_some() && allowed(Site::Crash, FaultKind::Crash) {
            menu.push(Forced::Crash);
        }
        menu
    }

    /// Counts a successor; keeps it if it is new. `Some` to stop.
    #[allow(clippy::too_many_arguments)]
    fn visit(
        &mut self,
        child: World,
        parent: &Pending,
        wake: Wake,
        fault: Option<Injected>,
        early: u32,
        depth: u32,
        next: &mut Vec<Pending>,
    ) -> Option<Ended> {
        self.explored.transitions += 1;
        let spent = parent.spent + u32::from(fault.is_some());
        let step = Move { wake, fault };
        if let Some(violation) = &child.violation {
            let mut path = self.path_to(parent.node);
            path.push(step);
            self.explored.found = Some(Found {
                invariant: violation.invariant,
                detail: violation.message.clone(),
                depth,
                step: child.steps,
                path,
            });
            return Some(Ended::Violation);
        }
        if !self.seen.insert(fingerprint(&child, spent, early)) {
            return None;
        }
        self.explored.unique_states += 1;
        self.explored.max_depth = self.explored.max_depth.max(depth);
        for target in child.counters.sometimes.keys() {
            self.explored.sometimes.insert(target);
        }
        let node = u32::try_from(self.nodes.len()).expect("fewer than 2^32 states");
        self.nodes.push(Node {
            parent: parent.node,
            step,
        });
        if let Some(found) = self.judge_quiet(&child, node, depth) {
            self.explored.found = Some(found);
            return Some(Ended::Violation);
        }
        if !child.menu().is_empty() {
            next.push(Pending {
                world: child,
                node,
                spent,
                early,
            });
        }
        if self.explored.unique_states >= self.options.max_states {
            return Some(Ended::StateBound);
        }
        None
    }

    /// A quiet world (nothing left to do) is judged for `converges`, as a
    /// run judges its world once drained.
    fn judge_quiet(&mut self, world: &World, node: u32, depth: u32) -> Option<Found> {
        if !world.menu().is_empty() {
            return None;
        }
        self.explored.quiet_states += 1;
        let failures = world.convergence_failures();
        if failures.is_empty() {
            return None;
        }
        Some(Found {
            invariant: CONVERGES,
            detail: failures.join("; "),
            depth,
            step: world.steps,
            path: self.path_to(node),
        })
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

/// Fires wake `index` of `world`'s menu in a copy of it, with `forced`;
/// returns the copy and what the step's probe saw.
fn run(world: &World, index: usize, forced: Forced) -> (World, Probe) {
    let mut child = world.clone();
    let mut probe = Probe::default();
    match forced {
        Forced::Nothing => {}
        Forced::Site(occurrence, kind) => probe.forced = Some((occurrence, kind)),
        Forced::Crash => probe.crash_forced = true,
    }
    child.faults.probe = Some(Box::new(probe));
    child.fire_chosen(index);
    let probe = child.faults.probe.take().expect("the probe stays in place");
    (child, *probe)
}
