//! Clients: they send creates (with an idempotency key), cancels and status
//! reads to an API, wait for the answer, and retry with the SAME key after a
//! timeout (a lost response looks the same). A client keeps the highest
//! version of a task it has seen.

use std::sync::Arc;

use crate::hash::Sha;
use crate::task::Text;
use crate::world::input::Target;

use crate::world::engine::ids::IntentId;
use crate::world::stores::db::Input;

mod steps;

/// What a client asks an API.
#[derive(Clone, Debug, Hash)]
pub enum ClientOp {
    Create {
        key: Text,
        input: Arc<Input>,
        fingerprint: Sha,
    },
    Cancel {
        target: Target,
    },
    Read {
        target: Target,
    },
}

impl ClientOp {
    /// The task this operation names by id (a cancel or read by task id),
    /// if any.
    pub fn task_named(&self) -> Option<crate::world::engine::ids::TaskId> {
        match self {
            ClientOp::Cancel {
                target: Target::Task(task),
            }
            | ClientOp::Read {
                target: Target::Task(task),
            } => Some(*task),
            _ => None,
        }
    }
}

/// A request a client has sent and is waiting on (volatile client state).
#[derive(Clone, Debug, Hash)]
pub struct Outgoing {
    pub client: u16,
    /// Shared with the API calls that carry each send of it: a send
    /// takes one counted reference, not one for the key and one for the
    /// input.
    pub op: Arc<ClientOp>,
    pub intent: Option<IntentId>,
    pub sends: u32,
    pub next_api: u16,
    pub incarnation: u32,
}
