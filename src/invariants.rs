//! The invariants of DESIGN §6, checked after EVERY step, incrementally:
//! a step reports what it touched (`World::touched`) and only those checks
//! run, so the cost does not grow with the world. Several judge ground truth
//! no actor sees (intents, tampered deliveries). `converges` is judged once,
//! at quiescence.

use std::collections::BTreeMap;

use crate::hash::{Sha, hex};
use crate::task::{Policy, Status, TaskState, Text, Transition, initial_state, transition};
use crate::world::World;
use crate::world::actors::worker::DeliveryAct;
use crate::world::engine::ids::{KeyOf, OutboxId, TaskId};
use crate::world::engine::keymap::KeyMap;
use crate::world::engine::table::IdTable;
use crate::world::stores::db::{Answer, Db, EffectKind, InboxState, ProcessResult, Token};

/// One invariant: its stable id and what it states.
pub struct Invariant {
    pub id: &'static str,
    pub statement: &'static str,
}

pub const INVARIANTS: &[Invariant] = &[
    Invariant {
        id: "one-task-per-intent",
        statement: "every request of one client intent that reaches an API before its record's commit time + idempotency_ttl_ms gets the same task (or the same refusal); a replay is a new intent",
    },
    Invariant {
        id: "one-task-per-key",
        statement: "a live idempotency record names at most one task (none for a recorded refusal), and no other task was created under its key while it lived",
    },
    Invariant {
        id: "key-bound-to-fingerprint",
        statement: "a key never answers a request with another fingerprint",
    },
    Invariant {
        id: "one-artifact-per-token",
        statement: "the store holds at most one written version per effect token; a second put is a no-op returning the first object",
    },
    Invariant {
        id: "one-visible-artifact-per-task",
        statement: "once a task is terminal it has at most one visible artifact: the one it completed with, or none",
    },
    Invariant {
        id: "terminal-never-reopens",
        statement: "a completed, failed or cancelled task never changes status",
    },
    Invariant {
        id: "version-step-one",
        statement: "each accepted event raises the version by exactly one; rejects and duplicates raise nothing",
    },
    Invariant {
        id: "event-id-unique",
        statement: "one event per event id; one event per (task, sequence)",
    },
    Invariant {
        id: "completed-has-verified-artifact",
        statement: "a completed task's artifact exists, is visible, and its bytes and metadata match artifactSha256, the task and the attempt",
    },
    Invariant {
        id: "no-visible-corrupt-artifact",
        statement: "once a task is terminal, none of its artifacts that fails verification is visible",
    },
    Invariant {
        id: "replay-matches-state",
        statement: "folding a task's events gives its state row",
    },
    Invariant {
        id: "cache-never-ahead",
        statement: "a cached view is a state the database really committed, at a version no higher than the current one",
    },
    Invariant {
        id: "projection-consistent",
        statement: "the projector's read model of a task is a state the task really had, field for field, at that version",
    },
    Invariant {
        id: "quota-never-oversold",
        statement: "accepted creates never exceed the quota",
    },
    Invariant {
        id: "inbox-conflict-quarantined",
        statement: "a delivery whose message id matches an inbox row but whose payload hash differs is quarantined: never processed, never acked as a duplicate; the first hash's row is unaffected",
    },
    Invariant {
        id: "duplicate-acked-with-first-result",
        statement: "a delivery whose id and hash match an inbox row in a final state is answered with the recorded result and an ack: no new effect, no failure, no nack",
    },
    Invariant {
        id: "bounded-deliveries",
        statement: "the broker delivers no entry more than delivery_attempts_max times",
    },
    Invariant {
        id: "no-orphan-message",
        statement: "every entry in the broker's topics has a message id that is a committed outbox row's id, with that row's payload",
    },
    Invariant {
        id: crate::simulate::CONVERGES,
        statement: "after the faults stop and the system drains: every task terminal or in manual review with an enumerated reason, every outbox row published, no effect unknown or started outside review, nothing in flight but dead letters, every cached view current or absent",
    },
];

pub fn is_invariant(id: &str) -> bool {
    INVARIANTS.iter().any(|invariant| invariant.id == id)
}

/// A broken invariant, with what a report needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub step: u64,
    pub time_ms: u64,
    pub message: String,
    /// Task, key, token, message involved, as text.
    pub entities: Vec<String>,
}

/// What the checker remembers of one task between steps. Its status and
/// version are its replay's, and the events it has seen are one per entry
/// of its history after the first.
#[derive(Debug)]
struct TaskMirror {
    /// The check round (`Checker::round`) in which the task's history last
    /// checked clean: within one round nothing changes the database, so a
    /// second look (projection, cache) would find the same and is skipped.
    synced: u64,
    /// Every state the task had, by version: the initial state, then the
    /// fold of the events seen so far (true transition, no mutant). Its
    /// last entry is the replay the state row must equal.
    history: Vec<TaskState>,
}

impl TaskMirror {
    fn replay(&self) -> &TaskState {
        self.history
            .last()
            .expect("a mirror's history starts with the initial state")
    }

    /// How many of the task's events it has folded.
    fn events(&self) -> usize {
        self.history.len() - 1
    }
}

/// The checker's memory of one task: all of it while the task lives, its
/// final status and version once it was compacted. A live mirror is held
/// inline (its history is already on the heap): no allocation per task for
/// the mirror itself.
#[derive(Debug)]
enum Mirror {
    Live(TaskMirror),
    Compacted { status: Status, version: i64 },
}

/// What the checker knows of a key while its record lives: the first task
/// created under it and the first other one, if any. Two are enough: the
/// check asks for a task other than the one the record names, and the
/// first such task in creation order is always one of these two.
#[derive(Debug, Default)]
struct KeyLife {
    first: Option<TaskId>,
    first_other: Option<TaskId>,
    recorded: bool,
}

impl KeyLife {
    fn created(&mut self, task: TaskId) {
        match self.first {
            None => self.first = Some(task),
            Some(first) if first != task && self.first_other.is_none() => {
                self.first_other = Some(task);
            }
            Some(_) => {}
        }
    }

    /// The first task created under the key that is not `named`.
    fn other_than(&self, named: Option<TaskId>) -> Option<TaskId> {
        [self.first, self.first_other]
            .into_iter()
            .flatten()
            .find(|task| Some(*task) != named)
    }
}

/// How the worker found a delivery when it registered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeliveryClass {
    /// Its message id has an inbox row with another hash.
    Conflicting,
    /// Same id and hash as a final row: must be answered with this result.
    DuplicateOf(Option<ProcessResult>),
    Fresh,
}

/// The checker's copy of an inbox row: payload hash, state, result.
type InboxCopy = (Sha, InboxState, Option<ProcessResult>);

/// The class of each delivery registered and not yet answered, sorted by
/// delivery id. Ids are a counter and only a few deliveries are open at a
/// time, so a new one lands at the end and a search is a few comparisons
/// in one small block instead of a walk down map nodes.
#[derive(Debug, Default)]
struct OpenDeliveries {
    open: Vec<(u64, DeliveryClass)>,
}

impl OpenDeliveries {
    fn find(&self, delivery: u64) -> Result<usize, usize> {
        self.open.binary_search_by_key(&delivery, |(id, _)| *id)
    }

    fn get(&self, delivery: u64) -> Option<DeliveryClass> {
        self.find(delivery).ok().map(|at| self.open[at].1)
    }

    fn insert(&mut self, delivery: u64, class: DeliveryClass) {
        match self.find(delivery) {
            Ok(at) => self.open[at].1 = class,
            Err(at) => self.open.insert(at, (delivery, class)),
        }
    }

    fn remove(&mut self, delivery: u64) {
        if let Ok(at) = self.find(delivery) {
            self.open.remove(at);
        }
    }
}

#[derive(Debug, Default)]
pub struct Checker {
    tasks: Vec<Mirror>,
    /// Event ids that do not name their own task, by the task they went to.
    event_ids: BTreeMap<Text, TaskId>,
    /// By message id, like the database's inbox; a copy leaves when its
    /// task is compacted.
    inbox: IdTable<OutboxId, InboxCopy>,
    deliveries: OpenDeliveries,
    /// Per key: what `KeyLife` keeps of the tasks created under it since
    /// its last record ended, and whether a record for it has been seen
    /// alive. A record that lived and
    /// is gone ends the key's epoch and its entry: memory follows live keys.
    /// Hashed by the key's fingerprint (`KeyMap`).
    keys: KeyMap<KeyOf, KeyLife>,
    accepted_creates: u64,
    /// Counts `check_step` calls; see `TaskMirror::synced`.
    round: u64,
    /// The idempotency records read this round, by key: an API step
    /// touches a key and answers an intent of the same key, and both checks
    /// read its record, which cannot change within the round.
    records: Vec<(Text, Option<RecordView>)>,
}

/// What the checks read of an idempotency record.
#[derive(Clone, Copy, Debug)]
struct RecordView {
    fingerprint: Sha,
    committed_ms: u64,
    answer: Answer,
}

impl Checker {
    /// A compacted task's history is gone: keep what judges it from now on
    /// (its status and version).
    pub fn forget_history(&mut self, task: TaskId) {
        if let Some(mirror) = self.tasks.get_mut(task.slot())
            && let Mirror::Live(live) = mirror
        {
            let replay = live.replay();
            *mirror = Mirror::Compacted {
                status: replay.status,
                version: replay.version,
            };
        }
    }

    /// The state `task` had at `version`, once its history checks (`None`
    /// when it does not, or when that version is not known: a compacted
    /// task keeps only its current state).
    fn state_at<'a>(
        &'a mut self,
        db: &'a Db,
        policy: Policy,
        task: TaskId,
        version: i64,
    ) -> Option<&'a TaskState> {
        self.sync_task(db, policy, task).ok()?;
        let row = db.task(task);
        if row.state.version == version {
            return Some(&row.state);
        }
        let Mirror::Live(mirror) = &self.tasks[task.slot()] else {
            return None;
        };
        usize::try_from(version)
            .ok()
            .and_then(|v| mirror.history.get(v))
    }

    /// A worker crashed holding `delivery`: it will never be answered (the
    /// broker hands the message out again under a new delivery id), so its
    /// class goes, or every crash would leave one behind for good.
    pub fn forget_delivery(&mut self, delivery: u64) {
        self.deliveries.remove(delivery);
    }

    /// Deliveries registered and not yet answered.
    pub fn open_deliveries(&self) -> usize {
        self.deliveries.open.len()
    }

    pub fn forget_message(&mut self, message: OutboxId) {
        self.inbox.discard(message);
    }

    /// terminal-never-reopens, event-id-unique, version-step-one,
    /// replay-matches-state: the task's event history against its row.
    /// Brings the mirror up to date when the history checks.
    fn sync_task(&mut self, db: &Db, policy: Policy, task: TaskId) -> Result<(), Fired> {
        let Checker {
            tasks,
            event_ids,
            round,
            ..
        } = self;
        let mirror = match mirror_in(tasks, db, task) {
            Mirror::Compacted { status, version } => {
                return check_compacted(db, task, *status, *version);
            }
            Mirror::Live(live) => live,
        };
        if mirror.synced == *round {
            return Ok(());
        }
        let row = db.task(task);
        let seen = mirror.events();
        let (was, was_version) = (mirror.replay().status, mirror.replay().version);
        if was.is_terminal() && row.state.status != was {
            return Err(reopened(task, was, row.state.status));
        }
        let fresh = &row.events[seen..];
        // Nothing appended: the row must still be the fold of its events.
        if fresh.is_empty() {
            if row.state.version != was_version {
                return Err(Fired {
                    invariant: "version-step-one",
                    message: format!(
                        "{task} went from v{was_version} to v{} with no new event",
                        row.state.version
                    ),
                    entities: vec![task.to_string()],
                });
            }
            if row.state != *mirror.replay() {
                return Err(Fired {
                    invariant: "replay-matches-state",
                    message: format!(
                        "{task}'s state row changed at v{} without an event",
                        row.state.version
                    ),
                    entities: vec![task.to_string()],
                });
            }
            mirror.synced = *round;
            return Ok(());
        }
        // Whether some fresh id does not name its own task (none do in a
        // run without outside appends): only then is the map updated below.
        let mut any_foreign = false;
        for (offset, stored) in fresh.iter().enumerate() {
            let event = &stored.event;
            let (head, colon) = head_of(&event.event_id);
            let own = names(head, task);
            any_foreign |= !(colon && own);
            let earlier = &row.events[..seen + offset];
            let clash = earlier
                .iter()
                .any(|e| e.event.sequence == event.sequence || e.event.event_id == event.event_id)
                || foreign_id_taken(event_ids, db, task, &event.event_id, head, own);
            if clash {
                return Err(Fired {
                    invariant: "event-id-unique",
                    message: format!(
                        "{task} has two events at sequence {} or under id {}",
                        event.sequence, event.event_id
                    ),
                    entities: vec![task.to_string(), event.event_id.to_string()],
                });
            }
        }
        let added = fresh.len() as i64;
        let expected_version = fresh.last().map_or(was_version, |s| s.event.sequence);
        if row.state.version - was_version != added || row.state.version != expected_version {
            return Err(Fired {
                invariant: "version-step-one",
                message: format!(
                    "{task} went from v{was_version} to v{} with {added} new event(s)",
                    row.state.version
                ),
                entities: vec![task.to_string()],
            });
        }
        // The fold goes straight into the history; a check that fails takes
        // it back out, so a failed check leaves the mirror as it was.
        let history = &mut mirror.history;
        let start = history.len();
        for stored in fresh {
            let replay = history.last().expect("starts with the initial state");
            match transition(replay, &stored.event, policy) {
                Transition::Accepted { next, .. } => history.push(next),
                Transition::Rejected { reason } => {
                    history.truncate(start);
                    return Err(Fired {
                        invariant: "replay-matches-state",
                        message: format!(
                            "replaying {task} stops at {}: {}",
                            stored.event.event_id,
                            reason.as_str()
                        ),
                        entities: vec![task.to_string(), stored.event.event_id.to_string()],
                    });
                }
            }
        }
        if *mirror.replay() != row.state {
            mirror.history.truncate(start);
            return Err(Fired {
                invariant: "replay-matches-state",
                message: format!(
                    "folding {task}'s events does not give its state row at v{}",
                    row.state.version
                ),
                entities: vec![task.to_string()],
            });
        }
        // Ids that do not name their own task are checked across tasks.
        if any_foreign {
            for stored in fresh {
                if !owns_id(&stored.event.event_id, task) {
                    event_ids.insert(stored.event.event_id.clone(), task);
                }
            }
        }
        mirror.synced = *round;
        Ok(())
    }
}

/// The mirror of `task` in `tasks`, made (with those of the tasks before
/// it) on first sight.
fn mirror_in<'a>(tasks: &'a mut Vec<Mirror>, db: &Db, task: TaskId) -> &'a mut Mirror {
    while tasks.len() <= task.slot() {
        let id = TaskId(tasks.len() as u32 + 1);
        let mut history = Vec::with_capacity(3);
        history.push(initial_state(db.task(id).state.task_id.clone()));
        tasks.push(Mirror::Live(TaskMirror { synced: 0, history }));
    }
    &mut tasks[task.slot()]
}

/// A terminal task whose status changed.
fn reopened(task: TaskId, was: Status, now: Status) -> Fired {
    Fired {
        invariant: "terminal-never-reopens",
        message: format!("{task} was {} and is now {}", was.as_str(), now.as_str()),
        entities: vec![task.to_string()],
    }
}

/// A compacted task can only stay as it was: same status, same version, no
/// history.
fn check_compacted(db: &Db, task: TaskId, status: Status, version: i64) -> Result<(), Fired> {
    let row = db.task(task);
    if row.state.status != status {
        return Err(reopened(task, status, row.state.status));
    }
    if row.state.version != version || !row.events.is_empty() {
        return Err(Fired {
            invariant: "version-step-one",
            message: format!(
                "compacted {task} moved from v{version} to v{}",
                row.state.version
            ),
            entities: vec![task.to_string()],
        });
    }
    Ok(())
}

/// Whether `id`, appended to `task`, is already some event's id elsewhere:
/// in the map of ids that do not name their task, or, for an id that names
/// another task, among that task's events. `head` is `head_of(id).0` and
/// `own` whether it names `task`.
fn foreign_id_taken(
    event_ids: &BTreeMap<Text, TaskId>,
    db: &Db,
    task: TaskId,
    id: &Text,
    head: &str,
    own: bool,
) -> bool {
    if event_ids.get(id).is_some_and(|owner| *owner != task) {
        return true;
    }
    if own {
        return false;
    }
    match TaskId::parse(head) {
        Some(owner) if owner != task => db
            .find_task(owner)
            .is_some_and(|row| row.events.iter().any(|e| e.event.event_id == *id)),
        _ => false,
    }
}

/// Whether `head` is `task`'s id as `TaskId::parse` reads it: `task-N`
/// with N as `decimal` renders it (no leading zeros), so a comparison
/// with the rendering decides it without parsing.
fn names(head: &str, task: TaskId) -> bool {
    let mut digits = [0u8; 20];
    head.strip_prefix("task-") == Some(crate::task::json::decimal(&mut digits, u64::from(task.0)))
}

struct Fired {
    invariant: &'static str,
    message: String,
    entities: Vec<String>,
}

/// Whether an event id has the `<task>:` form of its own task; such ids
/// cannot collide with another task's, so only the task's own events are
/// checked for them.
fn owns_id(id: &str, task: TaskId) -> bool {
    let (head, colon) = head_of(id);
    colon && names(head, task)
}

/// An event id's part before its first `:` (all of it if it has none), and
/// whether it has one: `split(':').next()` without the general searcher.
fn head_of(id: &str) -> (&str, bool) {
    match id.bytes().position(|byte| byte == b':') {
        Some(colon) => (&id[..colon], true),
        None => (id, false),
    }
}

impl World {
    /// Runs the incremental checks as if the last step had touched
    /// `touched`, and returns the violation they find. For tests that break
    /// the state by hand and expect an invariant's id.
    pub fn check_as_touched(&mut self, touched: crate::world::Touched) -> Option<Violation> {
        self.violation = None;
        self.touched = touched;
        self.check_step();
        self.violation.take()
    }

    /// Runs the checks for everything the step touched.
    pub(crate) fn check_step(&mut self) {
        // About one step in five (a wake that only moves time, a broker
        // tick) touches nothing: no check to run, nothing to count.
        if self.touched.is_empty() {
            return;
        }
        self.checker.round += 1;
        self.checker.records.clear();
        let mut fired: Option<Fired> = None;
        let mut checks = 0u64;
        macro_rules! check {
            ($result:expr) => {{
                checks += 1;
                if fired.is_none() {
                    if let Err(found) = $result {
                        fired = Some(found);
                    }
                }
            }};
        }
        // The checks need `&mut self`, so each list is read by index (the
        // items are `Copy`) instead of moving the whole `Touched` out and
        // back every step; only the key list, whose items are shared text,
        // is taken out for the loop.
        macro_rules! check_each {
            ($list:ident, |$item:pat_param| $check:expr) => {
                for index in 0..self.touched.$list.len() {
                    let $item = self.touched.$list[index];
                    check!($check);
                }
            };
        }
        check_each!(created, |task| self.check_created(task));
        for index in 0..self.touched.created.len() {
            let key = self.db.task(self.touched.created[index]).key.clone();
            self.touched.keys.push(key);
        }
        if !self.touched.keys.is_empty() {
            let mut keys = std::mem::take(&mut self.touched.keys);
            keys.sort();
            keys.dedup();
            for key in &keys {
                check!(self.check_key(key));
            }
            self.touched.keys = keys;
        }
        check_each!(answers, |(intent, answer, at)| self
            .check_answer(intent, answer, at));
        let touched = &mut self.touched;
        if !touched.tokens.is_empty() {
            touched
                .tasks
                .extend(touched.tokens.iter().map(|token| token.task));
        }
        if touched.tasks.len() > 1 {
            touched.tasks.sort();
            touched.tasks.dedup();
        }
        check_each!(tasks, |task| self.check_task_events(task));
        check_each!(tokens, |token| self.check_token(token));
        check_each!(tasks, |task| self.check_artifacts(task));
        check_each!(cache, |task| self.check_cache(task));
        // A task listed again is counted again but judged once: nothing
        // the check reads changes in between, so it would find the same.
        for index in 0..self.touched.projection.len() {
            let task = self.touched.projection[index];
            if self.touched.projection[..index].contains(&task) {
                checks += 1;
            } else {
                check!(self.check_projection(task));
            }
        }
        check_each!(deliveries, |touch| self.check_delivery(&touch));
        check_each!(delivered, |(entry, count)| self
            .check_delivered(entry, count));
        check_each!(entries, |entry| self.check_entry(entry));
        // The copy of an inbox row follows every write of what it holds
        // (the worker lists the row when it registers or finalizes it), after
        // the checks: a conflicting delivery is judged against the row as
        // the last writing step left it.
        for index in 0..self.touched.inbox.len() {
            self.mirror_inbox(self.touched.inbox[index]);
        }
        self.counters.invariant_checks += checks;
        if let Some(found) = fired {
            let record = self.trace.last().expect("a step was just recorded");
            self.violation = Some(Violation {
                invariant: found.invariant,
                step: record.step,
                time_ms: record.time_ms,
                message: found.message,
                entities: found.entities,
            });
        }
    }

    fn check_created(&mut self, task: TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        let replay = row.replay_of.is_some();
        mirror_in(&mut self.checker.tasks, &self.db, task);
        let key = KeyOf::new(&row.key);
        self.checker.keys.get_or_default(key).created(task);
        if !replay {
            self.checker.accepted_creates += 1;
            if self.checker.accepted_creates > self.db.quota_total {
                return Err(Fired {
                    invariant: "quota-never-oversold",
                    message: format!(
                        "{} creates accepted with a quota of {}",
                        self.checker.accepted_creates, self.db.quota_total
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        Ok(())
    }

    fn check_answer(
        &mut self,
        intent: crate::world::engine::ids::IntentId,
        answer: Answer,
        at: u64,
    ) -> Result<(), Fired> {
        let Some(record) = self.intents.get(intent) else {
            return Ok(());
        };
        let (key, fingerprint, first) = (record.key.clone(), record.fingerprint, record.first);
        if let Answer::Accepted(task) = answer {
            let row = self.db.task(task);
            if row.fingerprint != fingerprint {
                return Err(Fired {
                    invariant: "key-bound-to-fingerprint",
                    message: format!(
                        "key {} answered a request with fingerprint {} using {task}, created for fingerprint {}",
                        key,
                        &hex(&fingerprint)[..16],
                        &hex(&row.fingerprint)[..16]
                    ),
                    entities: vec![key.to_string(), task.to_string(), intent.to_string()],
                });
            }
        }
        // The key's live record, read once: its fingerprint and commit time.
        let live = self
            .record(&key)
            .map(|live| (live.fingerprint, live.committed_ms));
        let reused = live.is_some_and(|(bound, _)| bound != fingerprint);
        if reused && answer != Answer::Refused("IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST") {
            return Err(Fired {
                invariant: "key-bound-to-fingerprint",
                message: format!(
                    "key {} is bound to another fingerprint but answered {intent} with {}",
                    key,
                    describe(answer)
                ),
                entities: vec![key.to_string(), intent.to_string()],
            });
        }
        match first {
            None => {
                let committed = live.map_or(at, |(_, committed_ms)| committed_ms);
                let intent_row = self.intents.get_mut(intent).expect("read above");
                intent_row.first = Some(crate::world::truth::intents::IntentAnswer {
                    answer,
                    deadline_ms: committed + self.config.idempotency_ttl_ms,
                });
                Ok(())
            }
            Some(first) if at < first.deadline_ms && first.answer != answer => Err(Fired {
                invariant: "one-task-per-intent",
                message: format!(
                    "{intent} (key {}) first got {} and then {}",
                    key,
                    describe(first.answer),
                    describe(answer)
                ),
                entities: vec![intent.to_string(), key.to_string()],
            }),
            Some(_) => Ok(()),
        }
    }

    /// The live idempotency record of `key`, searched once per round.
    fn record(&mut self, key: &Text) -> Option<RecordView> {
        if let Some((_, view)) = self.checker.records.iter().find(|(read, _)| read == key) {
            return *view;
        }
        let view = self.db.record(key).map(|record| RecordView {
            fingerprint: record.fingerprint,
            committed_ms: record.committed_ms,
            answer: record.answer,
        });
        self.checker.records.push((key.clone(), view));
        view
    }

    fn check_key(&mut self, key: &Text) -> Result<(), Fired> {
        let Some(record) = self.record(key) else {
            // A record that lived and is gone opens a new epoch: a task
            // created under the key from now on is a new intent's.
            let key = KeyOf::new(key);
            if self
                .checker
                .keys
                .get(&key)
                .is_some_and(|life| life.recorded)
            {
                self.checker.keys.remove(&key);
            }
            return Ok(());
        };
        let named = match record.answer {
            Answer::Accepted(task) => Some(task),
            Answer::Refused(_) => None,
        };
        let life = self.checker.keys.get_or_default(KeyOf::new(key));
        life.recorded = true;
        let other = life.other_than(named);
        if let Some(other) = other {
            return Err(Fired {
                invariant: "one-task-per-key",
                message: format!(
                    "key {key} names {} but {other} was also created under it while it lived",
                    named.map_or("a refusal".to_string(), |t| t.to_string())
                ),
                entities: vec![key.to_string(), other.to_string()],
            });
        }
        Ok(())
    }

    fn check_task_events(&mut self, task: TaskId) -> Result<(), Fired> {
        self.checker
            .sync_task(&self.db, self.config.cancel_policy, task)
    }

    fn check_token(&mut self, token: Token) -> Result<(), Fired> {
        let Some(object) = self.store.get(token) else {
            return Ok(());
        };
        if object.versions.len() > 1 {
            return Err(Fired {
                invariant: "one-artifact-per-token",
                message: format!(
                    "token {token} holds {} written versions",
                    object.versions.len()
                ),
                entities: vec![token.to_string(), token.task.to_string()],
            });
        }
        Ok(())
    }

    /// completed-has-verified-artifact, one-visible-artifact-per-task,
    /// no-visible-corrupt-artifact.
    fn check_artifacts(&mut self, task: TaskId) -> Result<(), Fired> {
        if !self.db.task(task).state.status.is_terminal() {
            return Ok(());
        }
        let (sha, size) = self.expected_artifact(task);
        let state = &self.db.task(task).state;
        let store = &self.store;
        let completed_status = state.status == Status::Completed;
        let attempt = state.attempt as u32;
        // The checker's own reading of a good artifact, independent of the
        // worker's `artifact_is_good`, which it checks.
        let good = |token: Token, version: Option<&crate::world::stores::store::Version>| -> bool {
            version.is_some_and(|version| {
                version.bytes_sha256 == sha
                    && version.size == size
                    && version.metadata.task == task
                    && version.metadata.attempt == token.attempt
                    && version.metadata.size == size
                    && version.metadata.sha256 == sha
            })
        };
        // One pass over the task's tokens, one store search each: what the
        // three checks below need of the visible ones, in token order.
        let mut visible = 0usize;
        let mut completed = None;
        let mut corrupt = None;
        let mut stray = false;
        for &token in store.tokens_of(task) {
            let Some(object) = store.get(token).filter(|o| o.visible()) else {
                continue;
            };
            visible += 1;
            let current = object.current();
            if completed.is_none() && token.attempt == attempt && token.kind == EffectKind::Artifact
            {
                completed = Some((token, current));
            }
            if corrupt.is_none() && !good(token, current) {
                corrupt = Some(token);
            }
            stray |= !(completed_status && token.attempt == attempt && token.generation == 0);
        }
        if completed_status {
            let ok = completed.is_some_and(|(token, current)| {
                good(token, current)
                    && current.is_some_and(|v| {
                        state
                            .artifact_sha256
                            .as_deref()
                            .is_some_and(|text| crate::hash::hex_is(text, &v.bytes_sha256))
                    })
            });
            if !ok {
                return Err(Fired {
                    invariant: "completed-has-verified-artifact",
                    message: format!(
                        "{task} is completed (attempt {attempt}) but its artifact is missing, hidden or does not verify"
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        if let Some(token) = corrupt {
            return Err(Fired {
                invariant: "no-visible-corrupt-artifact",
                message: format!(
                    "{task} is {} and its artifact {token} fails verification but is visible",
                    state.status.as_str()
                ),
                entities: vec![task.to_string(), token.to_string()],
            });
        }
        let allowed = usize::from(completed_status);
        if visible > allowed || stray {
            let visible: Vec<Token> = store
                .tokens_of(task)
                .iter()
                .copied()
                .filter(|token| store.get(*token).is_some_and(|o| o.visible()))
                .collect();
            return Err(Fired {
                invariant: "one-visible-artifact-per-task",
                message: format!(
                    "{task} is {} with {} visible artifact(s): {}",
                    state.status.as_str(),
                    visible.len(),
                    visible
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                entities: std::iter::once(task.to_string())
                    .chain(visible.iter().map(|t| t.to_string()))
                    .collect(),
            });
        }
        Ok(())
    }

    fn check_cache(&mut self, task: TaskId) -> Result<(), Fired> {
        let Some(crate::world::stores::cache::CacheEntry::View { status, version }) =
            self.cache.get(task)
        else {
            return Ok(());
        };
        let current = self.db.task(task).state.version;
        let real = self
            .checker
            .state_at(&self.db, self.config.cancel_policy, task, version)
            .map(|state| state.status);
        if version > current || real != Some(status) {
            return Err(Fired {
                invariant: "cache-never-ahead",
                message: format!(
                    "the cache shows {task} {}/v{version}, which the database never committed (it is at v{current})",
                    status.as_str()
                ),
                entities: vec![
                    task.to_string(),
                    crate::world::stores::cache::cache_key(task),
                ],
            });
        }
        Ok(())
    }

    fn check_projection(&mut self, task: TaskId) -> Result<(), Fired> {
        let Some(model) = self.projector.models.get(task) else {
            return Ok(());
        };
        let model = &model.state;
        let had = self
            .checker
            .state_at(&self.db, self.config.cancel_policy, task, model.version);
        if had != Some(model) {
            return Err(Fired {
                invariant: "projection-consistent",
                message: format!(
                    "the projector's model of {task} at v{} ({}, attempt {}) is not a state the task had",
                    model.version,
                    model.status.as_str(),
                    model.attempt
                ),
                entities: vec![task.to_string()],
            });
        }
        Ok(())
    }

    fn check_delivery(
        &mut self,
        touch: &crate::world::actors::worker::DeliveryTouch,
    ) -> Result<(), Fired> {
        let message = touch.message;
        let class = if touch.act == DeliveryAct::Register {
            let class = match self.checker.inbox.get(message) {
                Some((hash, _, _)) if *hash != touch.payload_sha256 => DeliveryClass::Conflicting,
                Some((_, state, result)) if state.is_final() => DeliveryClass::DuplicateOf(*result),
                _ => DeliveryClass::Fresh,
            };
            self.checker.deliveries.insert(touch.delivery, class);
            class
        } else {
            self.checker
                .deliveries
                .get(touch.delivery)
                .unwrap_or(DeliveryClass::Fresh)
        };
        // Every act of a conflicting delivery, its register included, must
        // leave the first payload's row as the copy taken after the last
        // step that wrote it.
        if class == DeliveryClass::Conflicting {
            let before = self.checker.inbox.get(message).copied();
            let after = self
                .db
                .inbox
                .get(message)
                .map(|row| (row.payload_sha256, row.state, row.result));
            if before.is_some() && before != after {
                return Err(Fired {
                    invariant: "inbox-conflict-quarantined",
                    message: format!(
                        "a conflicting delivery of {message} changed the inbox row of the first payload"
                    ),
                    entities: vec![message.to_string()],
                });
            }
        }
        if matches!(
            touch.act,
            DeliveryAct::Ack(_) | DeliveryAct::Nack | DeliveryAct::Quarantine | DeliveryAct::Drop
        ) {
            self.checker.deliveries.remove(touch.delivery);
        }
        match (class, touch.act) {
            (DeliveryClass::Conflicting, DeliveryAct::Work | DeliveryAct::Ack(_)) => Err(Fired {
                invariant: "inbox-conflict-quarantined",
                message: format!(
                    "a delivery of {message} with a payload hash other than its inbox row's was {}",
                    if touch.act == DeliveryAct::Work {
                        "processed"
                    } else {
                        "acked as a duplicate"
                    }
                ),
                entities: vec![message.to_string()],
            }),
            (DeliveryClass::DuplicateOf(result), DeliveryAct::Ack(answer)) if answer != result => {
                Err(Fired {
                    invariant: "duplicate-acked-with-first-result",
                    message: format!(
                        "a duplicate of {message} was acked with {} instead of the recorded {}",
                        answer.map_or("nothing", |r| r.as_str()),
                        result.map_or("nothing", |r| r.as_str())
                    ),
                    entities: vec![message.to_string()],
                })
            }
            (DeliveryClass::DuplicateOf(_), DeliveryAct::Work | DeliveryAct::Nack) => Err(Fired {
                invariant: "duplicate-acked-with-first-result",
                message: format!(
                    "a duplicate of {message} (inbox row final) was processed again instead of answered"
                ),
                entities: vec![message.to_string()],
            }),
            _ => Ok(()),
        }
    }

    /// Keeps the checker's copy of an inbox row (payload hash, state,
    /// result), after every step that wrote it; a conflicting delivery
    /// must leave the first hash's row as it was.
    fn mirror_inbox(&mut self, message: OutboxId) {
        if let Some(row) = self.db.inbox.get(message) {
            self.checker
                .inbox
                .insert(message, (row.payload_sha256, row.state, row.result));
        }
    }

    fn check_delivered(
        &mut self,
        entry: crate::world::engine::ids::EntryId,
        count: u32,
    ) -> Result<(), Fired> {
        if u64::from(count) > self.config.delivery_attempts_max {
            return Err(Fired {
                invariant: "bounded-deliveries",
                message: format!(
                    "{entry} was delivered {count} times (delivery_attempts_max = {})",
                    self.config.delivery_attempts_max
                ),
                entities: vec![entry.to_string()],
            });
        }
        Ok(())
    }

    fn check_entry(&mut self, entry: crate::world::engine::ids::EntryId) -> Result<(), Fired> {
        let Some(live) = self.broker.entries.get(entry) else {
            return Ok(());
        };
        let row = self.db.find_outbox(live.message);
        let committed = row
            .is_some_and(|row| row.id == live.message && row.payload_sha256 == live.payload_sha256);
        if !committed {
            return Err(Fired {
                invariant: "no-orphan-message",
                message: format!(
                    "{entry} in {} carries message id {} with no committed outbox row of that id and payload",
                    live.topic.as_str(),
                    live.message
                ),
                entities: vec![
                    entry.to_string(),
                    live.message.to_string(),
                    live.task.to_string(),
                ],
            });
        }
        Ok(())
    }

    /// `converges`, judged at quiescence: what did not converge, if anything.
    pub fn convergence_failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for row in &self.db.tasks {
            let reviewed = self.db.in_review(row.id);
            if !row.state.status.is_terminal() && !reviewed {
                failures.push(format!(
                    "{} is {} and not in manual review",
                    row.id,
                    row.state.status.as_str()
                ));
            }
            if !reviewed {
                for ledger in &row.effects {
                    if matches!(
                        ledger.state,
                        crate::world::stores::db::EffectState::Unknown
                            | crate::world::stores::db::EffectState::Started
                    ) {
                        failures.push(format!(
                            "effect {} is {}",
                            ledger.token,
                            ledger.state.as_str()
                        ));
                    }
                }
            }
        }
        for row in self.db.outbox_rows() {
            if row.published_ms.is_none() {
                failures.push(format!("{} is not published", row.id));
            }
        }
        for entry in self.broker.entries.values() {
            failures.push(format!(
                "{} ({}, {}) is still in {}",
                entry.id,
                entry.message,
                entry.task,
                entry.topic.as_str()
            ));
        }
        for letter in &self.broker.dead_letters {
            if letter.error_code.is_empty() || letter.attempts == 0 {
                failures.push(format!("{} lost its error code or attempts", letter.id));
            }
        }
        for (task, model) in self.projector.models.iter() {
            let state = &self.db.task(task).state;
            if model.state != *state {
                failures.push(format!(
                    "the projector's model of {task} is {}/v{} but the task is {}/v{}",
                    model.state.status.as_str(),
                    model.state.version,
                    state.status.as_str(),
                    state.version
                ));
            }
        }
        for (task, entry) in self.cache.entries.iter() {
            if let crate::world::stores::cache::CacheEntry::View { status, version } = entry {
                let state = &self.db.task(task).state;
                if state.version != *version || state.status != *status {
                    failures.push(format!(
                        "the cache shows {task} {}/v{version} but it is {}/v{}",
                        status.as_str(),
                        state.status.as_str(),
                        state.version
                    ));
                }
            }
        }
        failures
    }
}

fn describe(answer: Answer) -> String {
    match answer {
        Answer::Accepted(task) => task.to_string(),
        Answer::Refused(code) => code.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tasks answer what the whole creation list would: the first task
    /// created under a key that is not the named one.
    #[test]
    fn a_key_life_names_the_first_other_task_as_the_full_list_would() {
        let ids = [1, 2, 3];
        for length in 0..5u32 {
            for code in 0..3u32.pow(length) {
                let created: Vec<TaskId> = (0..length)
                    .map(|i| TaskId(ids[(code / 3u32.pow(i) % 3) as usize]))
                    .collect();
                let mut life = KeyLife::default();
                for task in &created {
                    life.created(*task);
                }
                for named in [None, Some(TaskId(1)), Some(TaskId(2)), Some(TaskId(3))] {
                    let expected = created.iter().copied().find(|task| Some(*task) != named);
                    assert_eq!(life.other_than(named), expected, "{created:?} {named:?}");
                }
            }
        }
    }
}
