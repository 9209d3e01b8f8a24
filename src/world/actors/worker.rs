//! Workers on `task-work` (lesson 000 §6-§8, lesson 003; DESIGN §3
//! "Process"): the worker's volatile state between steps. Its steps, one
//! file per phase of the protocol: `worker/steps.rs` takes a delivery and
//! dispatches on the phase; `inbox.rs` registers it (duplicates,
//! quarantine, ack, nack, dead letters); `effect.rs` starts the attempt,
//! plans, puts, reads back, verifies and compensates; `finish.rs` rechecks,
//! completes, fences or fails it. Each step is one atomic action; the phase
//! says how far the worker got.

use crate::hash::Sha;
use crate::task::Status;

use crate::world::actors::fence::Fence;
use crate::world::engine::ids::{TaskId, TextBuf};
use crate::world::engine::life::Life;
use crate::world::engine::step::Verb;
use crate::world::stores::broker::Delivery;
use crate::world::stores::db::{ProcessResult, Token};

mod effect;
mod finish;
mod inbox;
mod mutant_hooks;
mod steps;

/// The error code of an input the transform rejects under the current
/// handler version: the task fails for good and its message is owed to the
/// dead-letter queue (lesson 000 §13.5).
pub const POISON_CODE: &str = "UNSUPPORTED_FORMAT";

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum WorkerPhase {
    Idle,
    /// Only after `ack-before-process` acked on receipt.
    Register,
    Start,
    Plan,
    Put,
    RecordUnknown,
    ReadBack,
    Verify {
        good: bool,
    },
    Recheck,
    Complete,
    Ack,
    Nack(&'static str),
    Quarantine,
    FailPoison(&'static str),
    DeadLetter(&'static str),
    /// Only after a duplicate whose poison failure's dead letter was never
    /// made (a crash between the two): the copy is made now, then the ack.
    /// It processes nothing; the recorded result stands.
    PayDeadLetter(&'static str),
    Compensate,
    CheckHidden,
    Fail,
    Reload,
    Fence,
}

/// What a worker step did with a delivery, for the inbox invariants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeliveryAct {
    /// Registered in the inbox (message id, payload hash).
    Register,
    /// A step that processes it: state machine, ledger or store.
    Work,
    Ack(Option<ProcessResult>),
    Nack,
    Quarantine,
    /// Let go without an answer (it comes back after its visibility timeout).
    Drop,
    /// The worker's job on it is over (it fell idle, not by a crash): an
    /// answer or a let-go must have come before.
    End,
}

/// One act on one delivery, with what identifies its content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeliveryTouch {
    pub delivery: u64,
    pub message: crate::world::engine::ids::OutboxId,
    pub payload_sha256: Sha,
    pub act: DeliveryAct,
}

/// The delivery a worker is processing and how far it got.
#[derive(Clone, Debug, Hash)]
pub struct Job {
    pub delivery: Delivery,
    pub delivery_id: u64,
    pub task: TaskId,
    pub attempt: u32,
    pub version: i64,
    pub token: Token,
    pub puts: u32,
    pub reads: u32,
    pub hides: u32,
    /// The last hide call was answered (not timed out).
    pub hide_answered: bool,
    pub result: Option<ProcessResult>,
    pub fence: Option<Fence>,
}

#[derive(Clone, Debug, Hash)]
pub struct Worker {
    pub life: Life,
    pub phase: WorkerPhase,
    /// Boxed: it moves out and back every step.
    pub job: Option<Box<Job>>,
    /// Deliveries handed over, by arrival time.
    pub mailbox: Vec<(u64, u64, Delivery)>,
}

impl Worker {
    pub fn new() -> Worker {
        Worker {
            life: Life::new(),
            phase: WorkerPhase::Idle,
            job: None,
            mailbox: Vec::new(),
        }
    }

    pub fn wipe(&mut self) {
        self.phase = WorkerPhase::Idle;
        self.job = None;
        self.mailbox.clear();
    }

    /// Free for the broker: up, idle, nothing on the way.
    pub fn free(&self) -> bool {
        self.life.up && self.phase == WorkerPhase::Idle && self.mailbox.is_empty()
    }
}

impl Default for Worker {
    fn default() -> Worker {
        Worker::new()
    }
}

/// What the transform writes for a task: canonical JSON of the normalized
/// input, the schema version and the task id (keys sorted), plus a newline.
/// Built from the input's canonical JSON, so nothing is re-serialized, and
/// hashed piece by piece, so the bytes are never gathered.
pub fn artifact_for(task: TaskId, canonical_input: &str) -> (Sha, u64) {
    use sha2::{Digest, Sha256};
    let mut id = TextBuf::new();
    task.push_to(&mut id);
    let pieces = [
        "{\"normalized\":",
        canonical_input,
        ",\"schemaVersion\":1,\"taskId\":\"",
        id.as_str(),
        "\"}\n",
    ];
    let mut hasher = Sha256::new();
    for piece in pieces {
        hasher.update(piece.as_bytes());
    }
    let size = pieces.iter().map(|piece| piece.len() as u64).sum();
    (hasher.finalize().into(), size)
}

/// What a hide call means to do with an artifact it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::world) enum HideMode {
    /// A compensation: the written artifact is taken back.
    TakeBack,
    /// A fence that found nothing under the token (read, or told by the
    /// ledger where the store cannot be read): a tombstone, written only
    /// while nothing is there, so that a late put cannot show.
    TombstoneIfAbsent,
}

/// What came of one store hide call.
pub(in crate::world) struct HideCall {
    pub answered: bool,
    /// The call found a written artifact and meant to hide it (it may have
    /// timed out before it took, or found it hidden already).
    pub hid_artifact: bool,
    /// The store answered that an artifact is there, and a tombstone-only
    /// call left it as it is.
    pub refused: bool,
    /// When to look next.
    pub delay: u64,
}

/// What came of one store read.
pub(in crate::world) enum StoreRead {
    Answered,
    /// Timed out; another read may follow after `store_timeout_ms`.
    TimedOut,
    /// Timed out for the last time: the store counts as unavailable.
    Exhausted,
}

/// What a worker step asks for next.
pub(in crate::world) enum Step {
    Next(WorkerPhase, u64),
    Done,
}

/// The recorded result for a message whose task has settled or moved on.
fn settled_result(task: TaskId, attempt: u32, state: StateSeen) -> ProcessResult {
    let same = state.attempt == i64::from(attempt);
    match state.status {
        Status::Completed if same => ProcessResult::Completed { task, attempt },
        Status::Failed if same => ProcessResult::Failed {
            task,
            code: "TASK_FAILED",
        },
        Status::Cancelled => ProcessResult::Cancelled { task },
        _ => ProcessResult::Superseded { task },
    }
}

/// The scalars of a task's state row a worker decides on, copied instead
/// of cloning the row and its texts.
#[derive(Clone, Copy, Debug, Hash)]
pub(in crate::world) struct StateSeen {
    pub status: Status,
    pub version: i64,
    pub attempt: i64,
}

impl StateSeen {
    pub(in crate::world) fn of(state: &crate::task::TaskState) -> StateSeen {
        StateSeen {
            status: state.status,
            version: state.version,
            attempt: state.attempt,
        }
    }
}

/// Steps that act on a delivery's content (not inbox, ack or nack).
fn phase_processes(phase: &WorkerPhase) -> bool {
    !matches!(
        phase,
        WorkerPhase::Idle
            | WorkerPhase::Register
            | WorkerPhase::Ack
            | WorkerPhase::PayDeadLetter(_)
            | WorkerPhase::Nack(_)
            | WorkerPhase::Quarantine
            | WorkerPhase::Reload
            | WorkerPhase::Recheck
    )
}

fn verb_of(phase: &WorkerPhase, job: &Job) -> Verb {
    match phase {
        WorkerPhase::Idle | WorkerPhase::Register => Verb::Register,
        WorkerPhase::Start => Verb::Start,
        WorkerPhase::Plan => Verb::Plan,
        WorkerPhase::Put => Verb::Put,
        WorkerPhase::RecordUnknown => Verb::RecordUnknown,
        WorkerPhase::ReadBack => Verb::ReadBack,
        WorkerPhase::Verify { .. } => Verb::Verify,
        WorkerPhase::Recheck => Verb::Recheck,
        WorkerPhase::Reload => Verb::Reload,
        WorkerPhase::Complete => Verb::Complete,
        WorkerPhase::Ack => Verb::Ack,
        WorkerPhase::Nack(_) => Verb::Nack,
        WorkerPhase::Quarantine => Verb::Quarantine,
        WorkerPhase::FailPoison(_) => Verb::FailPoison,
        WorkerPhase::DeadLetter(_) | WorkerPhase::PayDeadLetter(_) => Verb::DeadLetter,
        WorkerPhase::Compensate => Verb::Compensate,
        WorkerPhase::CheckHidden => Verb::CheckHidden,
        WorkerPhase::Fail => Verb::Fail,
        WorkerPhase::Fence => job
            .fence
            .as_ref()
            .map_or(Verb::FenceClaim, |fence| fence.verb()),
    }
}
