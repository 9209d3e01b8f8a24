//! How the worker ends an attempt: recheck the task, complete in one
//! transaction, fence a cancelled attempt, fail it, or fail a poison input
//! for good.

use crate::task::Status;
use crate::world::World;
use crate::world::actors::fence::{Fence, FenceProgress, FencePurpose};
use crate::world::stores::db::{EffectState, InboxState, ProcessResult};
use crate::world::stores::events::{Command, CommandOutcome};

use super::*;

impl World {
    /// Compensation verified: ledger compensated, `TaskFailed` with
    /// `ARTIFACT_HASH_MISMATCH`, inbox failed — one transaction.
    pub(super) fn worker_fail(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        if !self.holds_lease(job) {
            return self.let_go(job, "lease-lost");
        }
        let outcome = self.execute(
            job.task,
            job.version_now(self),
            Command::FailTask {
                attempt: job.attempt,
                error_code: "ARTIFACT_HASH_MISMATCH",
            },
        );
        self.rec.outcome = outcome.code();
        match outcome {
            CommandOutcome::Committed { .. } | CommandOutcome::Duplicate { .. } => {
                for ledger in self.db.task_mut(job.task).effects.iter_mut() {
                    if ledger.token.attempt == job.attempt && ledger.token.task == job.task {
                        ledger.state = EffectState::Compensated;
                    }
                }
                self.touched.tokens.push(job.token);
                self.sometimes("compensation");
                job.result = Some(ProcessResult::Failed {
                    task: job.task,
                    code: "ARTIFACT_HASH_MISMATCH",
                });
                self.finalize_inbox(job, InboxState::Failed);
                self.drop_lease(job.task);
                Step::Next(WorkerPhase::Ack, self.latency())
            }
            _ => Step::Next(WorkerPhase::Reload, self.latency()),
        }
    }

    /// Re-reads the task after a conflict (reload) or before completing
    /// (recheck: a cancellation may have arrived, DESIGN §3 step 7).
    pub(super) fn worker_reload(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        self.decide_after_reload(job)
    }

    pub(super) fn worker_recheck(&mut self, job: &mut Job) -> Step {
        let state = StateSeen::of(&self.db.task(job.task).state);
        job.version = state.version;
        self.rec.version = Some(state.version);
        self.rec.outcome = state.status.as_str();
        if state.status == Status::Cancelling {
            self.race("cancel × complete");
        }
        Step::Next(WorkerPhase::Complete, self.latency())
    }

    /// A reload that finds the effect already settled goes straight on.
    pub(super) fn decide_after_reload(&mut self, job: &mut Job) -> Step {
        let state = StateSeen::of(&self.db.task(job.task).state);
        let verified = self
            .db
            .task(job.task)
            .effect(job.token)
            .is_some_and(|l| l.state == EffectState::Verified && l.fenced_by.is_none());
        if verified
            && matches!(state.status, Status::Running | Status::Cancelling)
            && state.attempt == i64::from(job.attempt)
        {
            job.version = state.version;
            self.rec.outcome = state.status.as_str();
            return Step::Next(WorkerPhase::Complete, self.latency());
        }
        self.decide(job)
    }

    /// `CompleteTask`, inbox completed and the events' outbox rows in one
    /// transaction that requires the ledger row to be still `verified`.
    pub(super) fn worker_complete(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        let observed = match self.db.task(job.task).effect(job.token) {
            Some(l) if l.state == EffectState::Verified => l.observed_sha256,
            _ => return self.let_go(job, "not-verified"),
        };
        if self.lease_held_elsewhere(job) {
            return self.let_go(job, "lease-lost");
        }
        let artifact = match observed {
            Some(sha) => sha,
            None => self.expected_artifact(job.task).0,
        };
        let outcome = self.execute(
            job.task,
            job.version,
            Command::CompleteTask {
                attempt: job.attempt,
                artifact_sha256: artifact,
            },
        );
        self.rec.outcome = outcome.code();
        match outcome {
            CommandOutcome::Committed { .. } | CommandOutcome::Duplicate { .. } => {
                let state = StateSeen::of(&self.db.task(job.task).state);
                let result = settled_result(job.task, job.attempt, state);
                job.result = Some(result);
                self.finalize_inbox(job, InboxState::Completed);
                Step::Next(WorkerPhase::Ack, self.latency())
            }
            CommandOutcome::VersionConflict => {
                self.race("cancel × complete");
                Step::Next(WorkerPhase::Recheck, self.latency())
            }
            CommandOutcome::Rejected(crate::task::RejectReason::CancellationPending) => {
                self.sometimes("cancellation-pending-refused");
                job.fence = Some(Fence::new(
                    job.task,
                    job.attempt,
                    FencePurpose::CancelAfterRefusal,
                ));
                Step::Next(WorkerPhase::Fence, self.latency())
            }
            CommandOutcome::Rejected(_) | CommandOutcome::EventIdConflict => {
                Step::Next(WorkerPhase::Reload, self.latency())
            }
        }
    }

    /// The cancellation path: fence, then settle.
    pub(super) fn worker_fence(&mut self, job: &mut Job) -> Step {
        let mut fence = job.fence.take().expect("a fencing worker has a fence");
        let (actor, incarnation) = self.worker_holder();
        let progress = self.fence_step(actor, &mut fence, incarnation);
        match progress {
            FenceProgress::Next(delay) => {
                job.fence = Some(fence);
                Step::Next(WorkerPhase::Fence, delay)
            }
            FenceProgress::Done => {
                let state = StateSeen::of(&self.db.task(job.task).state);
                job.result = Some(settled_result(job.task, job.attempt, state));
                self.finalize_inbox(job, InboxState::Completed);
                Step::Next(WorkerPhase::Ack, self.latency())
            }
            FenceProgress::Abort("superseded") => Step::Next(WorkerPhase::Reload, self.latency()),
            FenceProgress::Abort("STORE_UNAVAILABLE") => {
                Step::Next(WorkerPhase::Nack("STORE_UNAVAILABLE"), self.latency())
            }
            FenceProgress::Abort(_) => {
                self.touch_delivery(job, DeliveryAct::Drop);
                Step::Done
            }
        }
    }

    /// A poison input: `TaskFailed` with its code and the inbox failed.
    pub(super) fn worker_fail_poison(&mut self, job: &mut Job, code: &'static str) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        if self.lease_held_elsewhere(job) {
            return self.let_go(job, "lease-lost");
        }
        let outcome = self.execute(
            job.task,
            job.version,
            Command::FailTask {
                attempt: job.attempt,
                error_code: code,
            },
        );
        self.rec.outcome = outcome.code();
        match outcome {
            CommandOutcome::Committed { .. } | CommandOutcome::Duplicate { .. } => {
                job.result = Some(ProcessResult::Failed {
                    task: job.task,
                    code,
                });
                self.finalize_inbox(job, InboxState::Failed);
                self.drop_lease(job.task);
                Step::Next(WorkerPhase::DeadLetter(code), self.latency())
            }
            _ => Step::Next(WorkerPhase::Reload, self.latency()),
        }
    }
}
