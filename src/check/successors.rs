//! The successors of one state: every wake of its menu fired (within the
//! early-wake bound), each step run as it comes and again with each fault
//! the budget allows at a site it reached, each result fingerprinted. This
//! is the search's costly part and needs nothing but the state and the
//! fingerprints kept before, so threads can run it on their own states.

use crate::faults::{FaultKind, Injected, Probe, Site};
use crate::world::World;
use crate::world::engine::schedule::Wake;

use super::fingerprint::{Fingerprints, fingerprint};
use super::options::{CheckOptions, Move};

/// A state waiting to be expanded. The world is boxed: a frontier of them
/// moves pointers when it grows, not 5 KB structs.
pub struct Pending {
    pub world: Box<World>,
    /// Its node in the search tree (for rebuilding its path).
    pub node: u32,
    /// Faults injected on the path so far.
    pub spent: u32,
    /// Wakes fired ahead of an earlier-due one on the path so far.
    pub early: u32,
}

/// One transition out of a state, in the order the search counts them.
pub struct Successor {
    pub step: Move,
    pub spent: u32,
    pub early: u32,
    pub outcome: Outcome,
}

/// What a transition led to.
pub enum Outcome {
    /// The step broke an invariant (judged before any merging).
    Violation {
        invariant: &'static str,
        detail: String,
        step: u64,
    },
    /// A state already kept (or, on one thread's share of a level, one it
    /// produced earlier in the search's order): only counted.
    Seen,
    /// A state not kept before; the search keeps it unless an earlier
    /// transition of the same level reached the same fingerprint.
    Fresh {
        fingerprint: u128,
        world: Box<World>,
        /// Nothing left to do: its `converges` failures (empty: it
        /// converged). `None` while it has wakes queued.
        quiet: Option<Vec<String>>,
        /// Whether it may have reached a "sometimes" target the search has
        /// not noted: false when its parent's targets are all in the
        /// search's set (true of any kept state but the initial one) and
        /// it reached no target its parent had not. A world's targets only
        /// grow, so an equal count is the same set; judged here, on the
        /// expanding thread, it spares the merge comparing the targets of
        /// nearly every state it keeps.
        new_targets: bool,
    },
}

/// Lists one thread's expansion reuses from one state to the next: made
/// afresh for each state, they were five of its allocations (the menu,
/// the probe's box, its list of sites reached, and the wakes tried and
/// branched on), and one more at each fingerprint (its sorted wakes).
#[derive(Default)]
pub struct Reused {
    menu: Vec<(u64, Wake)>,
    probe: Option<Box<Probe>>,
    tried: Vec<Wake>,
    branches: Vec<(usize, Wake, u32)>,
    sorted_wakes: Vec<(u64, Wake)>,
}

/// How a step was run: as it came, or with one fault forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forced {
    Nothing,
    /// The kind at the occurrence with this index of the probe's `reached`.
    Site(usize, FaultKind),
    /// A crash of the stepping actor after its step.
    Crash,
}

/// Every transition out of `pending`, in the search's order, appended to
/// `out`: the wakes in menu order, each as it comes and then with each
/// fault. A state whose fingerprint `known` holds, or `produced` (when
/// given) held before, is `Seen`; `produced` gains the fingerprints of the
/// `Fresh` ones. Appended, not returned: a list per state, made on one
/// thread and freed on the one that merges, was a lock of the allocator
/// per state.
///
/// Each run takes a copy of the world except the state's last, which takes
/// the world itself: the state is spent once expanded, and a world copy is
/// most of what a transition costs. `reused` lends the lists the last call
/// kept; each is cleared before use, so nothing of one state's expansion
/// reaches the next.
pub fn successors(
    pending: Pending,
    options: &CheckOptions,
    known: &Fingerprints,
    mut produced: Option<&mut Fingerprints>,
    reused: &mut Reused,
    out: &mut Vec<Successor>,
) {
    let Pending {
        mut world,
        node,
        spent,
        early,
    } = pending;
    // The initial world's targets were never noted (node 0); any other
    // state's are in the search's set since it was kept (noted then, or
    // the same as its own parent's).
    let noted_targets = if node == 0 {
        None
    } else {
        Some(world.counters.sometimes.len())
    };
    let mut menu = std::mem::take(&mut reused.menu);
    world.menu_into(&mut menu);
    let due_first = menu.iter().map(|(at, _)| *at).min().unwrap_or(0);
    // The wakes that branch: of two equal wakes queued for different
    // times the earlier fires (the later one is the same event, later).
    let mut tried = std::mem::take(&mut reused.tried);
    let mut branches = std::mem::take(&mut reused.branches);
    tried.clear();
    branches.clear();
    for (index, (at, wake)) in menu.iter().enumerate() {
        if tried.contains(wake) {
            continue;
        }
        tried.push(*wake);
        let early = early + u32::from(*at > due_first);
        if options.early.is_some_and(|bound| early > bound) {
            continue;
        }
        branches.push((index, *wake, early));
    }
    let may_fault = spent < options.faults;
    // The parent's tables are shared once, before its first copy: each
    // copy then counts a reference to each table instead of copying it,
    // and copies only those its step writes. The parent itself is not
    // written until its last run takes it.
    if branches.len() > 1 || (may_fault && !branches.is_empty()) {
        world.share();
    }
    let mut parent = Some(world);
    let mut judge = |child: Box<World>, wake: Wake, fault: Option<Injected>, early: u32| {
        let spent = spent + u32::from(fault.is_some());
        let wakes = &mut reused.sorted_wakes;
        let outcome = outcome_of(
            child,
            spent,
            early,
            noted_targets,
            known,
            produced.as_deref_mut(),
            wakes,
        );
        out.push(Successor {
            step: Move { wake, fault },
            spent,
            early,
            outcome,
        });
    };
    // The thread's probe, kept in `reused`: `run` rebuilds it before each
    // run, keeping only its list's room.
    let mut probe = reused.probe.take().unwrap_or_default();
    for (branch, (index, wake, early)) in branches.iter().enumerate() {
        let last_branch = branch + 1 == branches.len();
        // With no budget left the plain run is the state's last.
        let world = take_or_copy(&mut parent, last_branch && !may_fault);
        let plain;
        (plain, probe) = run(world, *index, Forced::Nothing, probe);
        let forced = if may_fault {
            fault_menu(options, &probe)
        } else {
            Vec::new()
        };
        judge(plain, *wake, None, *early);
        for (position, force) in forced.iter().enumerate() {
            let last = last_branch && position + 1 == forced.len();
            let child;
            (child, probe) = run(take_or_copy(&mut parent, last), *index, *force, probe);
            // A forced fault always fires (the step runs as it did when
            // it reached the site); if one did not, the copy is the plain
            // successor again and costs nothing new.
            let Some(fault) = probe.fired.take() else {
                continue;
            };
            judge(child, *wake, Some(fault), *early);
        }
    }
    reused.menu = menu;
    reused.probe = Some(probe);
    reused.tried = tried;
    reused.branches = branches;
}

/// The world itself when `last`, else a copy of it (its tables shared
/// before the first copy).
fn take_or_copy(parent: &mut Option<Box<World>>, last: bool) -> Box<World> {
    if last {
        parent.take().expect("the state's last run takes it once")
    } else {
        Box::new(World::clone(parent.as_ref().expect("taken only last")))
    }
}

/// Judges a successor: a violation, a state seen, or a fresh one.
fn outcome_of(
    child: Box<World>,
    spent: u32,
    early: u32,
    noted_targets: Option<usize>,
    known: &Fingerprints,
    produced: Option<&mut Fingerprints>,
    wakes: &mut Vec<(u64, Wake)>,
) -> Outcome {
    if let Some(violation) = &child.violation {
        return Outcome::Violation {
            invariant: violation.invariant,
            detail: violation.message.clone(),
            step: child.steps,
        };
    }
    let fingerprint = fingerprint(&child, spent, early, wakes);
    if known.contains(fingerprint) {
        return Outcome::Seen;
    }
    if let Some(produced) = produced
        && !produced.insert(fingerprint)
    {
        return Outcome::Seen;
    }
    // No wake but housekeeping queued: the menu is empty (asked without
    // listing it).
    let quiet = (child.pending() == 0).then(|| child.convergence_failures());
    let new_targets = noted_targets != Some(child.counters.sometimes.len());
    Outcome::Fresh {
        fingerprint,
        world: child,
        quiet,
        new_targets,
    }
}

/// The faults that may be forced in a step that reached what `probe`
/// saw: every allowed kind at the first occurrence of each (site, actor)
/// in the step where no scripted fault fired (a replay's fault placed at
/// that step fires at its site's first occurrence there), and a crash of
/// the stepping actor after it.
fn fault_menu(options: &CheckOptions, probe: &Probe) -> Vec<Forced> {
    let allowed = |site: Site, kind: FaultKind| options.kinds.contains(&(site, kind));
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

/// Fires wake `index` of `world`'s menu with `forced`, seen by `probe`
/// (cleared first, keeping its list's room); returns the world and what
/// the step's probe saw.
fn run(
    mut world: Box<World>,
    index: usize,
    forced: Forced,
    mut probe: Box<Probe>,
) -> (Box<World>, Box<Probe>) {
    let mut reached = std::mem::take(&mut probe.reached);
    reached.clear();
    *probe = Probe {
        reached,
        ..Probe::default()
    };
    match forced {
        Forced::Nothing => {}
        Forced::Site(occurrence, kind) => probe.forced = Some((occurrence, kind)),
        Forced::Crash => probe.crash_forced = true,
    }
    world.faults.probe = Some(probe);
    world.fire_chosen(index);
    let probe = world.faults.probe.take().expect("the probe stays in place");
    (world, probe)
}
