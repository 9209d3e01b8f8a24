//! API instances: each call a client sends is handled as its own small
//! state machine (volatile: a crashed API forgets its calls). Create is ONE
//! transaction: look the key up, then for a new key decrement the quota
//! conditionally and insert the record, the task and its outbox row.

use crate::task::Status;

use crate::world::engine::ids::{RequestId, TaskId};
use crate::world::stores::db::{Answer, Input};

pub mod calls;
mod steps;

/// Where an API call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApiPhase {
    Arrive,
    /// A read missed the cache for `task`. The phases after the lookup
    /// carry the task the key named then: the key's record may expire in
    /// between, and a real API does not look the key up again.
    ReadDb {
        task: TaskId,
    },
    FillCache {
        task: TaskId,
        status: Status,
        version: i64,
    },
    Respond(Response),
    /// `split-idempotency-insert`: the key was checked absent; insert next.
    InsertRecord,
    /// `split-create-transaction`: the task is written; record + outbox next.
    CreateTask {
        task: TaskId,
    },
    /// `quota-read-then-write`: the quota was read; write it next.
    WriteQuota {
        remaining: u64,
    },
    /// `publish-after-commit`: the API publishes the message itself.
    Publish {
        task: TaskId,
    },
    /// `publish-before-commit`: published already; the create commits next.
    CreateAfterPublish,
    /// `cache-write-before-db`: the view was written; the cancel commits next.
    CancelAfterCacheWrite,
}

/// What an API answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Response {
    Create(Answer),
    Cancel(Result<i64, &'static str>),
    Status(Option<(TaskId, Status, i64)>),
}

/// One client send being handled by one API instance.
#[derive(Clone, Debug, Hash)]
pub struct Call {
    pub request: RequestId,
    /// What the client sent, shared with its request (which may be gone
    /// by now: the call keeps it).
    pub op: std::sync::Arc<crate::world::actors::client::ClientOp>,
    pub intent: Option<crate::world::engine::ids::IntentId>,
    pub api: u16,
    pub incarnation: u32,
    pub phase: ApiPhase,
}

impl Call {
    /// The task this call is about once it knows it: one it names by id,
    /// or the one a read found its key naming. Compaction waits for these:
    /// a read that fills the cache after its task was compacted, the task's
    /// version tombstone gone with it, would put back a view the database
    /// left long ago (fuzz seed 2 with a short TTL: a fill delayed 7.5 s by
    /// a latency spike showed queued/v0 of a task completed at v2).
    pub fn task_held(&self) -> Option<TaskId> {
        match self.phase {
            ApiPhase::ReadDb { task } | ApiPhase::FillCache { task, .. } => Some(task),
            _ => self.op.task_named(),
        }
    }
}

/// `^[A-Za-z0-9_-]{6,80}$`
pub fn valid_key(key: &str) -> bool {
    (6..=80).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The input schema: an object with a string `doc`.
pub fn valid_input(input: &Input) -> bool {
    input.valid
}

/// Message ids the `publish-*-commit` mutants make up: no outbox row has them.
pub const DIRECT_MESSAGE_BASE: u32 = 1_000_000_000;
