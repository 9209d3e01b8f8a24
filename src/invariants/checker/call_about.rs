//! The retention check's own reading of which task an API call in flight
//! is about, apart from the reconciler's (`Call::task_held`), which it
//! checks.

use crate::world::actors::api::{ApiPhase, Call};
use crate::world::engine::ids::TaskId;

/// The task an API call in flight is about, read from its phase and
/// operation by the checker's own rule, not through `Call::task_held`, the
/// reconciler's: a read that found its task or fills the cache with it,
/// or an operation naming one. `Calls` counts the calls by it, so the
/// check of each compaction is a lookup, not a walk over every call.
pub fn call_about(call: &Call) -> Option<TaskId> {
    match call.phase {
        ApiPhase::ReadDb { task } | ApiPhase::FillCache { task, .. } => Some(task),
        _ => call.op.task_named(),
    }
}
