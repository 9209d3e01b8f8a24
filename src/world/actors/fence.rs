//! Fencing (DESIGN §3 "Fencing"; lesson 000 §7, lesson 003 §12): before an
//! attempt that may have an effect is failed or cancelled, its ledger row is
//! claimed and its token fenced in the store: a good artifact is used, a bad
//! one hidden, an absent one replaced by a hidden tombstone. Then one
//! command settles the task. The worker (cancellation) and the reconciler
//! (expired leases, cancellations whose worker died) share this procedure.

use crate::task::Status;
use crate::world::engine::ids::TaskId;
use crate::world::engine::step::Verb;
use crate::world::stores::db::{EffectKind, Token};

mod steps;

/// Why an attempt is being fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FencePurpose {
    /// Its lease expired: retry (or complete, if its artifact is good).
    Retry,
    /// The task is cancelling: cancel (or, under completion-wins, complete
    /// with a good artifact).
    Cancel,
    /// The completion was refused with `CANCELLATION_PENDING`: compensate,
    /// then cancel.
    CancelAfterRefusal,
}

impl FencePurpose {
    /// Why a fence takes an attempt whose task is `status`: a cancelling
    /// task is cancelled, a running one retried.
    pub fn for_status(status: Status) -> FencePurpose {
        if status == Status::Cancelling {
            FencePurpose::Cancel
        } else {
            FencePurpose::Retry
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FencePhase {
    Claim,
    Read,
    Hide,
    Check,
    Resolve,
}

#[derive(Clone, Debug, Hash)]
pub struct Fence {
    pub task: TaskId,
    pub attempt: u32,
    pub purpose: FencePurpose,
    pub phase: FencePhase,
    /// The task version the decision is based on.
    pub version: i64,
    /// The artifact is good and stays: the attempt completes.
    pub used: bool,
    /// The artifact failed verification.
    pub bad: bool,
    /// A real artifact (not a tombstone) was hidden.
    pub hid_artifact: bool,
    /// The hide takes back a written artifact: a compensation, with its
    /// own token and ledger row, written before the store call.
    pub compensating: bool,
    pub reads: u32,
    pub hides: u32,
    /// The last hide call was answered (not timed out).
    pub hide_answered: bool,
}

/// Where a fence step left things.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceProgress {
    /// Take the next fence step after this many milliseconds.
    Next(u64),
    /// Settled: the task completed, failed, cancelled or moved to a retry.
    Done,
    /// Given up for now: someone else must try again later.
    Abort(&'static str),
}

impl Fence {
    pub fn new(task: TaskId, attempt: u32, purpose: FencePurpose) -> Fence {
        Fence {
            task,
            attempt,
            purpose,
            phase: FencePhase::Claim,
            version: 0,
            used: false,
            bad: false,
            hid_artifact: false,
            compensating: false,
            reads: 0,
            hides: 0,
            hide_answered: false,
        }
    }

    pub fn token(&self) -> Token {
        Token {
            task: self.task,
            attempt: self.attempt,
            kind: EffectKind::Artifact,
            generation: 0,
        }
    }

    pub fn verb(&self) -> Verb {
        match self.phase {
            FencePhase::Claim => Verb::FenceClaim,
            FencePhase::Read => Verb::FenceRead,
            FencePhase::Hide => Verb::FenceHide,
            FencePhase::Check => Verb::FenceCheck,
            FencePhase::Resolve => Verb::Resolve,
        }
    }
}

/// Whether an attempt may be fenced (`World::fence_target`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::world) enum FenceTarget {
    /// The attempt is over (or another runs): nothing to fence.
    Ended,
    /// The task waits for a human: no automation takes it.
    InReview,
    /// Fence it; the task's status and version as they stand.
    Due { status: Status, version: i64 },
}
