//! The reconciler (lesson 000 §7, §10 step 11; lesson 003 §12): every
//! `reconcile_every_ms` it takes work from indexes kept by expiry time —
//! attempts whose lease expired, messages the broker dead-lettered, records
//! whose retention may end — never by scanning every task. It observes and
//! turns what it sees into fences, ledger updates and commands, never a
//! direct status write; what it cannot settle goes to manual review.

use crate::world::actors::fence::Fence;
use crate::world::engine::ids::{DeadLetterId, TaskId};
use crate::world::engine::life::Life;

mod steps;

#[derive(Clone, Debug, Hash)]
pub enum ReconcilerPhase {
    Idle,
    Fence(Fence),
}

#[derive(Clone, Debug, Hash)]
pub struct Reconciler {
    pub life: Life,
    pub phase: ReconcilerPhase,
}

impl Reconciler {
    pub fn new() -> Reconciler {
        Reconciler {
            life: Life::new(),
            phase: ReconcilerPhase::Idle,
        }
    }

    pub fn wipe(&mut self) {
        self.phase = ReconcilerPhase::Idle;
    }
}

impl Default for Reconciler {
    fn default() -> Reconciler {
        Reconciler::new()
    }
}

/// Work the reconciler found due.
enum Due {
    Lease(TaskId),
    DeadLetter(DeadLetterId),
    /// The retention index's first record (`expire_record` takes it off).
    Retention,
    /// Finished tasks an expiry could not compact, looked at again.
    Compaction,
}
