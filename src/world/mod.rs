//! The world: every actor, the durable stores, ground truth, the scheduler
//! and the trace. `World::step` pops the next due wake, lets one actor take
//! one atomic step, records it, checks the invariants it touched, and
//! injects a crash if one is due. Only this module advances virtual time.

pub mod actors;
pub mod engine;
mod identity;
pub mod input;
mod mutant_hooks;
pub mod stores;
pub mod truth;
pub mod windows;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::Config;
use crate::faults::{FaultKind, FaultRates, Injector, Site};
use crate::invariants::Violation;
use crate::invariants::checker::Checker;
use crate::mutants::Mutant;
use crate::prng::{Prng, Stream};
use crate::task::Text;
use crate::trace::{Record, Trace};
use crate::world::engine::cow::CowTable;
use input::{Request, Setup, Workload};

use actors::api::calls::Calls;
use actors::client::Outgoing;
use actors::projector::Projector;
use actors::publisher;
use actors::reconciler::{Reconciler, ReconcilerPhase};
use actors::worker::{self, Worker};
use engine::ids::{self, ActorId, ActorKind, IntentId, KeyOf, RequestId, TaskId};
use engine::keymap::KeyMap;
use engine::life::{Life, QueuedAt};
use engine::schedule::{Schedule, Wake};
use engine::step::{StepCounts, Verb};
use engine::table::{IdTable, SortedDeque};
use stores::broker::Broker;
use stores::cache::Cache;
use stores::db::{self, Db, Input};
use stores::store::Store;
use truth::intents::Intent;

/// What the step being taken touched, for incremental invariant checks.
#[derive(Clone, Debug, Default, Hash)]
pub struct Touched {
    pub tasks: Vec<TaskId>,
    pub keys: Vec<Text>,
    pub tokens: Vec<db::Token>,
    pub entries: Vec<ids::EntryId>,
    pub cache: Vec<TaskId>,
    pub projection: Vec<TaskId>,
    /// Tasks created in this step.
    pub created: Vec<TaskId>,
    /// An API answered a request of an intent at the time it reached it.
    pub answers: Vec<(IntentId, db::Answer, u64)>,
    /// Worker steps about a delivery: what they did with it.
    pub deliveries: Vec<worker::DeliveryTouch>,
    pub delivered: Vec<(ids::EntryId, u32)>,
    /// Messages whose inbox row was written (registered or finalized): the
    /// checker's copy of the row follows these writes and no others.
    pub inbox: Vec<ids::OutboxId>,
    /// Leases granted, with the lease each replaced.
    pub leases: Vec<(TaskId, Option<db::Lease>)>,
    /// Cache fills, with the entry each found (none: absent or evicted).
    pub fills: Vec<(TaskId, Option<stores::cache::CacheEntry>)>,
    /// Inbox rows whose processing lease was granted or renewed, with the
    /// lease it replaced.
    pub inbox_leases: Vec<(ids::OutboxId, Option<db::InboxLease>)>,
    /// Outbox rows whose publisher claim was taken or released by a
    /// publisher, with the claim it replaced.
    pub claims: Vec<ClaimWrite>,
    /// Events appended from outside the pipeline, with the append API's
    /// answer: judged against the events the store holds afterwards.
    pub appends: Vec<(crate::task::TaskEvent, &'static str)>,
    /// Cancels an API answered: the task, the request's signal, and
    /// whether the answer acknowledged it.
    pub cancels: Vec<(TaskId, ids::SignalId, bool)>,
    /// Events a lease-taking actor (a worker, a fence) committed: what it
    /// committed, who it was, and the task's lease row when it committed.
    pub commits: Vec<Commit>,
    /// Attempts a worker gave up on without an answer, with the reason it
    /// gave: judged against the lease row, the ledger and the store.
    pub let_go: Vec<LetGo>,
    /// Dead-letter replays the operator asked for, with the letter the
    /// world found for the reference (none: `DEAD_LETTER_NOT_FOUND`).
    pub replays: Vec<(input::DeadLetterRef, Option<ids::DeadLetterId>)>,
    /// Effects sent to manual review because the store could not confirm
    /// them: judged against the ledger row at that moment.
    pub reviews: Vec<db::Token>,
    /// Dead letters the reconciler sent to manual review: judged against
    /// the re-drive budget their task spent.
    pub dead_letter_reviews: Vec<ids::DeadLetterId>,
    /// Dead letters the reconciler re-drove: judged by their error code.
    pub redriven: Vec<ids::DeadLetterId>,
    /// A client's send of a request (`false`) or its giving up on one
    /// (`true`): counted against `client_attempts_max` by the checker.
    pub client_sends: Vec<(ids::RequestId, bool)>,
    /// Tasks whose delivery the projector let go of (acked, or a direct
    /// delivery dropped): judged against the cache by
    /// `invalidated-before-ack`.
    pub projector_done: Vec<TaskId>,
    /// Cache deletes and evictions, with the entry each found: judged by
    /// `cache-floor-kept` (fills are judged through `fills`).
    pub cache_writes: Vec<(TaskId, Option<stores::cache::CacheEntry>)>,
}

/// A worker that let go of its delivery mid-attempt, and why.
#[derive(Clone, Copy, Debug, Hash)]
pub struct LetGo {
    pub task: TaskId,
    pub attempt: u32,
    /// The token the worker was working under.
    pub token: db::Token,
    pub actor: ActorId,
    pub incarnation: u32,
    pub why: &'static str,
}

/// A publisher's write of an outbox row's claim: the claim it found and
/// who wrote (judged by `lease-never-taken-live` and `lease-bounded`).
#[derive(Clone, Copy, Debug, Hash)]
pub struct ClaimWrite {
    pub message: ids::OutboxId,
    pub replaced: Option<(ActorId, u32, u64)>,
    pub writer: ActorId,
    pub incarnation: u32,
}

/// One event committed by a worker or a fence, with the lease row the
/// transaction saw: judged by `commit-respects-live-lease`.
#[derive(Clone, Copy, Debug, Hash)]
pub struct Commit {
    pub task: TaskId,
    pub kind: crate::task::EventType,
    pub attempt: i64,
    pub actor: ActorId,
    pub incarnation: u32,
    pub lease: Option<db::Lease>,
}

/// `$each` applied to every list of a `Touched`, as an array of the
/// results. The lists are named once, in a destructuring that stops
/// compiling when a list is added, so neither `is_empty` nor `clear` can
/// miss one.
macro_rules! each_list {
    ($touched:expr, |$list:ident| $each:expr) => {
        each_list!(@ $touched, $list, $each, tasks keys tokens entries cache
            projection created answers deliveries delivered inbox leases inbox_leases claims fills appends
            cancels commits let_go replays reviews dead_letter_reviews redriven client_sends
            projector_done cache_writes)
    };
    (@ $touched:expr, $list:ident, $each:expr, $($name:ident)*) => {{
        let Touched { $($name),* } = $touched;
        [$({ let $list = $name; $each }),*]
    }};
}

impl Touched {
    /// Nothing to check.
    pub fn is_empty(&self) -> bool {
        // Returns at the first list with something in it, as a chain of
        // `&&` would: this runs every step (evaluating every list, when there
        // were ten, cost 70 instructions a step more).
        each_list!(self, |list| if !list.is_empty() {
            return false;
        });
        true
    }

    /// Empties every list, keeping their buffers.
    fn clear(&mut self) {
        each_list!(self, |list| list.clear());
    }
}

/// Counts for summaries and coverage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Counters {
    pub sometimes: BTreeMap<&'static str, u64>,
    pub transitions: BTreeMap<(crate::task::Status, crate::task::EventType), u64>,
    pub rejections: BTreeMap<&'static str, u64>,
    pub races: BTreeMap<&'static str, u64>,
    pub tasks_terminal: u64,
    /// Tasks whose retention ended and whose row was compacted.
    pub tasks_compacted: u64,
    pub invariant_checks: u64,
    /// Steps taken, by name (`worker.put`).
    pub steps_by_action: StepCounts,
    /// Wakes that found nothing to do: time moved, but they are not steps.
    pub idle_wakes: u64,
}

/// What the step under way gathers for its own checks. A copy of a world
/// starts with it empty: every step clears it before anything reads it
/// (`World::begin`), and no world is copied in the middle of a step (the
/// model checker copies whole states, between steps). Copying the last
/// step's lists was an allocation per non-empty list at every branch the
/// model checker takes (about 1.5% of its allocations).
#[derive(Debug, Default)]
pub struct StepScratch<T>(pub T);

impl<T: Default> Clone for StepScratch<T> {
    fn clone(&self) -> StepScratch<T> {
        StepScratch(T::default())
    }
}

impl<T> std::ops::Deref for StepScratch<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for StepScratch<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// A world is a plain value: the model checker forks it at every branch.
#[derive(Clone)]
pub struct World {
    pub config: Config,
    pub mutant: Option<Mutant>,
    pub seed: u64,
    pub now: u64,
    pub steps: u64,
    /// Virtual time of the last step (wakes that find nothing to do move
    /// `now` but are not steps).
    pub last_step_ms: u64,
    queue: Schedule,
    /// Queued wakes that are not housekeeping.
    working: u64,
    housekeeping_at: QueuedAt,
    delays: Prng,
    pub faults: Injector,
    pub db: Db,
    pub broker: Broker,
    pub store: Store,
    pub cache: Cache,
    pub handler_version: u64,
    /// The scenario's requests, in time order.
    script: CowTable<Vec<Request>>,
    /// Turns the next scripted request has waited through.
    scripted_waits: u32,
    /// Every request issued so far, scripted or generated, while
    /// `keep_request_log` is on: what a reproducer replays.
    pub requests: CowTable<Vec<Request>>,
    /// Requests clients are still waiting on.
    pub outgoing: IdTable<RequestId, Outgoing>,
    next_request: u32,
    /// The highest version of each task each client has read: a reader
    /// keeps the newer view (lesson 000 §13.6). Filed by task first, so
    /// that compacting a task finds its readers in one range.
    pub highest_seen: CowTable<BTreeMap<(TaskId, u16), i64>>,
    pub calls: Calls,
    next_call: u32,
    pub clients: Vec<Life>,
    pub apis: Vec<Life>,
    pub publishers: Vec<publisher::Publisher>,
    pub workers: Vec<Worker>,
    pub projector: Projector,
    pub reconciler: Reconciler,
    /// Intents something can still be judged against (see `intents.rs`).
    pub intents: CowTable<IdTable<IntentId, Intent>>,
    /// Intents made so far: the last `IntentId`.
    intents_made: u32,
    /// Hashed by the key's fingerprint (`KeyMap`): only looked up.
    intent_index: CowTable<KeyMap<(KeyOf, crate::hash::Sha), IntentId>>,
    /// Intents no request carries, to look at again by a time: the
    /// release of the last one (at the end of that step), or the deadline
    /// of a first answer that still binds retries.
    intents_due: CowTable<SortedDeque<(u64, IntentId)>>,
    pub trace: Trace,
    pub checker: Checker,
    pub counters: Counters,
    pub violation: Option<Violation>,
    /// Draws requests while the world runs (the fuzz workload), if any.
    pub workload: Option<Box<dyn Workload>>,
    /// Requests are still being issued (off while draining).
    pub workload_on: bool,
    /// Invariants are checked after every step (benchmarks switch them off
    /// to measure what checking costs).
    pub invariants_on: bool,
    /// Every issued request is logged in `requests`, for a reproducer. Off
    /// unless asked for: the log grows with the run and only a reproducer
    /// reads it (`campaign::run_seed` runs a failing seed again to log it).
    pub keep_request_log: bool,
    /// What each request got back, for the dump's `requests` key; `None`
    /// (not kept) unless asked for, as `sim run` does.
    pub answers: Option<crate::world::truth::answers::Answers>,
    /// The step under way.
    rec: Record,
    pub touched: StepScratch<Touched>,
    /// A crash a fault inside the step asked for (commit crash, crash after
    /// confirm), carried out once the step is recorded.
    crash_now: Option<ActorId>,
    next_delivery: u64,
    worker_names: CowTable<Vec<Text>>,
    /// What a compacted task's row points at instead of its input.
    pub compacted_input: Arc<Input>,
    /// Finished tasks whose retention ended while something still carried
    /// them (a broker entry, a delivery, a job): compacted at a later
    /// expiry or compaction step (`compaction_retry_at`), once nothing
    /// does, or they would keep their history, rows and read models for
    /// the rest of the run.
    pub compaction_deferred: CowTable<std::collections::VecDeque<TaskId>>,
    /// When the reconciler next looks at the deferred compactions on its
    /// own (a compaction step), not only at an expiry.
    pub compaction_retry_at: u64,
    broker_poke_at: QueuedAt,
    next_worker: usize,
    /// Dead letters the operator replayed (found, not rolled back): each
    /// is owed a task that replays it (`converges`).
    pub replays_owed: CowTable<Vec<ids::DeadLetterId>>,
    /// An `outage` took the artifact store, or the broker, down until then.
    store_down_until: u64,
    broker_down_until: u64,
    /// Wakes to fire next, in this order, whatever their due times (a
    /// scenario's `schedule`: how a model checker's counterexample replays).
    pinned: CowTable<std::collections::VecDeque<Wake>>,
    /// A wake fired out of time order: the queue may hold overdue wakes.
    out_of_order: bool,
    /// Why the pinned schedule could not be followed, if it could not.
    pub schedule_missed: Option<String>,
}

/// What one call to `World::step` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stepped {
    /// A step ran.
    Step,
    /// Nothing is left in the queue.
    Quiet,
}

impl World {
    /// Builds the world `setup` describes, with optional random fault rates
    /// (fuzz) and a workload that draws requests as it runs.
    pub fn new(setup: Setup, rates: &FaultRates, workload: Option<Box<dyn Workload>>) -> World {
        let Setup {
            seed,
            mutant,
            config,
            requests,
            faults,
            schedule,
        } = setup;
        let mut world = World {
            mutant,
            seed,
            now: 0,
            steps: 0,
            last_step_ms: 0,
            queue: Schedule::default(),
            working: 0,
            housekeeping_at: QueuedAt::default(),
            delays: Prng::new(seed, Stream::Delays),
            faults: Injector::new(faults, rates, seed),
            db: Db::with_quota(config.quota),
            broker: Broker::default(),
            store: Store::default(),
            cache: Cache::default(),
            handler_version: config.handler_version,
            script: Vec::new().into(),
            scripted_waits: 0,
            requests: Vec::new().into(),
            outgoing: IdTable::default(),
            next_request: 0,
            highest_seen: BTreeMap::new().into(),
            calls: Calls::default(),
            next_call: 0,
            clients: vec![Life::new(); config.clients as usize],
            apis: vec![Life::new(); config.apis as usize],
            publishers: (0..config.publishers)
                .map(|_| publisher::Publisher::new())
                .collect(),
            workers: (0..config.workers).map(|_| Worker::new()).collect(),
            projector: Projector::new(),
            reconciler: Reconciler::new(),
            intents: IdTable::default().into(),
            intents_made: 0,
            intent_index: KeyMap::default().into(),
            intents_due: SortedDeque::default().into(),
            trace: Trace::new(),
            checker: Checker::default(),
            counters: Counters::default(),
            violation: None,
            workload,
            workload_on: true,
            invariants_on: true,
            keep_request_log: false,
            answers: None,
            rec: Record::blank(),
            touched: StepScratch::default(),
            crash_now: None,
            next_delivery: 0,
            compacted_input: Input::of(&serde_json::Value::Null),
            compaction_deferred: std::collections::VecDeque::new().into(),
            compaction_retry_at: 0,
            worker_names: (0..config.workers)
                .map(|index| Text::from(ActorId::new(ActorKind::Worker, index as u16).to_string()))
                .collect::<Vec<_>>()
                .into(),
            broker_poke_at: QueuedAt::default(),
            next_worker: 0,
            replays_owed: Vec::new().into(),
            store_down_until: 0,
            broker_down_until: 0,
            pinned: std::collections::VecDeque::from(schedule).into(),
            out_of_order: false,
            schedule_missed: None,
            config,
        };
        let mut script = requests;
        script.sort_by_key(|request| request.at_ms);
        if let Some(first) = script.first() {
            world.schedule(first.first_turn_ms(), Wake::Issue(0));
        }
        world.script = script.into();
        if world.workload.is_some() {
            world.schedule(0, Wake::Workload);
        }
        world
    }

    /// Issues scripted request `index` and schedules the next one's first
    /// turn; a turn the request waits through does nothing but schedule
    /// the next (see `Request::waits`).
    fn issue_scripted(&mut self, index: usize) -> bool {
        if !self.workload_on {
            return false;
        }
        let waits = self.script[index].waits;
        if self.scripted_waits < waits {
            self.scripted_waits += 1;
            let at = self.now + self.script[index].wait_ms;
            self.schedule(at, Wake::Issue(index as u32));
            return false;
        }
        self.scripted_waits = 0;
        if let Some(next) = self.script.get(index + 1) {
            let at = next.first_turn_ms().max(self.now);
            self.schedule(at, Wake::Issue(index as u32 + 1));
        }
        let request = self.script[index].clone();
        self.issue(request)
    }

    pub fn schedule(&mut self, at: u64, wake: Wake) {
        debug_assert!(at >= self.now);
        if wake != Wake::Housekeeping {
            self.working += 1;
        }
        self.queue.push(at, wake);
    }

    /// When the queued housekeeping wake (the reconciler's retention) is
    /// due, if one is.
    pub fn housekeeping_due(&self) -> Option<u64> {
        self.housekeeping_at.due()
    }

    /// Schedules housekeeping at `at` unless some is queued sooner.
    pub fn housekeeping(&mut self, at: u64) {
        if self.housekeeping_at.wants(at) {
            self.schedule(at, Wake::Housekeeping);
        }
    }

    /// Time until an actor's next step: drawn from the delays stream.
    pub fn latency(&mut self) -> u64 {
        let (low, high) = (
            self.config.latency_ms_min,
            self.config.latency_ms_max.max(self.config.latency_ms_min),
        );
        self.delays.range(low, high)
    }

    /// Pending wakes that are not housekeeping (for convergence reports).
    pub fn pending(&self) -> u64 {
        self.working
    }

    pub fn life(&self, actor: ActorId) -> Life {
        match actor.kind {
            ActorKind::Client => self.clients[actor.index as usize],
            ActorKind::Api => self.apis[actor.index as usize],
            ActorKind::Publisher => self.publishers[actor.index as usize].life,
            ActorKind::Worker => self.workers[actor.index as usize].life,
            ActorKind::Projector => self.projector.life,
            ActorKind::Reconciler => self.reconciler.life,
            ActorKind::Broker | ActorKind::Cache | ActorKind::Operator => Life::new(),
        }
    }

    fn life_mut(&mut self, actor: ActorId) -> Option<&mut Life> {
        match actor.kind {
            ActorKind::Client => self.clients.get_mut(actor.index as usize),
            ActorKind::Api => self.apis.get_mut(actor.index as usize),
            ActorKind::Publisher => self
                .publishers
                .get_mut(actor.index as usize)
                .map(|p| &mut p.life),
            ActorKind::Worker => self
                .workers
                .get_mut(actor.index as usize)
                .map(|w| &mut w.life),
            ActorKind::Projector => Some(&mut self.projector.life),
            ActorKind::Reconciler => Some(&mut self.reconciler.life),
            ActorKind::Broker | ActorKind::Cache | ActorKind::Operator => None,
        }
    }

    /// Whether an actor exists in this world's shape.
    pub fn has_actor(&self, actor: ActorId) -> bool {
        match actor.kind {
            ActorKind::Client => (actor.index as usize) < self.clients.len(),
            ActorKind::Api => (actor.index as usize) < self.apis.len(),
            ActorKind::Publisher => (actor.index as usize) < self.publishers.len(),
            ActorKind::Worker => (actor.index as usize) < self.workers.len(),
            _ => actor.index == 0,
        }
    }

    /// Wakes an idle actor at `at` unless a poke at or before then is queued.
    pub fn poke(&mut self, actor: ActorId, at: u64) {
        let Some(life) = self.life_mut(actor) else {
            return;
        };
        if life.up && life.poke_at.wants(at) {
            self.schedule(at, Wake::Poke(actor));
        }
    }

    /// Schedules a busy actor's next step after `delay`.
    pub fn continue_after(&mut self, actor: ActorId, delay: u64) {
        let incarnation = self.life(actor).incarnation;
        let stretched = self.stretched(actor, delay);
        if stretched > delay {
            self.sometimes("step-slowed-by-spike");
        }
        let at = self.now + stretched;
        self.schedule(at, Wake::Continue { actor, incarnation });
    }

    pub fn poke_broker(&mut self, at: u64) {
        if self.broker_poke_at.wants(at) {
            self.schedule(at, Wake::Broker);
        }
    }

    /// Runs at most one step. Wakes that find nothing to do are consumed
    /// without counting as steps.
    pub fn step(&mut self) -> Stepped {
        while self.working > 0 {
            if !self.pinned.is_empty() {
                return self.step_pinned();
            }
            let Some((at, wake)) = self.queue.pop() else {
                // Every queued wake but housekeeping is counted, so an empty
                // queue with wakes counted is a bug in sim's bookkeeping.
                assert_eq!(self.working, 0, "the queue is empty, yet wakes are counted");
                break;
            };
            // Once a wake fired out of time order (a pinned schedule),
            // earlier ones are overdue: they run now, and time stays.
            assert!(
                at >= self.now || self.out_of_order,
                "time never runs backwards"
            );
            if self.fire_wake(at, wake) {
                return Stepped::Step;
            }
        }
        if let Some(wanted) = self.pinned.pop_front() {
            self.schedule_missed = Some(format!(
                "schedule entry `{}` comes after the world went quiet at step {}",
                wanted.describe(),
                self.steps
            ));
            self.pinned.clear();
        }
        Stepped::Quiet
    }

    /// Runs the wake popped from the queue; true when it was a step.
    fn fire_wake(&mut self, at: u64, wake: Wake) -> bool {
        self.now = self.now.max(at);
        if wake != Wake::Housekeeping {
            self.working -= 1;
        }
        if self.dispatch(wake, at) {
            self.forget_unbound_intents();
            return true;
        }
        self.counters.idle_wakes += 1;
        false
    }

    /// What may happen next, for the model checker: every queued wake with
    /// its due time, in queue order. Empty when the world is quiet (only
    /// housekeeping left, which never keeps a world going on its own).
    pub fn menu(&self) -> Vec<(u64, Wake)> {
        let mut menu = Vec::new();
        self.menu_into(&mut menu);
        menu
    }

    /// `menu()`, written into `menu` (cleared first).
    pub fn menu_into(&self, menu: &mut Vec<(u64, Wake)>) {
        if self.working == 0 {
            menu.clear();
            return;
        }
        self.queue.entries_into(menu);
    }

    /// Lets copies of this world share its tables until they write them
    /// (`engine::cow`): what the model checker does before it copies a
    /// state for each of its transitions.
    pub fn share(&mut self) {
        self.db.share();
        self.broker.share();
        self.store.share();
        self.cache.share();
        self.projector.share();
        self.faults.share();
        self.checker.share();
        self.script.share();
        self.requests.share();
        self.highest_seen.share();
        self.intents.share();
        self.intent_index.share();
        self.intents_due.share();
        self.worker_names.share();
        self.compaction_deferred.share();
        self.replays_owed.share();
        self.pinned.share();
    }

    /// Fires the wake at `index` of `menu()` now, whatever its due time
    /// (time moves to it if it is later); true when it was a step.
    pub fn fire_chosen(&mut self, index: usize) -> bool {
        let (at, wake) = self.queue.take(index, self.now);
        self.out_of_order = true;
        self.fire_wake(at, wake)
    }

    /// The next wake of the pinned schedule: the first queued wake it
    /// names. When it names none (a scenario edited or shrunk since), the
    /// rest of the schedule is dropped, `schedule_missed` says so, and the
    /// run goes on in time order.
    fn step_pinned(&mut self) -> Stepped {
        while let Some(wanted) = self.pinned.pop_front() {
            let position = self.menu().iter().position(|(_, wake)| *wake == wanted);
            let Some(index) = position else {
                self.schedule_missed = Some(format!(
                    "schedule entry `{}` names no queued wake after step {}; the run went on in time order",
                    wanted.describe(),
                    self.steps
                ));
                self.pinned.clear();
                break;
            };
            if self.fire_chosen(index) {
                return Stepped::Step;
            }
        }
        self.step()
    }

    /// Runs one wake due at `at`; true when it was a step.
    fn dispatch(&mut self, wake: Wake, at: u64) -> bool {
        if let Some(stepped) = self.hold_back(wake, at) {
            return stepped;
        }
        match wake {
            Wake::Issue(index) => self.issue_scripted(index as usize),
            Wake::Call(call) => self.api_step(call),
            Wake::ClientTimeout { request, send } => self.client_timeout(request, send),
            Wake::Continue { actor, incarnation } => {
                let life = self.life(actor);
                if !life.up || life.incarnation != incarnation {
                    return false;
                }
                self.actor_step(actor, false)
            }
            Wake::Poke(actor) => {
                let Some(life) = self.life_mut(actor) else {
                    return false;
                };
                life.poke_at.fired(at);
                if !life.up {
                    return false;
                }
                self.actor_step(actor, true)
            }
            Wake::Broker => {
                self.broker_poke_at.fired(at);
                self.broker_step()
            }
            Wake::Restart(actor) => self.restart(actor),
            Wake::Workload => self.generate(),
            Wake::Housekeeping => {
                self.housekeeping_at.fired(at);
                if !self.reconciler.life.up
                    || !matches!(self.reconciler.phase, ReconcilerPhase::Idle)
                {
                    return false;
                }
                self.actor_step(ActorId::RECONCILER, true)
            }
        }
    }

    fn actor_step(&mut self, actor: ActorId, poked: bool) -> bool {
        let index = actor.index as usize;
        match actor.kind {
            ActorKind::Worker => self.worker_step(index, poked),
            ActorKind::Publisher => self.publisher_step(index, poked),
            ActorKind::Projector => self.projector_step(poked),
            ActorKind::Reconciler => self.reconciler_step(poked),
            _ => false,
        }
    }

    /// Starts recording a step.
    pub fn begin(&mut self, actor: ActorId, verb: Verb) {
        self.rec = Record::blank();
        self.rec.step = self.steps + 1;
        self.rec.time_ms = self.now;
        self.rec.actor = actor;
        self.rec.verb = verb;
        self.touched.clear();
        self.crash_now = None;
    }

    pub fn rec(&mut self) -> &mut Record {
        &mut self.rec
    }

    /// Asks the injector whether a fault fires at this site now; a fired
    /// fault is marked on the step's record.
    pub fn fault(&mut self, site: Site) -> Option<FaultKind> {
        // A call to a component that is out fails as a timeout would.
        let outage = match site {
            Site::StorePut | Site::StoreHide => {
                Some((windows::Component::Store, FaultKind::TimeoutBeforeCommit))
            }
            Site::StoreRead => Some((windows::Component::Store, FaultKind::Timeout)),
            Site::WorkerAck => Some((windows::Component::Broker, FaultKind::AckLost)),
            _ => None,
        };
        if let Some((component, kind)) = outage
            && self.out_of_service(component)
        {
            self.sometimes(match site {
                Site::StoreRead => "store-read-failed-in-outage",
                Site::WorkerAck => "ack-lost-in-broker-outage",
                _ => "store-write-failed-in-outage",
            });
            return Some(kind);
        }
        let fired = self.faults.at(site, self.rec.actor, self.rec.step);
        if let Some(kind) = fired
            && self.rec.fault.is_none()
        {
            self.rec.fault = Some((site, kind));
        }
        fired
    }

    /// The `db.commit` site of a transaction by the current actor. Returns
    /// `None` to go on; `Some(false)` when the transaction must not apply
    /// (crash before commit: the caller stops); `Some(true)` when it
    /// applies but the caller crashes after the commit.
    pub fn commit_fault(&mut self) -> Option<bool> {
        match self.fault(Site::DbCommit)? {
            FaultKind::CrashBeforeCommit => {
                self.crash_now = Some(self.rec.actor);
                self.rec.outcome = "crash-before-commit";
                Some(false)
            }
            FaultKind::CrashAfterCommit => {
                self.crash_now = Some(self.rec.actor);
                Some(true)
            }
            other => unreachable!("db.commit has no kind {other:?}"),
        }
    }

    /// Crash the current actor once this step is recorded.
    pub fn crash_after_step(&mut self) {
        self.crash_now = Some(self.rec.actor);
    }

    /// Finishes the step under way: counts it, traces it, checks the
    /// invariants it touched, and carries out a crash that is due.
    pub fn finish(&mut self) {
        self.steps += 1;
        self.last_step_ms = self.now;
        let action = self.rec.action();
        let actor = self.rec.actor;
        // A fault that promises a crash (before or after a commit, after a
        // confirm) crashes the actor that met it: a fault recorded and not
        // carried out is a bug in sim, reported with the seed.
        let crash_promised = matches!(
            self.rec.fault,
            Some((
                _,
                FaultKind::CrashBeforeCommit
                    | FaultKind::CrashAfterCommit
                    | FaultKind::CrashAfterConfirm
            ))
        );
        assert!(
            !crash_promised || self.crash_now.is_some(),
            "{actor} met a crash fault at step {} and goes on",
            self.steps
        );
        self.counters.steps_by_action.add(action);
        self.trace.push(&self.rec);
        self.rec = Record::blank();
        if self.violation.is_none() && self.invariants_on {
            self.check_step();
        }
        if self.db.reconcile_due_changed || self.broker.dead_letters_changed {
            self.db.reconcile_due_changed = false;
            self.broker.dead_letters_changed = false;
            self.schedule_reconcile();
        }
        let crash = self.crash_now.take();
        let drawn = if matches!(action.verb, Verb::Crash | Verb::Restart) {
            None
        } else {
            self.faults.after_step(action, actor, self.steps)
        };
        for victim in [crash, drawn].into_iter().flatten() {
            // Every crash lands on the actor that just stepped (drawn,
            // scripted or at a commit), so one this world has: anything
            // else is a bug in sim, reported with the seed like any panic.
            assert!(
                self.has_actor(victim),
                "a crash fell on {victim}, an actor this world does not have"
            );
            if self.life(victim).up {
                self.crash(victim);
            }
        }
    }

    /// Wipes an actor's volatile state; it restarts after a delay.
    pub fn crash(&mut self, actor: ActorId) {
        if !actor.kind.can_crash() {
            return;
        }
        self.begin(actor, Verb::Crash);
        self.rec.outcome = "crashed";
        if let Some(life) = self.life_mut(actor) {
            life.up = false;
            life.incarnation += 1;
            life.poke_at.forget();
            // A crash ends a pause or a spike: what comes back is new.
            life.paused_until = 0;
            life.thaw_at_takeover = false;
            life.slow_until = 0;
        }
        // And an aimed pause still owed for the step it crashed after.
        self.faults.forget_aim(actor);
        let index = actor.index as usize;
        match actor.kind {
            // A client's pending requests die with its incarnation.
            ActorKind::Client => {}
            ActorKind::Api => {
                let api = index as u16;
                for call in self.calls.remove_where(|call| call.api == api) {
                    self.end_call(&call);
                }
                // The crash took exactly this API's calls: one left behind
                // would run on at its wake as if nothing had crashed, a
                // sim bug no protocol check can see (reported with the
                // seed like any panic).
                assert!(
                    self.calls.values().all(|call| call.api != api),
                    "{actor} crashed and a call in flight at it survived"
                );
            }
            ActorKind::Publisher => self.publishers[index].wipe(),
            ActorKind::Worker => {
                if let Some(job) = &self.workers[index].job {
                    self.checker.forget_delivery(job.delivery_id);
                }
                self.workers[index].wipe();
            }
            ActorKind::Projector => self.projector.wipe(),
            ActorKind::Reconciler => self.reconciler.wipe(),
            _ => {}
        }
        let at = self.now + self.config.restart_delay_ms;
        self.schedule(at, Wake::Restart(actor));
        self.finish();
    }

    fn restart(&mut self, actor: ActorId) -> bool {
        let Some(life) = self.life_mut(actor) else {
            return false;
        };
        if life.up {
            return false;
        }
        life.up = true;
        self.begin(actor, Verb::Restart);
        if actor.kind == ActorKind::Projector {
            // Its restart reads how many tasks exist: those it may have
            // known before the crash (one read of the task table).
            self.projector.watermark = self.db.tasks.len() as u32;
            self.rec.version = Some(i64::from(self.projector.watermark));
        }
        self.finish();
        match actor.kind {
            ActorKind::Worker | ActorKind::Projector => self.poke_broker(self.now),
            ActorKind::Publisher => self.poke(actor, self.now),
            ActorKind::Reconciler => self.schedule_reconcile(),
            _ => {}
        }
        true
    }

    /// An actor's name as shared text (events name workers): made once.
    pub fn actor_name(&self, actor: ActorId) -> Text {
        match actor.kind {
            ActorKind::Worker => self.worker_names[actor.index as usize].clone(),
            _ => actor.to_string().into(),
        }
    }

    pub fn new_delivery_id(&mut self) -> u64 {
        self.next_delivery += 1;
        self.next_delivery
    }

    /// Counts a "sometimes" target reached.
    pub fn sometimes(&mut self, target: &'static str) {
        *self.counters.sometimes.entry(target).or_insert(0) += 1;
    }

    pub fn race(&mut self, race: &'static str) {
        *self.counters.races.entry(race).or_insert(0) += 1;
    }

    /// Stops faults and the workload: the drain phase of a run.
    pub fn stop_faults(&mut self) {
        self.faults.enabled = false;
        self.workload_on = false;
    }
}

impl World {
    /// Tasks created and not yet compacted: what the world still holds of
    /// the work asked of it (rows, messages, records, histories), which
    /// the fuzz client bounds.
    pub fn live_tasks(&self) -> u64 {
        self.db.tasks.len() as u64 - self.counters.tasks_compacted
    }

    /// The fuzz workload's next request, issued now.
    fn generate(&mut self) -> bool {
        if !self.workload_on {
            return false;
        }
        let live_tasks = self.live_tasks();
        let Some(workload) = self.workload.as_mut() else {
            return false;
        };
        let observed = input::Observed {
            dead_letters: &self.broker.dead_letters,
            db: &self.db,
            live_tasks,
            requests_in_flight: self.outgoing.len() as u64,
        };
        let (request, gap) = workload.next(self.now, &observed);
        let at = self.now + gap;
        self.schedule(at, Wake::Workload);
        match request {
            Some(request) => self.issue(request),
            None => false,
        }
    }
}
