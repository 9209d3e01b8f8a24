//! The fault catalogue (sites and kinds of DESIGN §5), scripted fault plans
//! from scenarios, swarm-drawn random rates for fuzz, and the injector that
//! counts site occurrences and decides, at each site, whether a fault fires.

use crate::prng::{PPM, Prng};
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::ActorId;
use crate::world::engine::step::Action;

/// Where a fault can happen. Names are the vocabulary of every report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Site {
    ApiResponse,
    DbCommit,
    PublisherConfirm,
    BrokerDeliver,
    WorkerAck,
    StorePut,
    StoreRead,
    StoreHide,
    CacheDelete,
    CacheEvict,
    SnapshotWrite,
    Crash,
    BrokerPublish,
    StoreOutage,
    BrokerOutage,
    Pause,
    Latency,
}

/// What goes wrong at a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    Lost,
    CrashBeforeCommit,
    CrashAfterCommit,
    ConfirmLost,
    CrashAfterConfirm,
    Duplicate,
    Delay,
    Tamper,
    AckLost,
    TimeoutAfterCommit,
    TimeoutBeforeCommit,
    Corrupt,
    CorruptMetadata,
    Timeout,
    Fail,
    Evict,
    CorruptRehashed,
    Crash,
    Outage,
    Pause,
    UntilTakeover,
    Spike,
}

impl Site {
    pub const ALL: [Site; 17] = [
        Site::ApiResponse,
        Site::DbCommit,
        Site::PublisherConfirm,
        Site::BrokerDeliver,
        Site::WorkerAck,
        Site::StorePut,
        Site::StoreRead,
        Site::StoreHide,
        Site::CacheDelete,
        Site::CacheEvict,
        Site::SnapshotWrite,
        Site::Crash,
        Site::BrokerPublish,
        Site::StoreOutage,
        Site::BrokerOutage,
        Site::Pause,
        Site::Latency,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Site::ApiResponse => "api.response",
            Site::DbCommit => "db.commit",
            Site::PublisherConfirm => "publisher.confirm",
            Site::BrokerDeliver => "broker.deliver",
            Site::WorkerAck => "worker.ack",
            Site::StorePut => "store.put",
            Site::StoreRead => "store.read",
            Site::StoreHide => "store.hide",
            Site::CacheDelete => "cache.delete",
            Site::CacheEvict => "cache.evict",
            Site::SnapshotWrite => "snapshot.write",
            Site::Crash => "crash",
            Site::BrokerPublish => "broker.publish",
            Site::StoreOutage => "store.outage",
            Site::BrokerOutage => "broker.outage",
            Site::Pause => "pause",
            Site::Latency => "latency",
        }
    }

    pub fn parse(text: &str) -> Option<Site> {
        Site::ALL.into_iter().find(|site| site.as_str() == text)
    }

    /// The kinds that can happen at this site, in catalogue order.
    pub fn kinds(self) -> &'static [FaultKind] {
        use FaultKind::*;
        match self {
            Site::ApiResponse => &[Lost],
            Site::DbCommit => &[CrashBeforeCommit, CrashAfterCommit],
            Site::PublisherConfirm => &[ConfirmLost, CrashAfterConfirm],
            Site::BrokerDeliver => &[Duplicate, Delay, Tamper],
            Site::WorkerAck => &[AckLost],
            Site::StorePut => &[
                TimeoutAfterCommit,
                TimeoutBeforeCommit,
                Corrupt,
                CorruptMetadata,
            ],
            Site::StoreRead => &[Timeout],
            Site::StoreHide => &[TimeoutAfterCommit, TimeoutBeforeCommit],
            Site::CacheDelete => &[Fail],
            Site::CacheEvict => &[Evict],
            Site::SnapshotWrite => &[Corrupt, CorruptRehashed],
            Site::Crash => &[Crash],
            Site::BrokerPublish => &[Lost],
            Site::StoreOutage | Site::BrokerOutage => &[Outage],
            Site::Pause => &[Pause, UntilTakeover],
            Site::Latency => &[Spike],
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl FaultKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Lost => "lost",
            FaultKind::CrashBeforeCommit => "crash-before-commit",
            FaultKind::CrashAfterCommit => "crash-after-commit",
            FaultKind::ConfirmLost => "confirm-lost",
            FaultKind::CrashAfterConfirm => "crash-after-confirm",
            FaultKind::Duplicate => "duplicate",
            FaultKind::Delay => "delay",
            FaultKind::Tamper => "tamper",
            FaultKind::AckLost => "ack-lost",
            FaultKind::TimeoutAfterCommit => "timeout-after-commit",
            FaultKind::TimeoutBeforeCommit => "timeout-before-commit",
            FaultKind::Corrupt => "corrupt",
            FaultKind::CorruptMetadata => "corrupt-metadata",
            FaultKind::Timeout => "timeout",
            FaultKind::Fail => "fail",
            FaultKind::Evict => "evict",
            FaultKind::CorruptRehashed => "corrupt-rehashed",
            FaultKind::Crash => "crash",
            FaultKind::Outage => "outage",
            FaultKind::Pause => "pause",
            FaultKind::UntilTakeover => "until-takeover",
            FaultKind::Spike => "spike",
        }
    }
}

/// Every (site, kind) pair of the catalogue, in order: the rows of the
/// fault tables in summaries and the swarm's menu.
pub fn catalogue() -> Vec<(Site, FaultKind)> {
    Site::ALL
        .into_iter()
        .flat_map(|site| site.kinds().iter().map(move |kind| (site, *kind)))
        .collect()
}

/// Where a scripted fault fires.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Placement {
    /// The nth (1-based) occurrence of the site, counted per actor when the
    /// fault names one. For `crash`, the nth step of that actor.
    Nth(u64),
    /// The first occurrence of the site at or after this global step. For
    /// `crash`, right after this global step.
    Step(u64),
    /// The `reach`th occurrence of the site (counting every actor's) while
    /// this many steps have run, or the first after, by the fault's actor
    /// when it names one: a site met at wakes that are not steps (`pause`
    /// and `latency`, drawn at every wake of an actor, a held-back one
    /// included) can be met several times between two steps, and a
    /// reproducer names which.
    StepReach { step: u64, reach: u64 },
    /// The first occurrence of the site after the nth time the named step
    /// ran (by the fault's actor, when it names one). For `crash`, right
    /// after that step.
    After { action: Action, nth: u64 },
}

/// One fault of a scenario's `[[faults]]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ScriptedFault {
    pub site: Site,
    pub kind: FaultKind,
    pub placement: Placement,
    pub actor: Option<ActorId>,
}

impl Placement {
    /// The global step a placement names (`step`, with or without its
    /// `nth`), if it names one.
    pub fn step(&self) -> Option<u64> {
        match *self {
            Placement::Step(step) | Placement::StepReach { step, .. } => Some(step),
            _ => None,
        }
    }
}

impl ScriptedFault {
    /// The fault as a scenario spells it, for warnings: `crash/crash
    /// actor = "worker-1" after = "worker.put" nth = 2`.
    pub fn describe(&self) -> String {
        let mut text = format!("{}/{}", self.site.as_str(), self.kind.as_str());
        if let Some(actor) = self.actor {
            text.push_str(&format!(" actor = \"{actor}\""));
        }
        match &self.placement {
            Placement::Nth(n) => text.push_str(&format!(" nth = {n}")),
            Placement::Step(step) => text.push_str(&format!(" step = {step}")),
            Placement::StepReach { step, reach } => {
                text.push_str(&format!(" step = {step} nth = {reach}"))
            }
            Placement::After { action, nth } => {
                text.push_str(&format!(" after = \"{action}\" nth = {nth}"))
            }
        }
        text
    }
}

/// Random rates per (site, kind), in parts per million of occurrences.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FaultRates {
    /// Indexed like `catalogue()`.
    pub ppm: Vec<u32>,
    /// Pauses aimed at the moment right after chosen steps, if any.
    pub pause_focus: Option<PauseFocus>,
}

impl FaultRates {
    pub fn none() -> FaultRates {
        FaultRates {
            ppm: vec![0; catalogue().len()],
            pause_focus: None,
        }
    }
}

/// Pauses aimed at a few steps: an actor that has just taken one of the
/// steps in `after` draws a pause before its next wake at `ppm` (or its
/// site's rate, if higher). A guard against a stale holder sits in the
/// window between a read and the write it feeds, one step wide; an
/// actor's pause lands there at the site's rate only once in thousands
/// of steps, and a swarm world that aims its pauses there explores the
/// window thoroughly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PauseFocus {
    pub after: Vec<Action>,
    pub ppm: u32,
}

/// A fault that fired: what, where, and at which step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Injected {
    pub step: u64,
    pub site: Site,
    pub kind: FaultKind,
    pub actor: ActorId,
    /// Which occurrence of the site at this step it was, counting every
    /// actor's (1-based; see `Placement::StepReach`).
    pub reach: u64,
}

impl Injected {
    /// Where a script puts this fault to fire it again.
    pub fn placement(&self) -> Placement {
        if self.reach > 1 {
            Placement::StepReach {
                step: self.step,
                reach: self.reach,
            }
        } else {
            Placement::Step(self.step)
        }
    }
}

/// The model checker's hand on the injector during one step: it records
/// every site the step reaches and may force one decision, so a step can
/// be run again from the same state with a fault there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Probe {
    /// Each site occurrence of the step, in order: the site, the actor
    /// there, and whether a scripted fault fired at it.
    pub reached: Vec<(Site, ActorId, bool)>,
    /// Fire this kind at the occurrence with this index of `reached`.
    pub forced: Option<(usize, FaultKind)>,
    /// The crashable actor whose step ended with no scripted crash: where
    /// a crash may land.
    pub crash_reached: Option<ActorId>,
    /// Crash that actor after its step.
    pub crash_forced: bool,
    /// The forced fault, once it fired.
    pub fired: Option<Injected>,
}

/// Decides at each site occurrence whether a fault fires, from scripted
/// placements and random rates; counts occurrences and injections.
#[derive(Clone, Debug)]
pub struct Injector {
    scripted: Vec<ScriptedFault>,
    /// Per scripted fault: fired already, and for `After`, whether its
    /// trigger step has run (armed).
    fired: Vec<bool>,
    armed: Vec<bool>,
    /// Every scripted fault before this one has fired: the scans start here.
    first_unfired: usize,
    /// Every scripted fault is placed at a step, in step order, as a
    /// reproducer writes them: a scan stops at the first not yet due, so a
    /// replay of a long run costs per step what is due, not what is left.
    step_ordered: bool,
    /// Per (site, kind) in catalogue order: rate in ppm, flattened per site.
    rates: [[u32; 4]; Site::ALL.len()],
    any_random: bool,
    /// A transaction may crash before its commit: the rate of that kind
    /// or a scripted one (the model checker forces its own through
    /// `probe`). `uncommitted-writes-nothing` has nothing to judge
    /// otherwise, and skips taking the stores' footprint.
    crash_before_commit: bool,
    pause_focus: Option<PauseFocus>,
    /// Actors whose last step was one `pause_focus` aims at: their next
    /// pause draw uses its rate.
    focused: Vec<ActorId>,
    rng: Prng,
    parameters: Prng,
    /// Occurrences of each site, globally.
    site_count: [u64; Site::ALL.len()],
    /// Occurrences of each (site, actor).
    site_actor_count: CowTable<std::collections::BTreeMap<(Site, ActorId), u64>>,
    /// Steps run by each (action, actor) and by each action.
    action_count: CowTable<std::collections::BTreeMap<(Action, Option<ActorId>), u64>>,
    /// Per site, the last step that met it and how often that step did
    /// (`Injected::reach`). Kept per site and reset when a site is met at
    /// a new step, so a step costs the sites it meets, not a copy of every
    /// site's count.
    reach_step: [u64; Site::ALL.len()],
    reach_in_step: [u32; Site::ALL.len()],
    /// Faults switched off: the drain phase.
    pub enabled: bool,
    pub injected: CowTable<Vec<Injected>>,
    /// The model checker's probe, when one is exploring (never in a run).
    pub probe: Option<Box<Probe>>,
}

impl Injector {
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.site_actor_count.share();
        self.action_count.share();
        self.injected.share();
    }

    pub fn new(scripted: Vec<ScriptedFault>, rates: &FaultRates, seed: u64) -> Injector {
        let mut table = [[0u32; 4]; Site::ALL.len()];
        for ((site, kind), ppm) in catalogue().into_iter().zip(rates.ppm.iter()) {
            let slot = site
                .kinds()
                .iter()
                .position(|k| *k == kind)
                .expect("kind of its site");
            table[site.index()][slot] = (*ppm).min(PPM);
        }
        let before_commit = Site::DbCommit
            .kinds()
            .iter()
            .position(|kind| *kind == FaultKind::CrashBeforeCommit)
            .expect("a kind of db.commit");
        let crash_before_commit = table[Site::DbCommit.index()][before_commit] > 0
            || scripted
                .iter()
                .any(|fault| fault.kind == FaultKind::CrashBeforeCommit);
        let count = scripted.len();
        let step_of = |fault: &ScriptedFault| fault.placement.step();
        let step_ordered = scripted.iter().all(|fault| step_of(fault).is_some())
            && scripted.is_sorted_by_key(step_of);
        Injector {
            scripted,
            fired: vec![false; count],
            armed: vec![false; count],
            first_unfired: 0,
            step_ordered,
            any_random: table.iter().flatten().any(|ppm| *ppm > 0) || rates.pause_focus.is_some(),
            crash_before_commit,
            rates: table,
            pause_focus: rates.pause_focus.clone(),
            focused: Vec::new(),
            rng: Prng::new(seed, crate::prng::Stream::Faults),
            parameters: Prng::new(seed, crate::prng::Stream::FaultParameters),
            site_count: [0; Site::ALL.len()],
            site_actor_count: Default::default(),
            action_count: Default::default(),
            reach_step: [0; Site::ALL.len()],
            reach_in_step: [0; Site::ALL.len()],
            enabled: true,
            injected: CowTable::default(),
            probe: None,
        }
    }

    /// Called once per occurrence of a (non-crash) site. Returns the fault
    /// that fires there, if any.
    pub fn at(&mut self, site: Site, actor: ActorId, step: u64) -> Option<FaultKind> {
        let index = site.index();
        if self.reach_step[index] != step {
            self.reach_step[index] = step;
            self.reach_in_step[index] = 0;
        }
        self.reach_in_step[index] += 1;
        let reach = u64::from(self.reach_in_step[index]);
        self.site_count[index] += 1;
        let nth_global = self.site_count[index];
        // Per-actor counts only matter to scripted placements; fuzz runs
        // have none and skip the bookkeeping.
        let nth_actor = if self.scripted.is_empty() {
            0
        } else {
            let per_actor = self.site_actor_count.entry((site, actor)).or_insert(0);
            *per_actor += 1;
            *per_actor
        };
        if !self.enabled {
            return None;
        }
        let mut chosen = None;
        for index in self.first_unfired..self.scripted.len() {
            if self.fired[index] {
                continue;
            }
            let fault = &self.scripted[index];
            if self.not_yet(fault, step) {
                break;
            }
            if fault.site != site || fault.actor.is_some_and(|a| a != actor) {
                continue;
            }
            let due = match fault.placement {
                Placement::Nth(n) => {
                    let seen = if fault.actor.is_some() {
                        nth_actor
                    } else {
                        nth_global
                    };
                    seen == n
                }
                Placement::Step(s) => step >= s,
                Placement::StepReach { step: s, reach: r } => step > s || (step == s && reach >= r),
                Placement::After { .. } => self.armed[index],
            };
            if due {
                chosen = Some(fault.kind);
                self.fire(index);
                break;
            }
        }
        if let Some(probe) = self.probe.as_deref_mut() {
            let occurrence = probe.reached.len();
            probe.reached.push((site, actor, chosen.is_some()));
            if let Some((forced_at, kind)) = probe.forced
                && forced_at == occurrence
                && chosen.is_none()
            {
                chosen = Some(kind);
                probe.fired = Some(Injected {
                    step,
                    site,
                    kind,
                    actor,
                    reach,
                });
            }
        }
        let focus_ppm = self.focus_ppm(site, actor);
        if chosen.is_none() && self.any_random {
            for (slot, kind) in site.kinds().iter().enumerate() {
                // A pause until a takeover is drawn only for actors that
                // hold what another can take over (a task's lease, a
                // message, an outbox row's claim).
                if *kind == FaultKind::UntilTakeover && !actor.kind.holds_leases() {
                    continue;
                }
                // An aimed pause is a plain pause, or one until a takeover
                // in a world that draws those at all: a world without them
                // draws exactly what it drew before they were added.
                let own = self.rates[site.index()][slot];
                let ppm = if slot == 0 || own > 0 {
                    own.max(focus_ppm)
                } else {
                    own
                };
                if ppm > 0 && self.rng.chance(ppm) {
                    chosen = Some(*kind);
                    break;
                }
            }
        }
        if let Some(kind) = chosen {
            self.injected.push(Injected {
                step,
                site,
                kind,
                actor,
                reach,
            });
        }
        chosen
    }

    /// The aimed pause rate for this draw: `actor`'s first pause draw since
    /// it took a step `pause_focus` aims at (the draw clears the mark).
    fn focus_ppm(&mut self, site: Site, actor: ActorId) -> u32 {
        if site != Site::Pause || self.focused.is_empty() {
            return 0;
        }
        let Some(at) = self.focused.iter().position(|a| *a == actor) else {
            return 0;
        };
        self.focused.swap_remove(at);
        self.pause_focus.as_ref().map_or(0, |focus| focus.ppm)
    }

    /// Whether a transaction of this run may crash before its commit.
    pub fn may_crash_before_commit(&self) -> bool {
        self.crash_before_commit || self.probe.is_some()
    }

    /// Drops `actor`'s mark of an aimed step: it crashed, and its next
    /// incarnation's first wake is not the moment after that step.
    pub fn forget_aim(&mut self, actor: ActorId) {
        self.focused.retain(|marked| *marked != actor);
    }

    /// Called after every step with the action that ran and its actor.
    /// Arms `After` placements and returns the actors a scripted or random
    /// crash takes down now.
    pub fn after_step(&mut self, action: Action, actor: ActorId, step: u64) -> Option<ActorId> {
        if let Some(focus) = &self.pause_focus
            && focus.after.contains(&action)
            && !self.focused.contains(&actor)
        {
            self.focused.push(actor);
        }
        if actor.kind.can_crash() {
            // Every step of a crashable actor is a place a crash can land.
            self.site_count[Site::Crash.index()] += 1;
        }
        if self.scripted.is_empty() {
            return self.random_crash(actor, step);
        }
        let by_actor = self.action_count.entry((action, Some(actor))).or_insert(0);
        *by_actor += 1;
        let nth_actor = *by_actor;
        let all = self.action_count.entry((action, None)).or_insert(0);
        *all += 1;
        let nth_all = *all;
        let crash_steps = self
            .site_actor_count
            .entry((Site::Crash, actor))
            .or_insert(0);
        *crash_steps += 1;
        let actor_steps = *crash_steps;
        if !self.enabled {
            return None;
        }
        let mut crash = None;
        for index in self.first_unfired..self.scripted.len() {
            if self.fired[index] {
                continue;
            }
            let fault = &self.scripted[index];
            if self.not_yet(fault, step) {
                break;
            }
            if let Placement::After {
                action: trigger,
                nth,
            } = fault.placement
            {
                let counted = match fault.actor {
                    Some(named) if named == actor => Some(nth_actor),
                    Some(_) => None,
                    None => Some(nth_all),
                };
                if trigger == action && counted == Some(nth) {
                    if fault.site == Site::Crash {
                        crash = Some(fault.actor.unwrap_or(actor));
                        self.fire(index);
                        break;
                    }
                    self.armed[index] = true;
                }
            }
            if fault.site != Site::Crash || crash.is_some() {
                continue;
            }
            let due = match fault.placement {
                Placement::Nth(n) => fault.actor == Some(actor) && actor_steps == n,
                // A crash comes after a step: one place per step.
                Placement::Step(s) | Placement::StepReach { step: s, .. } => step >= s,
                Placement::After { .. } => false,
            };
            if due {
                crash = fault.actor.or(Some(actor));
                self.fire(index);
                break;
            }
        }
        if let Some(victim) = crash {
            self.injected.push(Injected {
                step,
                site: Site::Crash,
                kind: FaultKind::Crash,
                actor: victim,
                reach: 1,
            });
            return crash;
        }
        self.random_crash(actor, step)
    }

    /// Whether the scan can stop at `fault`: in a step-ordered script, it
    /// and every fault after it are placed after `step`.
    fn not_yet(&self, fault: &ScriptedFault, step: u64) -> bool {
        self.step_ordered && fault.placement.step().is_some_and(|at| at > step)
    }

    fn fire(&mut self, index: usize) {
        self.fired[index] = true;
        while self.fired.get(self.first_unfired) == Some(&true) {
            self.first_unfired += 1;
        }
    }

    /// A crash drawn at random after a step of `actor`, or, under the
    /// model checker's probe, the crash it forces there.
    fn random_crash(&mut self, actor: ActorId, step: u64) -> Option<ActorId> {
        if !actor.kind.can_crash() {
            return None;
        }
        if let Some(probe) = self.probe.as_deref_mut()
            && probe.crash_reached.is_none()
            && self.enabled
        {
            probe.crash_reached = Some(actor);
            if probe.crash_forced {
                let crash = Injected {
                    step,
                    site: Site::Crash,
                    kind: FaultKind::Crash,
                    actor,
                    reach: 1,
                };
                probe.fired = Some(crash.clone());
                self.injected.push(crash);
                return Some(actor);
            }
        }
        let ppm = self.rates[Site::Crash.index()][0];
        if !self.enabled || !self.any_random || ppm == 0 || !self.rng.chance(ppm) {
            return None;
        }
        self.injected.push(Injected {
            step,
            site: Site::Crash,
            kind: FaultKind::Crash,
            actor,
            reach: 1,
        });
        Some(actor)
    }

    /// Whether a scripted fault is placed by global step number: then the
    /// step count is part of a world's identity.
    pub fn places_by_step(&self) -> bool {
        self.scripted
            .iter()
            .any(|fault| fault.placement.step().is_some())
    }

    /// The injector's part of a world's identity (see `World::identity`):
    /// the scripted plan's progress and the counts its placements read,
    /// and how many fault parameters were drawn (the next draw depends on
    /// it). A world with no scripted faults has only the last.
    pub fn identity(&self, state: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        let parameters_drawn = self
            .injected
            .iter()
            .filter(|fault| fault.kind == FaultKind::Delay)
            .count();
        parameters_drawn.hash(state);
        if self.scripted.is_empty() {
            return;
        }
        (
            &self.fired,
            &self.armed,
            &self.site_count,
            &self.site_actor_count,
            &self.action_count,
        )
            .hash(state);
        let by_reach = (self.scripted.iter())
            .any(|fault| matches!(fault.placement, Placement::StepReach { .. }));
        if by_reach {
            (&self.reach_step, &self.reach_in_step).hash(state);
        }
    }

    /// A fault's parameter (a delay, say), drawn from the faults stream so
    /// it never shifts the workload or the delays.
    pub fn parameter(&mut self, low: u64, high: u64) -> u64 {
        self.parameters.range(low, high.max(low))
    }

    /// How often each site was reached, for coverage.
    pub fn site_occurrences(&self) -> Vec<(Site, u64)> {
        Site::ALL
            .into_iter()
            .map(|site| (site, self.site_count[site.index()]))
            .collect()
    }

    /// Scripted faults that never fired: a scenario whose fault missed its
    /// mark deserves a warning.
    pub fn unfired(&self) -> Vec<&ScriptedFault> {
        self.unfired_indexed()
            .into_iter()
            .map(|(_, fault)| fault)
            .collect()
    }

    /// Scripted faults that never fired, with their 0-based index in the
    /// scenario's `[[faults]]`.
    pub fn unfired_indexed(&self) -> Vec<(usize, &ScriptedFault)> {
        self.scripted
            .iter()
            .zip(self.fired.iter())
            .enumerate()
            .filter(|(_, (_, fired))| !**fired)
            .map(|(index, (fault, _))| (index, fault))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::engine::ids::ActorKind;

    fn at_step(site: Site, actor: ActorId, step: u64) -> ScriptedFault {
        ScriptedFault {
            site,
            kind: site.kinds()[0],
            placement: Placement::Step(step),
            actor: Some(actor),
        }
    }

    /// A fault's reach (which occurrence of its site at its step) is
    /// counted over every actor; a reach past the first is placed by it
    /// (`step` with `nth` in a script), and a script placed so fires at
    /// that occurrence, or at the next step's first when its own step
    /// passed with fewer.
    #[test]
    fn a_fault_placed_at_a_reach_fires_at_that_occurrence_of_its_step() {
        let publisher = ActorId::new(ActorKind::Publisher, 0);
        let worker = ActorId::new(ActorKind::Worker, 0);
        // A fuzz run draws a pause at the third wake of publisher-1 while
        // 40 steps have run (the fourth pause draw of that step); the
        // injection says which.
        let mut rates = FaultRates::none();
        let pause = catalogue()
            .iter()
            .position(|(site, _)| *site == Site::Pause);
        rates.ppm[pause.expect("pause is in the catalogue")] = PPM;
        let mut drawn = Injector::new(Vec::new(), &rates, 1);
        assert_eq!(drawn.at(Site::Latency, publisher, 40), None);
        assert_eq!(drawn.at(Site::Pause, worker, 40), Some(FaultKind::Pause));
        drawn.at(Site::Pause, publisher, 40);
        drawn.at(Site::Pause, publisher, 40);
        drawn.at(Site::Pause, publisher, 40);
        drawn.at(Site::Pause, publisher, 41);
        let reaches: Vec<(u64, u64)> = drawn.injected.iter().map(|f| (f.step, f.reach)).collect();
        // Counted per site, every actor's: the worker's was the first.
        assert_eq!(reaches, [(40, 1), (40, 2), (40, 3), (40, 4), (41, 1)]);
        assert_eq!(
            drawn.injected[3].placement(),
            Placement::StepReach { step: 40, reach: 4 }
        );
        assert_eq!(drawn.injected[4].placement(), Placement::Step(41));
        // Replayed, it fires there, not at the first wake of that step.
        let script = vec![ScriptedFault {
            site: Site::Pause,
            kind: FaultKind::Pause,
            placement: drawn.injected[3].placement(),
            actor: Some(publisher),
        }];
        let mut replay = Injector::new(script, &FaultRates::none(), 1);
        assert!(replay.step_ordered);
        assert_eq!(replay.at(Site::Pause, publisher, 39), None);
        assert_eq!(replay.at(Site::Pause, publisher, 40), None);
        assert_eq!(replay.at(Site::Pause, worker, 40), None, "not its actor");
        assert_eq!(replay.at(Site::Pause, publisher, 40), None);
        assert_eq!(
            replay.at(Site::Pause, publisher, 40),
            Some(FaultKind::Pause)
        );
        assert!(replay.unfired().is_empty());
        // One missed (its step passed with fewer wakes) fires at the next.
        let late = ScriptedFault {
            site: Site::Pause,
            kind: FaultKind::Pause,
            placement: Placement::StepReach { step: 7, reach: 5 },
            actor: Some(publisher),
        };
        let mut replay = Injector::new(vec![late], &FaultRates::none(), 1);
        assert_eq!(replay.at(Site::Pause, publisher, 7), None);
        assert_eq!(replay.at(Site::Pause, publisher, 8), Some(FaultKind::Pause));
    }

    /// A script placed at steps in step order (a reproducer's) fires what
    /// the full scan fired: a fault waits, due, for its own site and actor
    /// while later ones fire around it, and none fires before its step.
    #[test]
    fn a_step_ordered_script_fires_each_fault_at_its_site_once_due() {
        let api = ActorId::new(ActorKind::Api, 0);
        let worker = ActorId::new(ActorKind::Worker, 0);
        let script = vec![
            at_step(Site::DbCommit, api, 10),
            at_step(Site::StorePut, worker, 12),
            at_step(Site::DbCommit, worker, 20),
        ];
        for ordered in [true, false] {
            let mut faults = Injector::new(script.clone(), &FaultRates::none(), 1);
            assert!(faults.step_ordered);
            // The full scan, for comparison: the same answers.
            faults.step_ordered = ordered;
            let kind = |site: Site| Some(site.kinds()[0]);
            assert_eq!(faults.at(Site::DbCommit, api, 9), None, "not yet due");
            assert_eq!(faults.at(Site::DbCommit, worker, 11), None, "not its actor");
            assert_eq!(faults.at(Site::StorePut, worker, 12), kind(Site::StorePut));
            assert_eq!(faults.at(Site::DbCommit, api, 13), kind(Site::DbCommit));
            assert_eq!(faults.first_unfired, 2, "both first faults fired");
            assert_eq!(faults.at(Site::DbCommit, worker, 19), None);
            assert_eq!(faults.at(Site::DbCommit, worker, 25), kind(Site::DbCommit));
            assert_eq!(
                faults.at(Site::DbCommit, worker, 26),
                None,
                "each fires once"
            );
            assert!(faults.unfired().is_empty());
        }
        let mut unordered = script;
        unordered.swap(0, 2);
        assert!(!Injector::new(unordered, &FaultRates::none(), 1).step_ordered);
    }

    /// An aimed pause is drawn at the aimed rate once, by the actor that
    /// took the aimed step, at its next pause draw; other actors, other
    /// steps and later draws keep the site's own rate (none here).
    #[test]
    fn an_aimed_pause_follows_only_the_aimed_step_of_its_actor() {
        use crate::world::engine::step::Verb;
        let first = ActorId::new(ActorKind::Worker, 0);
        let second = ActorId::new(ActorKind::Worker, 1);
        let verify = Action::new(ActorKind::Worker, Verb::Verify);
        let put = Action::new(ActorKind::Worker, Verb::Put);
        let rates = FaultRates {
            pause_focus: Some(PauseFocus {
                after: vec![verify],
                ppm: PPM,
            }),
            ..FaultRates::none()
        };
        let mut faults = Injector::new(Vec::new(), &rates, 1);
        assert_eq!(faults.at(Site::Pause, first, 1), None);
        faults.after_step(put, first, 2);
        assert_eq!(faults.at(Site::Pause, first, 3), None);
        faults.after_step(verify, first, 4);
        assert_eq!(faults.at(Site::Pause, second, 5), None);
        assert_eq!(faults.at(Site::Latency, first, 5), None);
        assert_eq!(faults.at(Site::Pause, first, 5), Some(FaultKind::Pause));
        assert_eq!(faults.at(Site::Pause, first, 6), None);
        // Not owed across a crash: the next incarnation starts afresh.
        faults.after_step(verify, first, 7);
        faults.forget_aim(first);
        assert_eq!(faults.at(Site::Pause, first, 8), None);
        // Off in the drain, like every random fault.
        faults.after_step(verify, first, 7);
        faults.enabled = false;
        assert_eq!(faults.at(Site::Pause, first, 8), None);
    }
}
