//! The checker's memory between steps: a mirror of each task's history,
//! the inbox rows and keys it has seen, the deliveries still open. Plain
//! data the world keeps as ground truth; the checks that read and update it
//! are in `checker/checks.rs`, and `converges` in `checker/converges.rs`.

use crate::hash::Sha;
use crate::task::{Policy, Status, TaskState, Text, Transition, initial_state, transition};
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::{ActorId, KeyOf, OutboxId, TaskId};
use crate::world::engine::keymap::KeyMap;
use crate::world::engine::table::IdTable;
use crate::world::stores::db::{Answer, Db, InboxState, ProcessResult};
use crate::world::stores::store::Observed;
use std::collections::BTreeMap;

mod budgets;
pub(crate) mod call_about;
mod checks;
mod converges;
mod decisions;
mod leases;
mod ledger;
mod lifecycle;
mod mismatch;
mod retention;
mod snapshots;
mod told;
mod transform;
mod uncommitted;
mod vocabulary;

/// What the checker remembers of one task between steps. Its status and
/// version are its replay's, and the events it has seen are one per entry
/// of its history after the first. It hashes (for the model checker's
/// identity) as its history alone: see `Checker::identity` for why the
/// rest is left out.
#[derive(Clone, Debug)]
struct TaskMirror {
    /// The check round (`Checker::round`) in which the task's history last
    /// checked clean: within one round nothing changes the database, so a
    /// second look (projection, cache) would find the same and is skipped.
    synced: u64,
    /// Every state the task had, by version: the initial state, then the
    /// fold of the events seen so far (true transition, no mutant). Its
    /// last entry is the replay the state row must equal.
    history: Vec<TaskState>,
    /// The ledger rows of the task the checker saw settled, with the
    /// outcome it saw last (`effect-outcome-final`); empty, and no
    /// allocation, until the first outcome.
    settled: Vec<(
        crate::world::stores::db::Token,
        crate::world::stores::db::EffectState,
    )>,
}

impl std::hash::Hash for TaskMirror {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.history.hash(state);
    }
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
#[derive(Clone, Debug, Hash)]
enum Mirror {
    Live(TaskMirror),
    Compacted { status: Status, version: i64 },
}

/// What the checker knows of a key while its record lives: the first task
/// created under it and the first other one, if any. Two are enough: the
/// check asks for a task other than the one the record names, and the
/// first such task in creation order is always one of these two.
#[derive(Clone, Debug, Default, Hash)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum DeliveryClass {
    /// Its message id has an inbox row with another hash.
    Conflicting,
    /// Same id and hash as a final row: must be answered with this result.
    DuplicateOf(Option<ProcessResult>),
    Fresh,
}

/// The checker's copy of an inbox row: payload hash, state, result, and
/// when it turned final (a final row is never written again, even with the
/// same result: the write is the guard skipped).
type InboxCopy = (Sha, InboxState, Option<ProcessResult>, Option<u64>);

/// The class of each delivery registered and not yet answered, sorted by
/// delivery id. Ids are a counter and only a few deliveries are open at a
/// time, so a new one lands at the end and a search is a few comparisons
/// in one small block instead of a walk down map nodes.
#[derive(Clone, Debug, Default, Hash)]
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

#[derive(Clone, Debug, Default)]
pub struct Checker {
    tasks: CowTable<Vec<Mirror>>,
    /// Event ids that do not name their own task, by the task they went to.
    event_ids: CowTable<BTreeMap<Text, TaskId>>,
    /// By message id, like the database's inbox; a copy leaves when its
    /// task is compacted.
    inbox: CowTable<IdTable<OutboxId, InboxCopy>>,
    deliveries: CowTable<OpenDeliveries>,
    /// Per key: what `KeyLife` keeps of the tasks created under it since
    /// its last record ended, and whether a record for it has been seen
    /// alive. A record that lived and
    /// is gone ends the key's epoch and its entry: memory follows live keys.
    /// Hashed by the key's fingerprint (`KeyMap`).
    keys: CowTable<KeyMap<KeyOf, KeyLife>>,
    accepted_creates: u64,
    /// Counts `check_step` calls; see `TaskMirror::synced`.
    round: u64,
    /// The idempotency records read this round, by key: an API step
    /// touches a key and answers an intent of the same key, and both checks
    /// read its record, which cannot change within the round.
    records: Vec<(Text, Option<RecordView>)>,
    /// Tasks compacted this step while unsettled, with why: noted before
    /// their rows were dropped, reported by the step's checks.
    compacted_unsettled: CowTable<Vec<(TaskId, String)>>,
    /// What the store answered for the tokens of tasks compacted this
    /// step, before their objects were archived.
    compacted_objects: CowTable<Vec<(TaskId, crate::world::stores::db::Token, Observed)>>,
    /// How many of the database's snapshot reports have been judged: the
    /// rest were written since the last step. Always the report count
    /// after a step's checks, so it is not part of the identity.
    snapshot_reports_seen: usize,
    /// The (task, version) of every snapshot report judged so far, for the
    /// rebuild check to look up without walking the list.
    reported_snapshots: CowTable<std::collections::BTreeSet<(TaskId, i64)>>,
    /// How many of the database's kept rejections have been judged, in the
    /// same way.
    rejections_seen: usize,
    /// How many items of the manual-review list have been read, and the
    /// tasks among them that wait for a human in a way that stops every
    /// automatic path (`review-stops-automation`). The checker reads the
    /// list itself (it only grows) instead of asking the database's index,
    /// so a wrong lookup in the protocol cannot hide its own effect. Derived
    /// from the list, which is part of the world's identity.
    reviews_seen: usize,
    automation_stopped: CowTable<std::collections::BTreeSet<TaskId>>,
    /// How many committed events the second encoder has rehashed
    /// (`PAYLOADS_REHASHED` a run: the emitter is one function, so its
    /// first events show a fault as well as all of them would).
    payloads_rehashed: usize,
    /// The store calls each worker made in its current delivery and each
    /// fence holder in its current fence, counted from the trace
    /// (`within-budgets`), and the last step counted.
    store_calls: CowTable<BTreeMap<ActorId, budgets::StoreCalls>>,
    store_calls_step: Option<u64>,
    /// The handler version each worker's transform ran under in its
    /// current delivery (`poison-judged-by-its-handler`).
    transforms: CowTable<BTreeMap<ActorId, u64>>,
    /// The sends the checker saw of each pending request (`within-budgets`;
    /// see `World::check_client_send`), forgotten when the request ends.
    /// Request ids are counters and a request ends soon after it is sent:
    /// a window indexed by id, where a map's search for every send was
    /// 1.5% of a swarm campaign's instructions.
    client_sends: CowTable<IdTable<crate::world::engine::ids::RequestId, u32>>,
    /// The durable stores' sizes after the last step
    /// (`uncommitted-writes-nothing`): always the world's own after a
    /// step's checks, so not part of the identity.
    footprint: uncommitted::Footprint,
    /// Tasks created by a dead-letter replay (`dead-letter-replayed-once`):
    /// in a correct run the size of the database's replay map, which is in
    /// the identity, so it is not.
    pub(super) replay_tasks: usize,
}

/// Events whose payload hash the checker recomputes per run.
const PAYLOADS_REHASHED: usize = 64;

/// What the checks read of an idempotency record.
#[derive(Clone, Copy, Debug, Hash)]
struct RecordView {
    fingerprint: Sha,
    committed_ms: u64,
    answer: Answer,
}

impl Checker {
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.tasks.share();
        self.event_ids.share();
        self.inbox.share();
        self.deliveries.share();
        self.keys.share();
        self.compacted_unsettled.share();
        self.compacted_objects.share();
        self.reported_snapshots.share();
        self.automation_stopped.share();
        self.store_calls.share();
        self.transforms.share();
        self.client_sends.share();
    }

    /// The bookkeeping of the checker's copy of the inbox and its count of
    /// each request's sends, each with its name
    /// (`IdTable::bookkeeping_failure`; `converges` asks it).
    pub fn table_failures(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("checker's inbox copy", self.inbox.bookkeeping_failure()),
            (
                "checker's send counts",
                self.client_sends.bookkeeping_failure(),
            ),
        ]
    }

    /// The checker's part of a world's identity (see `World::identity`):
    /// what it remembers of tasks, event ids, inbox rows, open deliveries,
    /// keys, store calls, the handler version of each worker's transform
    /// and the sends of each pending request. Its round counter and
    /// per-round caches are left out: they only spare repeated reads
    /// within one step's checks;
    /// so are the unsettled compactions, noted and reported within one
    /// step; the last step whose store calls were counted, a step number;
    /// and a live mirror's settled ledger outcomes, which after every
    /// step's checks are the ledger's own settled rows (in the identity
    /// already).
    pub fn identity(&self, state: &mut impl std::hash::Hasher) {
        use std::hash::Hash;
        (
            &self.tasks,
            &self.event_ids,
            &self.inbox,
            &self.deliveries,
            &self.keys,
            self.accepted_creates,
            &self.store_calls,
            &self.transforms,
        )
            .hash(state);
        // By content, as a map of the same rows would hash: the window's
        // layout (where it starts, which rows went aside) follows the
        // order sends ended, which two equal states need not share.
        self.client_sends.len().hash(state);
        for sends in self.client_sends.iter() {
            sends.hash(state);
        }
    }

    /// A request ended (answered, or lost with its client): its send count
    /// goes. A give-up is judged by the count, and the check forgets it.
    pub fn forget_request(&mut self, request: crate::world::engine::ids::RequestId) {
        self.client_sends.discard(request);
    }

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
        // Not `discard`, which the database's inbox drops its rows with:
        // `converges` compares the two, and a shared slip would hide.
        self.inbox.remove(message);
    }

    /// terminal-never-reopens, event-id-unique, version-step-one,
    /// replay-matches-state: the task's event history against its row.
    /// Brings the mirror up to date when the history checks.
    fn sync_task(&mut self, db: &Db, policy: Policy, task: TaskId) -> Result<(), Fired> {
        let Checker {
            tasks,
            event_ids,
            round,
            payloads_rehashed,
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
        // A second encoder (serde's, through `lesson_json`) rehashes the
        // run's first events: an emitter that drops a field or writes a
        // value another way hashes every event consistently wrong, which no
        // comparison of two hashes from the one emitter can see.
        // Events from outside producers, whose free text is what needs
        // escaping, are all rehashed.
        // Past the budget, only a step that appended an id not of the
        // task's own form (`any_foreign`, above) has one to rehash.
        let spent = *payloads_rehashed >= PAYLOADS_REHASHED;
        for stored in fresh.iter().filter(|_| !spent || any_foreign) {
            if spent && owns_id(&stored.event.event_id, task) {
                continue;
            }
            *payloads_rehashed += 1;
            let json =
                crate::hash::canonical_json(&crate::lesson_json::event_to_json(&stored.event));
            if crate::hash::sha256(json.as_bytes()) != stored.payload_sha256 {
                return Err(Fired {
                    invariant: "payload-hash-canonical",
                    message: format!(
                        "{task}'s event {} is stored with payloadSha256 {}, but its canonical JSON {json} hashes otherwise",
                        stored.event.event_id,
                        crate::hash::hex(&stored.payload_sha256)
                    ),
                    entities: vec![task.to_string(), stored.event.event_id.to_string()],
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
        if history.capacity() == 1 {
            history.reserve_exact(2);
        }
        let start = history.len();
        for (offset, stored) in fresh.iter().enumerate() {
            let replay = history.last().expect("starts with the initial state");
            // The attempt the store keeps with the event is the one later
            // appends are judged against for a semantic twin: the one the
            // event names, or the task's when it was applied.
            let attempt = told::attempt_named(&stored.event.body).unwrap_or(replay.attempt);
            if stored.attempt != attempt {
                history.truncate(start);
                return Err(Fired {
                    invariant: "semantic-key-unique",
                    message: format!(
                        "{task}'s event {} is kept for attempt {}, but it speaks for attempt {attempt}",
                        stored.event.event_id, stored.attempt
                    ),
                    entities: vec![task.to_string(), stored.event.event_id.to_string()],
                });
            }
            let earlier = &row.events[..seen + offset];
            if let Some(twin) = semantic_twin(earlier, history, &stored.event, replay) {
                let fired = Fired {
                    invariant: "semantic-key-unique",
                    message: format!(
                        "{task} holds {} and {}: both {} for attempt {}{}",
                        twin.event_id,
                        stored.event.event_id,
                        stored.event.event_type().as_str(),
                        attempt,
                        told::signal(&stored.event.body)
                            .map(|signal| format!(" under signal {signal}"))
                            .unwrap_or_default()
                    ),
                    entities: vec![task.to_string(), stored.event.event_id.to_string()],
                };
                history.truncate(start);
                return Err(fired);
            }
            let allowed = lifecycle::lesson_allows(replay, &stored.event, policy);
            let verdict = transition(replay, &stored.event, policy);
            // The table first: an event it refuses is judged illegal
            // whatever the code under test folded it to.
            let landed = match &verdict {
                Transition::Accepted { next, .. } => Some(next),
                Transition::Rejected { .. } => None,
            };
            let illegal = match (allowed, landed) {
                (Err(why), _) => Some(why.to_string()),
                (Ok(row), Some(next)) if (next.status, next.attempt) != row => Some(format!(
                    "it should lead to {} (attempt {}), not {} (attempt {})",
                    row.0.as_str(),
                    row.1,
                    next.status.as_str(),
                    next.attempt
                )),
                (Ok(_), Some(next)) => lifecycle::holder_misfit(next),
                (Ok(_), None) => None,
            };
            if let Some(why) = illegal {
                let from = replay.status.as_str();
                history.truncate(start);
                return Err(Fired {
                    invariant: "lifecycle-legal",
                    message: format!(
                        "{task} holds {} ({}) from {from}: {why}",
                        stored.event.event_id,
                        stored.event.event_type().as_str()
                    ),
                    entities: vec![task.to_string(), stored.event.event_id.to_string()],
                });
            }
            match verdict {
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
        // The initial state alone while the task is queued (a backlog of
        // queued tasks is most of an overloaded run); room for the two
        // states most tasks go through is made at their first event.
        let history = vec![initial_state(db.task(id).state.task_id.clone())];
        tasks.push(Mirror::Live(TaskMirror {
            synced: 0,
            history,
            settled: Vec::new(),
        }));
    }
    &mut tasks[task.slot()]
}

/// The earlier event of `earlier` (whose states before each are
/// `history`) that states the same fact as `event` (applied to `before`):
/// the same type, the same attempt (the one it names, or the task's at the
/// time) and, for a cancellation request, the same signal. The store's
/// semantic dedupe exists so that no task ever holds two; the key is worked
/// out here from the checker's own history, not read from what the store
/// recorded beside each event.
fn semantic_twin<'a>(
    earlier: &'a [crate::world::stores::db::StoredEvent],
    history: &[TaskState],
    event: &crate::task::TaskEvent,
    before: &TaskState,
) -> Option<&'a crate::task::TaskEvent> {
    let key = |event: &crate::task::TaskEvent, before: &TaskState| {
        (
            event.event_type(),
            told::attempt_named(&event.body).unwrap_or(before.attempt),
        )
    };
    let wanted = key(event, before);
    let signal = told::signal(&event.body);
    earlier
        .iter()
        .zip(history)
        .find(|(other, before)| {
            key(&other.event, before) == wanted && told::signal(&other.event.body) == signal
        })
        .map(|(other, _)| &*other.event)
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

/// Whether `head` is `task`'s id as `TaskId::parse` reads it.
fn names(head: &str, task: TaskId) -> bool {
    numbered(head, "task-", u64::from(task.0))
}

/// Whether `text` is `prefix` then `number` as `decimal` renders it (no
/// leading zeros): a comparison with the rendering, no parse and no
/// formatted string.
fn numbered(text: &str, prefix: &str, number: u64) -> bool {
    let mut digits = [0u8; 20];
    text.strip_prefix(prefix) == Some(crate::task::json::decimal(&mut digits, number))
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
