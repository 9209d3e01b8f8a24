//! The database: the lesson's tables (task, idempotency_record, outbox_event,
//! inbox_message, effect_ledger), lesson 003's event and snapshot tables, the
//! quota, attempt leases and the manual-review list. A transaction is one
//! step: it is applied whole at commit or, on `crash-before-commit`, not at
//! all. Unique constraints are enforced by the table layout (one row per key).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::hash::Sha;
use crate::task::{Evidence, TaskEvent, TaskState, Text};
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::{ActorId, DeadLetterId, KeyOf, OutboxId, TaskId};
use crate::world::engine::keymap::KeyMap;
use crate::world::engine::table::{IdTable, SortedDeque};

/// The one idempotency scope of this pipeline.
pub const SCOPE: &str = "document-transform";
/// The worker's consumer name in the inbox.
pub const CONSUMER: &str = "document-worker";
/// Version of the reducer recorded in snapshots.
pub const REDUCER_VERSION: &str = "task-reducer-v1";

/// An input document as the API received it, with what the pipeline derives
/// from it once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Input {
    /// Its canonical JSON (keys sorted), what the hash and the transform read.
    pub canonical: String,
    /// The schema holds: an object with a string `doc`.
    pub valid: bool,
    pub sha256: Sha,
    /// The request fingerprint of a create carrying this input: SHA-256 of
    /// the canonical JSON of the operation and the fields that change the
    /// effect (the input's hash), nothing transient:
    /// `{"inputSha256":"…","operation":"create-document-task"}`, keys
    /// sorted. A function of `sha256` alone, so made once with it: every
    /// create the client issues and every task the checker sees created
    /// asked for it again (four SHA-256 blocks a create).
    pub fingerprint: Sha,
    /// The handler version the transform needs (`legacy-rtf` needs 2).
    pub handler_needed: u64,
}

impl Input {
    /// An input document and what the pipeline derives from it.
    pub fn of(value: &serde_json::Value) -> Arc<Input> {
        let handler_needed = if value.get("format").and_then(|f| f.as_str()) == Some("legacy-rtf") {
            2
        } else {
            1
        };
        let valid = value.get("doc").is_some_and(|doc| doc.is_string());
        Input::canonical(crate::hash::canonical_json(value), valid, handler_needed)
    }

    /// An input whose canonical JSON the caller already wrote (the fuzz
    /// workload, which knows its documents' shape).
    pub fn canonical(canonical: String, valid: bool, handler_needed: u64) -> Arc<Input> {
        let sha256 = crate::hash::sha256(canonical.as_bytes());
        Arc::new(Input {
            canonical,
            valid,
            sha256,
            fingerprint: create_fingerprint(&sha256),
            handler_needed,
        })
    }
}

/// `Input::fingerprint` of an input hashing to `input_sha256`.
fn create_fingerprint(input_sha256: &Sha) -> Sha {
    use sha2::{Digest, Sha256};
    let mut hex = [0u8; 64];
    crate::hash::hex_into(input_sha256, &mut hex);
    let mut hasher = Sha256::new();
    hasher.update(b"{\"inputSha256\":\"");
    hasher.update(hex);
    hasher.update(b"\",\"operation\":\"create-document-task\"}");
    hasher.finalize().into()
}

/// What the API answered a create with; replayed for a repeated key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Answer {
    Accepted(TaskId),
    Refused(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordState {
    Succeeded,
    FailedFinal,
}

impl RecordState {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Succeeded => "succeeded",
            RecordState::FailedFinal => "failed_final",
        }
    }
}

#[derive(Clone, Debug, Hash)]
pub struct IdempotencyRecord {
    pub key: Text,
    pub fingerprint: Sha,
    pub state: RecordState,
    pub answer: Answer,
    pub committed_ms: u64,
    /// When the reconciler first kept the record past its retention for a
    /// task that had ended but was not settled (messages unpublished, an
    /// effect open): how long it has waited sets when it looks again.
    pub kept_since_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Topic {
    TaskWork,
    TaskEvents,
}

impl Topic {
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::TaskWork => "task-work",
            Topic::TaskEvents => "task-events",
        }
    }
}

/// What a `task-work` message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkKind {
    TaskCreated,
    TaskRetry,
    TaskRedrive,
}

impl WorkKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkKind::TaskCreated => "TaskCreated",
            WorkKind::TaskRetry => "TaskRetryScheduled",
            WorkKind::TaskRedrive => "TaskRedriven",
        }
    }
}

/// A message payload, as written in the outbox and carried by the broker.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Payload {
    Work {
        kind: WorkKind,
        task: TaskId,
        attempt: u32,
        input_sha256: Sha,
        not_before_ms: u64,
    },
    /// Shared: the outbox row, broker entries, deliveries and dead letters
    /// carry the same event, so a copy of a payload is a reference count.
    Event(Arc<TaskEvent>),
}

impl Payload {
    /// SHA-256 of the payload's canonical JSON (keys sorted), streamed into
    /// the hasher without building the text.
    pub fn sha256(&self) -> Sha {
        match self {
            Payload::Work {
                kind,
                task,
                attempt,
                input_sha256,
                not_before_ms,
            } => {
                use crate::task::json::decimal;
                use sha2::Digest;
                let mut digits = [0u8; 20];
                let mut hex = [0u8; 64];
                crate::hash::hex_into(input_sha256, &mut hex);
                let mut hasher = sha2::Sha256::new();
                hasher.update(b"{\"attempt\":");
                hasher.update(decimal(&mut digits, u64::from(*attempt)));
                hasher.update(b",\"inputSha256\":\"");
                hasher.update(hex);
                hasher.update(b"\",\"notBeforeMs\":");
                hasher.update(decimal(&mut digits, *not_before_ms));
                hasher.update(b",\"taskId\":\"task-");
                hasher.update(decimal(&mut digits, u64::from(task.0)));
                hasher.update(b"\",\"type\":\"");
                hasher.update(kind.as_str().as_bytes());
                hasher.update(b"\"}");
                hasher.finalize().into()
            }
            Payload::Event(event) => crate::task::json::event_payload_sha256(event),
        }
    }

    /// The copy a `tamper` fault delivers: same message id and task id, a
    /// different body.
    pub fn tampered(&self) -> Payload {
        match self {
            Payload::Work {
                kind,
                task,
                attempt,
                input_sha256,
                not_before_ms,
            } => {
                let mut altered = *input_sha256;
                altered[0] ^= 0xff;
                Payload::Work {
                    kind: *kind,
                    task: *task,
                    attempt: *attempt,
                    input_sha256: altered,
                    not_before_ms: *not_before_ms,
                }
            }
            // Same event id, task and sequence; one field of the body
            // altered, as a buggy or hostile hop would.
            Payload::Event(event) => Payload::Event(Arc::new(event.altered())),
        }
    }
}

#[derive(Clone, Debug, Hash)]
pub struct OutboxRow {
    pub id: OutboxId,
    pub task: TaskId,
    pub topic: Topic,
    pub event_type: &'static str,
    pub aggregate_version: i64,
    pub payload: Payload,
    pub payload_sha256: Sha,
    pub created_ms: u64,
    pub ready_ms: u64,
    pub published_ms: Option<u64>,
    pub publish_attempts: u32,
    pub last_error: Option<&'static str>,
    pub next_retry_ms: u64,
    /// The publisher (and its incarnation) holding the claim, and until when.
    pub lease: Option<(ActorId, u32, u64)>,
    /// Its key in `Db::unpublished`: when a publisher may next claim it.
    pub claimable_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InboxState {
    Processing,
    Completed,
    Failed,
}

impl InboxState {
    pub fn as_str(self) -> &'static str {
        match self {
            InboxState::Processing => "processing",
            InboxState::Completed => "completed",
            InboxState::Failed => "failed",
        }
    }

    pub fn is_final(self) -> bool {
        !matches!(self, InboxState::Processing)
    }
}

/// The recorded result of processing a message, returned to duplicates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessResult {
    Completed { task: TaskId, attempt: u32 },
    Failed { task: TaskId, code: &'static str },
    Cancelled { task: TaskId },
    Superseded { task: TaskId },
}

impl ProcessResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessResult::Completed { .. } => "completed",
            ProcessResult::Failed { .. } => "failed",
            ProcessResult::Cancelled { .. } => "cancelled",
            ProcessResult::Superseded { .. } => "superseded",
        }
    }
}

/// An inbox row's processing lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InboxLease {
    pub holder: ActorId,
    pub incarnation: u32,
    pub until_ms: u64,
}

impl InboxLease {
    /// Whether `holder`'s `incarnation` took it, live or not.
    pub fn taken_by(&self, holder: ActorId, incarnation: u32) -> bool {
        (self.holder, self.incarnation) == (holder, incarnation)
    }

    /// Whether someone other than `holder`'s `incarnation` holds it at
    /// `now` (as `Lease::held_by_other`: it runs out at `until_ms`).
    pub fn held_by_other(&self, now: u64, holder: ActorId, incarnation: u32) -> bool {
        self.until_ms > now && !self.taken_by(holder, incarnation)
    }
}

#[derive(Clone, Debug, Hash)]
pub struct InboxRow {
    pub message: OutboxId,
    pub payload_sha256: Sha,
    pub state: InboxState,
    pub result: Option<ProcessResult>,
    pub lease: Option<InboxLease>,
    pub first_seen_ms: u64,
    pub completed_ms: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EffectKind {
    Artifact,
    Compensation,
}

impl EffectKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EffectKind::Artifact => "artifact",
            EffectKind::Compensation => "compensate",
        }
    }
}

/// An effect token: stable per (task, attempt, kind); every retry of the
/// effect within the attempt uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token {
    pub task: TaskId,
    pub attempt: u32,
    pub kind: EffectKind,
    /// Non-zero only under the `new-token-on-retry` mutant.
    pub generation: u32,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}:attempt-{}",
            self.task,
            self.kind.as_str(),
            self.attempt
        )?;
        if self.generation > 0 {
            write!(f, ":retry-{}", self.generation)?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EffectState {
    Planned,
    Started,
    Unknown,
    Completed,
    Verified,
    CompensationRequired,
    Compensated,
    Failed,
}

impl EffectState {
    pub fn as_str(self) -> &'static str {
        match self {
            EffectState::Planned => "planned",
            EffectState::Started => "started",
            EffectState::Unknown => "unknown",
            EffectState::Completed => "completed",
            EffectState::Verified => "verified",
            EffectState::CompensationRequired => "compensation_required",
            EffectState::Compensated => "compensated",
            EffectState::Failed => "failed",
        }
    }

    /// Still waiting for an outcome: the reconciler's business.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            EffectState::Planned
                | EffectState::Started
                | EffectState::Unknown
                | EffectState::Completed
        )
    }
}

#[derive(Clone, Debug, Hash)]
pub struct LedgerRow {
    pub token: Token,
    pub state: EffectState,
    /// SHA-256 the effect is meant to produce.
    pub request_sha256: Sha,
    pub observed_sha256: Option<Sha>,
    pub error_code: Option<&'static str>,
    /// Who claimed the row to fence it, if anyone.
    pub fenced_by: Option<ActorId>,
}

impl LedgerRow {
    /// A compensation's own row, started before its first hide call: the
    /// artifact's token with the compensation kind.
    pub fn started_compensation(artifact: Token, request_sha256: Sha) -> LedgerRow {
        LedgerRow {
            token: Token {
                kind: EffectKind::Compensation,
                ..artifact
            },
            state: EffectState::Started,
            request_sha256,
            observed_sha256: None,
            error_code: None,
            fenced_by: None,
        }
    }
}

/// An attempt's lease, renewed by the worker's transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lease {
    pub attempt: u32,
    pub holder: ActorId,
    pub incarnation: u32,
    pub until_ms: u64,
}

impl Lease {
    /// Whether `holder`'s `incarnation` took it, live or not.
    pub fn taken_by(&self, holder: ActorId, incarnation: u32) -> bool {
        (self.holder, self.incarnation) == (holder, incarnation)
    }

    /// Live at `now` and held by someone other than `holder`'s
    /// `incarnation`: not to be taken (lesson 003's fencing).
    pub fn held_by_other(&self, now: u64, holder: ActorId, incarnation: u32) -> bool {
        self.until_ms > now && !self.taken_by(holder, incarnation)
    }
}

#[derive(Clone, Debug, Hash)]
pub struct StoredEvent {
    /// Shared with the event's outbox row (and deliveries of it).
    pub event: Arc<TaskEvent>,
    pub payload_sha256: Sha,
    pub evidence: Evidence,
    pub appended_ms: u64,
    /// The attempt this fact is about: with the type, its semantic key.
    pub attempt: i64,
}

#[derive(Clone, Debug, Hash)]
pub struct Snapshot {
    pub through_sequence: i64,
    pub state: TaskState,
    pub state_sha256: Sha,
}

/// One task: its state row and everything keyed by it.
#[derive(Clone, Debug, Hash)]
pub struct TaskRow {
    pub id: TaskId,
    pub state: TaskState,
    pub key: Text,
    pub fingerprint: Sha,
    pub input: Arc<Input>,
    /// The input's hash, kept after compaction drops the input.
    pub input_sha256: Sha,
    pub replay_of: Option<DeadLetterId>,
    pub created_ms: u64,
    pub events: Vec<StoredEvent>,
    pub snapshots: Vec<Snapshot>,
    pub effects: Vec<LedgerRow>,
    pub lease: Option<Lease>,
    pub outbox_rows: Vec<OutboxId>,
    pub redrives: u32,
    /// Re-drives of the task's dead-lettered events, within `redrive_max`
    /// as its work's are.
    pub event_redrives: u32,
    /// The transform's artifact (SHA-256, size), computed once.
    pub artifact: Option<(Sha, u64)>,
    /// Compacted: retention expired; only what invariants still need is kept.
    pub compacted: bool,
    /// The idempotency record of this task's key waits for the task to end
    /// before its retention is looked at again: the terminal event files it
    /// back into `Db::retention_index`. A flag on the row the terminal event
    /// already holds, where a set of parked keys cost that event a search
    /// comparing key text.
    pub retention_parked: bool,
}

/// Pushes `item` onto one of a task's short lists, sized to `first` items
/// on the first push: a queued task holds no list at all (the backlog of an
/// overloaded run is queued tasks, and was most of its memory), and one
/// that runs gets the size most tasks need, not the four a `Vec` starts at.
pub fn push_sized<T>(list: &mut Vec<T>, first: usize, item: T) {
    if list.capacity() == 0 {
        list.reserve_exact(first);
    }
    list.push(item);
}

impl TaskRow {
    /// The payload hash of the stored event under `event_id`, if any.
    pub fn payload_of(&self, event_id: &str) -> Option<[u8; 32]> {
        self.events
            .iter()
            .find(|stored| *stored.event.event_id == *event_id)
            .map(|stored| stored.payload_sha256)
    }

    pub fn effect(&self, token: Token) -> Option<&LedgerRow> {
        self.effects.iter().find(|row| row.token == token)
    }

    pub fn effect_mut(&mut self, token: Token) -> Option<&mut LedgerRow> {
        self.effects.iter_mut().find(|row| row.token == token)
    }
}

/// Why something sits in the manual-review list. The enumeration is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReviewReason {
    StoreCannotConfirm,
    MessageIdPayloadConflict,
    EventIdPayloadConflict,
    SnapshotMismatch,
    DeadLettered,
}

impl ReviewReason {
    pub const ALL: [ReviewReason; 5] = [
        ReviewReason::StoreCannotConfirm,
        ReviewReason::MessageIdPayloadConflict,
        ReviewReason::EventIdPayloadConflict,
        ReviewReason::SnapshotMismatch,
        ReviewReason::DeadLettered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReviewReason::StoreCannotConfirm => "STORE_CANNOT_CONFIRM",
            ReviewReason::MessageIdPayloadConflict => "MESSAGE_ID_PAYLOAD_CONFLICT",
            ReviewReason::EventIdPayloadConflict => "EVENT_ID_PAYLOAD_CONFLICT",
            ReviewReason::SnapshotMismatch => "SNAPSHOT_MISMATCH",
            ReviewReason::DeadLettered => "DEAD_LETTERED",
        }
    }
}

#[derive(Clone, Debug, Hash)]
pub struct ReviewItem {
    pub task: Option<TaskId>,
    pub reason: ReviewReason,
    /// The message, event or token concerned, as text.
    pub subject: String,
    pub added_ms: u64,
}

/// A command or append the state machine refused.
#[derive(Clone, Debug, Hash)]
pub struct Rejection {
    pub step: u64,
    pub task: TaskId,
    pub event_id: Text,
    /// The refused event's payload hash: the checker tells a copy of a
    /// stored event from another event under the same id by it.
    pub payload_sha256: Sha,
    pub event_type: &'static str,
    pub reason: &'static str,
    pub actor: ActorId,
}

/// How many rejections the dump lists; the count goes on.
pub const REJECTIONS_KEPT: usize = 10_000;

#[derive(Clone, Debug, Default, Hash)]
pub struct Db {
    /// Dense by task id: `tasks[id.slot()]`. Rows sit in the table itself,
    /// not boxed: a compacted row lives as long as the run, and boxed it
    /// would pin a small block among the young data for good, spreading
    /// the working set over a heap that grows with the work done. Inline,
    /// old rows stay together and recent ones are adjacent.
    pub tasks: CowTable<Vec<TaskRow>>,
    /// Hashed by the key's fingerprint (`KeyMap`): looked up on every
    /// create, cancel, read and expiry. Held in the table itself: a
    /// probe lands on the record, not on a pointer to a block written when
    /// the record was (an expiry reads records last touched long before).
    idempotency: CowTable<KeyMap<KeyOf, IdempotencyRecord>>,
    /// By outbox id; a row leaves when its task is compacted.
    outbox: CowTable<IdTable<OutboxId, OutboxRow>>,
    /// Outbox rows ever written: the last id given out.
    outbox_written: u32,
    /// Unpublished rows by the time they may next be claimed.
    pub unpublished: CowTable<SortedDeque<(u64, OutboxId)>>,
    /// By message id; rows leave when their task is compacted.
    pub inbox: CowTable<IdTable<OutboxId, InboxRow>>,
    pub quota_remaining: u64,
    pub quota_total: u64,
    /// Added to through `review` only, which keeps `review_index` in step.
    pub(crate) manual_review: CowTable<Vec<ReviewItem>>,
    /// The review list's items as (task, reason, subject), so adding one
    /// and asking about a task cost a lookup, not a walk over the list.
    review_index: CowTable<BTreeSet<(Option<TaskId>, ReviewReason, String)>>,
    pub rejections: CowTable<Vec<Rejection>>,
    pub rejections_total: u64,
    /// Running or cancelling attempts by lease expiry: the reconciler's index.
    pub lease_index: CowTable<SortedDeque<(u64, TaskId)>>,
    /// Idempotency records by the time their retention may end. A B-tree:
    /// a record kept past its due is filed again further out, into the
    /// middle, where a sorted deque shifted a share of the whole index on
    /// every insert (9% of a swarm world's 10^6-step run in memmove).
    pub retention_index: CowTable<BTreeSet<(u64, Text)>>,
    /// Tasks created by replaying a dead letter, by dead-letter id.
    pub replays: CowTable<BTreeMap<DeadLetterId, TaskId>>,
    /// Event ids that do not follow the `<task>:<type>:<attempt>` form
    /// (appended from outside), for the event-id unique constraint.
    pub foreign_event_ids: CowTable<BTreeMap<Text, (TaskId, i64)>>,
    /// Something the reconciler looks at by time changed (a lease, a
    /// retention): it re-plans its next wake.
    pub reconcile_due_changed: bool,
    /// Snapshots recovery refused (dump: `snapshotReports`).
    pub snapshot_reports: CowTable<Vec<SnapshotReport>>,
    /// The (task, sequence) of every snapshot report: a rebuild asks
    /// whether it reported a snapshot before without walking the run's
    /// list. Derived from `snapshot_reports`.
    pub reported_snapshots: CowTable<BTreeSet<(TaskId, i64)>>,
}

impl Db {
    pub fn with_quota(quota: u64) -> Db {
        Db {
            quota_remaining: quota,
            quota_total: quota,
            ..Db::default()
        }
    }

    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.tasks.share();
        self.idempotency.share();
        self.outbox.share();
        self.unpublished.share();
        self.inbox.share();
        self.manual_review.share();
        self.review_index.share();
        self.rejections.share();
        self.lease_index.share();
        self.retention_index.share();
        self.replays.share();
        self.foreign_event_ids.share();
        self.snapshot_reports.share();
        self.reported_snapshots.share();
    }

    /// The idempotency record of `key`.
    pub fn record(&self, key: &Text) -> Option<&IdempotencyRecord> {
        self.idempotency.get(&KeyOf::new(key))
    }

    pub fn record_mut(&mut self, key: &Text) -> Option<&mut IdempotencyRecord> {
        self.idempotency.get_mut(&KeyOf::new(key))
    }

    /// Writes `record` under its key, replacing any record there.
    pub fn put_record(&mut self, record: IdempotencyRecord) {
        self.idempotency.insert(KeyOf::new(&record.key), record);
    }

    pub fn remove_record(&mut self, key: &Text) -> Option<IdempotencyRecord> {
        self.idempotency.remove(&KeyOf::new(key))
    }

    /// Every live idempotency record, in the order of `KeyOf`.
    pub fn records(&self) -> impl Iterator<Item = &IdempotencyRecord> {
        self.idempotency.values_in_key_order().into_iter()
    }

    pub fn task(&self, id: TaskId) -> &TaskRow {
        &self.tasks[id.slot()]
    }

    pub fn task_mut(&mut self, id: TaskId) -> &mut TaskRow {
        &mut self.tasks[id.slot()]
    }

    pub fn find_task(&self, id: TaskId) -> Option<&TaskRow> {
        self.tasks.get(id.slot())
    }

    /// A row that was not compacted away.
    pub fn outbox_row(&self, id: OutboxId) -> &OutboxRow {
        self.find_outbox(id).expect("a live outbox row")
    }

    pub fn outbox_row_mut(&mut self, id: OutboxId) -> &mut OutboxRow {
        self.outbox.get_mut(id).expect("a live outbox row")
    }

    pub fn find_outbox(&self, id: OutboxId) -> Option<&OutboxRow> {
        self.outbox.get(id)
    }

    /// The bookkeeping of the outbox and inbox tables, each with its name
    /// (`IdTable::bookkeeping_failure`; `converges` asks it).
    pub fn table_failures(&self) -> [(&'static str, Option<String>); 2] {
        [
            ("outbox", self.outbox.bookkeeping_failure()),
            ("inbox", self.inbox.bookkeeping_failure()),
        ]
    }

    /// Every row not compacted away, by id.
    pub fn outbox_rows(&self) -> impl Iterator<Item = &OutboxRow> {
        self.outbox.values()
    }

    /// Frees a compacted task's row.
    pub fn drop_outbox_row(&mut self, id: OutboxId) {
        if let Some(Some(claimable)) = self.outbox.remove_with(id, |row| row.claimable_ms) {
            self.unpublished.remove(&(claimable, id));
        }
    }

    pub fn next_task_id(&self) -> TaskId {
        TaskId(self.tasks.len() as u32 + 1)
    }

    /// Outbox rows ever written (compacted ones included).
    pub fn outbox_written(&self) -> u32 {
        self.outbox_written
    }

    pub fn next_outbox_id(&self) -> OutboxId {
        OutboxId(self.outbox_written + 1)
    }

    /// Inserts an outbox row and indexes it for the publishers.
    pub fn insert_outbox(&mut self, mut row: OutboxRow) {
        assert_eq!(row.id, self.next_outbox_id());
        row.claimable_ms = Some(row.ready_ms);
        self.unpublished.insert((row.ready_ms, row.id));
        self.tasks[row.task.slot()].outbox_rows.push(row.id);
        self.outbox_written += 1;
        self.outbox.insert(row.id, row);
    }

    /// Moves an unpublished row to a new claimable time, or out of the
    /// index once published.
    pub fn reindex_outbox(&mut self, id: OutboxId, claimable: Option<u64>) {
        let row = self.outbox.get_mut(id).expect("a live outbox row");
        if let Some(old) = row.claimable_ms {
            self.unpublished.remove(&(old, id));
        }
        row.claimable_ms = claimable;
        if let Some(new) = claimable {
            self.unpublished.insert((new, id));
        }
    }

    /// Indexes a record's retention to end no sooner than `due`.
    pub fn retain_until(&mut self, due: u64, key: Text) {
        self.retention_index.insert((due, key));
        self.reconcile_due_changed = true;
    }

    pub fn set_lease(&mut self, task: TaskId, lease: Option<Lease>) {
        let row = &mut self.tasks[task.slot()];
        if let Some(old) = row.lease {
            self.lease_index.remove(&(old.until_ms, task));
        }
        row.lease = lease;
        if let Some(new) = lease {
            self.lease_index.insert((new.until_ms, task));
        }
        self.reconcile_due_changed = true;
    }

    pub fn review(
        &mut self,
        task: Option<TaskId>,
        reason: ReviewReason,
        subject: String,
        now: u64,
    ) {
        if self.review_index.insert((task, reason, subject.clone())) {
            self.manual_review.push(ReviewItem {
                task,
                reason,
                subject,
                added_ms: now,
            });
        }
    }

    /// Whether `task` is in manual review for `reason`.
    pub fn reviewed(&self, task: TaskId, reason: ReviewReason) -> bool {
        let from = (Some(task), reason, String::new());
        self.review_index
            .range(from..)
            .next()
            .is_some_and(|(t, r, _)| *t == Some(task) && *r == reason)
    }

    /// The manual-review list, in the order items were added.
    pub fn review_items(&self) -> &[ReviewItem] {
        &self.manual_review
    }

    pub fn in_review(&self, task: TaskId) -> bool {
        let from = (Some(task), ReviewReason::ALL[0], String::new());
        self.review_index
            .range(from..)
            .next()
            .is_some_and(|(t, _, _)| *t == Some(task))
    }

    /// A review that stops automation on the task itself: its effect cannot
    /// be confirmed, or its history conflicts. Other reasons concern a
    /// message or a snapshot; the task can still be settled.
    pub fn automation_blocked(&self, task: TaskId) -> bool {
        self.reviewed(task, ReviewReason::StoreCannotConfirm)
            || self.reviewed(task, ReviewReason::EventIdPayloadConflict)
    }

    pub fn reject(&mut self, rejection: Rejection) {
        self.rejections_total += 1;
        if self.rejections.len() < REJECTIONS_KEPT {
            self.rejections.push(rejection);
        }
    }
}

/// A snapshot that failed recovery's checks (dump: `snapshotReports`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SnapshotReport {
    pub task: TaskId,
    pub through_sequence: i64,
    pub reason: &'static str,
    pub step: u64,
}
