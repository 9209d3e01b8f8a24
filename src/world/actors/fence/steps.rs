//! Fencing steps: claim the effect in the ledger, read the store by the same token, hide or tombstone, check, resolve.

use crate::task::Status;
use crate::world::World;
use crate::world::actors::worker::{HideMode, StateSeen, StoreRead};
use crate::world::engine::ids::{ActorId, TaskId};
use crate::world::stores::db::{EffectKind, EffectState, LedgerRow, WorkKind};
use crate::world::stores::events::{Command, CommandOutcome};
use crate::world::stores::store::Observed;

use super::*;

impl World {
    /// One step of a fence by `actor` (whose step has begun). The ledger
    /// row's current token is fenced, so the `new-token-on-retry` mutant's
    /// extra tokens are caught by the invariants, not silently fenced.
    pub fn fence_step(
        &mut self,
        actor: ActorId,
        fence: &mut Fence,
        incarnation: u32,
    ) -> FenceProgress {
        self.rec.task = Some(fence.task);
        self.rec.attempt = fence.attempt;
        self.touched.tasks.push(fence.task);
        match fence.phase {
            FencePhase::Claim => self.fence_claim(actor, fence, incarnation),
            FencePhase::Read => self.fence_read(fence),
            FencePhase::Hide => self.fence_hide(fence),
            FencePhase::Check => self.fence_check(fence),
            FencePhase::Resolve => self.fence_resolve(actor, fence, incarnation),
        }
    }

    /// Whether `attempt` of `task` may be fenced: the task still runs (or
    /// cancels) at that attempt and no human owns it. The scan that
    /// chooses a fence and the claim that takes it ask this in two
    /// transactions; one answer keeps them from drifting apart.
    pub(in crate::world) fn fence_target(&self, task: TaskId, attempt: u32) -> FenceTarget {
        let state = StateSeen::of(&self.db.task(task).state);
        let live = matches!(state.status, Status::Running | Status::Cancelling)
            && state.attempt == i64::from(attempt);
        if !live {
            FenceTarget::Ended
        } else if self.db.automation_blocked(task) {
            FenceTarget::InReview
        } else {
            FenceTarget::Due {
                status: state.status,
                version: state.version,
            }
        }
    }

    fn fence_claim(
        &mut self,
        actor: ActorId,
        fence: &mut Fence,
        incarnation: u32,
    ) -> FenceProgress {
        if self.commit_fault() == Some(false) {
            return FenceProgress::Abort("crashed");
        }
        // The claim's transaction asks again what the scan asked: a task
        // sent to a human since the scan chose this fence (a conflicting
        // event) is the human's now, and no automation claims it.
        let (status, version) = match self.fence_target(fence.task, fence.attempt) {
            FenceTarget::Ended => {
                self.rec.outcome = "superseded";
                return FenceProgress::Abort("superseded");
            }
            FenceTarget::InReview => {
                self.rec.outcome = "in-manual-review";
                return FenceProgress::Abort("in-manual-review");
            }
            FenceTarget::Due { status, version } => (status, version),
        };
        // The scan that chose this fence saw the lease run out; the claim
        // reads it again in its own transaction: a worker may have taken a
        // fresh lease on the attempt in between (a redelivery meeting a
        // cancelling task), and a live lease is never taken.
        let now = self.now;
        let lease = self.db.task(fence.task).lease;
        if lease.is_some_and(|lease| lease.held_by_other(now, actor, incarnation)) {
            self.rec.outcome = "lease-held";
            self.sometimes("fence-found-lease-renewed");
            return FenceProgress::Abort("lease-held");
        }
        if fence.purpose != FencePurpose::CancelAfterRefusal {
            fence.purpose = FencePurpose::for_status(status);
        }
        fence.version = version;
        fence.used = false;
        fence.reads = 0;
        fence.hides = 0;
        self.grant_lease(fence.task, fence.attempt, actor, incarnation);
        let token = fence.token();
        self.touched.tokens.push(token);
        let row = self.db.task_mut(fence.task);
        let settled = match row.effect_mut(token) {
            Some(ledger) => {
                ledger.fenced_by = Some(actor);
                // A row compensated for a mismatch (by this fence, before a
                // conflict sent it back here) had a bad artifact: a settled
                // row is not read again, so the ledger is what says so.
                fence.bad = ledger.state == EffectState::Compensated
                    && ledger.error_code == Some("ARTIFACT_HASH_MISMATCH");
                matches!(ledger.state, EffectState::Compensated | EffectState::Failed)
            }
            None => {
                crate::world::stores::db::push_sized(
                    &mut row.effects,
                    1,
                    LedgerRow {
                        token,
                        state: EffectState::Planned,
                        request_sha256: [0; 32],
                        observed_sha256: None,
                        error_code: None,
                        fenced_by: Some(actor),
                    },
                );
                fence.bad = false;
                false
            }
        };
        self.rec.outcome = "claimed";
        self.rec.version = Some(version);
        fence.phase = if settled {
            FencePhase::Resolve
        } else {
            FencePhase::Read
        };
        FenceProgress::Next(self.latency())
    }

    /// The artifact the ledger expects for this token, if the effect was
    /// ever planned.
    fn expected_sha(&self, fence: &Fence) -> Option<crate::hash::Sha> {
        self.db
            .task(fence.task)
            .effect(fence.token())
            .map(|row| row.request_sha256)
            .filter(|sha| *sha != [0; 32])
    }

    /// Whether a verified artifact stays, used by the attempt, when the fence
    /// is for `purpose`: a retry keeps it; a cancellation keeps it only under
    /// completion-wins, and never once the completion was refused.
    fn keeps_verified(&self, purpose: FencePurpose) -> bool {
        match purpose {
            FencePurpose::Retry => true,
            FencePurpose::Cancel => self.config.cancel_policy != crate::task::Policy::CancelWins,
            FencePurpose::CancelAfterRefusal => false,
        }
    }

    /// A store read for the fence: `None` when it goes through, else how
    /// it goes on (the same phase after the store timeout, or an abort once
    /// the store is exhausted).
    fn fence_read_or_wait(&mut self, fence: &mut Fence) -> Option<FenceProgress> {
        match self.store_read(&mut fence.reads) {
            StoreRead::Answered => None,
            StoreRead::TimedOut => Some(FenceProgress::Next(self.config.store_timeout_ms)),
            StoreRead::Exhausted => Some(FenceProgress::Abort("STORE_UNAVAILABLE")),
        }
    }

    fn fence_read(&mut self, fence: &mut Fence) -> FenceProgress {
        let token = fence.token();
        if !self.config.store_supports_query {
            return self.fence_without_query(fence);
        }
        if let Some(wait) = self.fence_read_or_wait(fence) {
            return wait;
        }
        let observed = self.store.observe(token);
        fence.phase = match observed {
            Observed::Absent => {
                self.rec.outcome = "absent";
                FencePhase::Hide
            }
            Observed::Tombstone => {
                self.rec.outcome = "tombstone";
                FencePhase::Resolve
            }
            Observed::Present { version, hidden } => {
                self.rec.hash = Some(version.bytes_sha256);
                let good = self.artifact_is_good(
                    fence.task,
                    fence.attempt,
                    self.expected_sha(fence),
                    &version,
                );
                fence.bad = !good;
                if hidden {
                    self.rec.outcome = "hidden";
                    fence.hid_artifact = true;
                    FencePhase::Resolve
                } else if good {
                    let keep = self.keeps_verified(fence.purpose);
                    fence.used = keep;
                    self.rec.outcome = if keep {
                        "verified-used"
                    } else {
                        "verified-to-hide"
                    };
                    if keep {
                        FencePhase::Resolve
                    } else {
                        fence.compensating = true;
                        FencePhase::Hide
                    }
                } else {
                    self.rec.outcome = "bad";
                    fence.compensating = true;
                    FencePhase::Hide
                }
            }
        };
        FenceProgress::Next(self.latency())
    }

    /// A store that cannot be queried: only the ledger can say whether the
    /// effect happened. Verified rows are used; a row that never started an
    /// effect is tombstoned; anything else cannot be confirmed.
    fn fence_without_query(&mut self, fence: &mut Fence) -> FenceProgress {
        let state = self
            .db
            .task(fence.task)
            .effect(fence.token())
            .map(|row| row.state);
        match state {
            Some(EffectState::Verified) if self.keeps_verified(fence.purpose) => {
                fence.used = true;
                fence.phase = FencePhase::Resolve;
                self.rec.outcome = "verified-used";
                FenceProgress::Next(self.latency())
            }
            Some(EffectState::Planned) | None => {
                fence.phase = FencePhase::Hide;
                self.rec.outcome = "never-started";
                FenceProgress::Next(self.latency())
            }
            _ => self.fence_cannot_confirm(fence),
        }
    }

    fn fence_cannot_confirm(&mut self, fence: &Fence) -> FenceProgress {
        self.review_cannot_confirm(fence.task, fence.token());
        FenceProgress::Abort("STORE_CANNOT_CONFIRM")
    }

    fn fence_hide(&mut self, fence: &mut Fence) -> FenceProgress {
        // The check that sends a fence round again asks this first; a hide
        // the store refused sends it back through a read instead, which
        // may lead here with the budget spent.
        if fence.hides >= self.config.store_calls_max as u32 {
            self.rec.outcome = "STORE_UNAVAILABLE";
            return FenceProgress::Abort("STORE_UNAVAILABLE");
        }
        let token = fence.token();
        if fence.compensating {
            self.plan_compensation(fence);
        }
        let mode = if fence.compensating {
            HideMode::TakeBack
        } else {
            HideMode::TombstoneIfAbsent
        };
        let call = self.hide_call(token, &mut fence.hides, mode);
        fence.hid_artifact |= call.hid_artifact;
        fence.hide_answered = call.answered;
        if call.refused && !self.config.store_supports_query {
            // The store says an artifact is there and cannot be read: the
            // ledger, all the fence goes by, said none was. Going round
            // again would ask the same; a human settles it.
            return self.fence_cannot_confirm(fence);
        }
        // The attempt put its artifact since the fence read nothing there:
        // judged afresh, as a first read judges one.
        fence.phase = if call.refused {
            FencePhase::Read
        } else {
            FencePhase::Check
        };
        FenceProgress::Next(call.delay)
    }

    /// Writes the compensation's own ledger row (its token is the
    /// artifact's with the compensation kind), started, before the first
    /// hide call that takes a written artifact back: the cancel-wins hide
    /// of a verified artifact, or a corrupt one found by the fence. A worker
    /// that found its artifact corrupt wrote this row itself; the resolving
    /// transaction settles it once the hide was read back.
    fn plan_compensation(&mut self, fence: &Fence) {
        let request_sha256 = self.expected_sha(fence).unwrap_or([0; 32]);
        let compensation = LedgerRow::started_compensation(fence.token(), request_sha256);
        let row = self.db.task_mut(fence.task);
        if row.effect(compensation.token).is_none() {
            row.effects.push(compensation);
            self.sometimes("fence-compensation-planned");
        }
    }

    fn fence_check(&mut self, fence: &mut Fence) -> FenceProgress {
        if self.mutant == Some(crate::mutants::Mutant::UnverifiedCompensation) {
            fence.phase = FencePhase::Resolve;
            self.rec.outcome = "assumed-hidden";
            return FenceProgress::Next(self.latency());
        }
        if !self.config.store_supports_query {
            // Nothing to read back with: only the hide call's own answer
            // can say it is hidden.
            if fence.hide_answered {
                fence.phase = FencePhase::Resolve;
                self.rec.outcome = "hidden-by-answer";
                return FenceProgress::Next(self.latency());
            }
            return self.fence_cannot_confirm(fence);
        }
        if let Some(wait) = self.fence_read_or_wait(fence) {
            return wait;
        }
        match self.store.observe(fence.token()) {
            Observed::Tombstone | Observed::Present { hidden: true, .. } => {
                self.rec.outcome = "hidden";
                if !fence.hide_answered {
                    self.sometimes("hide-took-unanswered");
                }
                fence.phase = FencePhase::Resolve;
                FenceProgress::Next(self.latency())
            }
            // Written since the fence read it absent: the attempt it fences
            // put its artifact while the fence's tombstone timed out (before
            // it took, or refused as it found the artifact there). Hidden as
            // it stands, a written artifact would be taken back with no
            // compensation of its own in the ledger; judged afresh, as a
            // first read judges one, it is used if good and kept, or else
            // hidden as a compensation.
            Observed::Present { hidden: false, .. } if !fence.compensating => {
                self.rec.outcome = "written-since-read";
                fence.phase = FencePhase::Read;
                FenceProgress::Next(self.latency())
            }
            Observed::Absent | Observed::Present { hidden: false, .. } => {
                self.rec.outcome = "visible";
                if fence.hides >= self.config.store_calls_max as u32 {
                    return FenceProgress::Abort("STORE_UNAVAILABLE");
                }
                fence.phase = FencePhase::Hide;
                FenceProgress::Next(self.latency())
            }
        }
    }

    /// The settling transaction: the ledger row's final state and one
    /// command through the state machine.
    fn fence_resolve(
        &mut self,
        actor: ActorId,
        fence: &mut Fence,
        incarnation: u32,
    ) -> FenceProgress {
        if self.commit_fault() == Some(false) {
            return FenceProgress::Abort("crashed");
        }
        // The resolving transaction ends the attempt only while the lease
        // is still the one its claim took: a fence that paused or was
        // slowed past that lease, and whose attempt a redelivered worker
        // resumed or another fence claimed meanwhile, gives up here; the
        // next scan looks again. Whether the newer holder's lease is still
        // live does not matter: it ran out too does not make this fence's
        // reads newer than that claim.
        let lease = self.db.task(fence.task).lease;
        if lease.is_some_and(|lease| !lease.taken_by(actor, incarnation)) {
            self.rec.outcome = "lease-lost";
            self.sometimes("fence-lost-lease");
            return FenceProgress::Abort("lease-lost");
        }
        let token = fence.token();
        let expected = self.expected_sha(fence);
        let row = self.db.task_mut(fence.task);
        // A compensation a worker started and never finished is settled by
        // this fence: the artifact is now hidden (or was never there).
        for ledger in row.effects.iter_mut() {
            if ledger.token.kind == EffectKind::Compensation
                && ledger.token.attempt == fence.attempt
                && ledger.state.is_open()
            {
                ledger.state = if fence.used {
                    EffectState::Failed
                } else {
                    EffectState::Compensated
                };
            }
        }
        if let Some(ledger) = row.effect_mut(token) {
            if fence.used {
                ledger.state = EffectState::Verified;
                ledger.observed_sha256 = expected;
            } else if fence.hid_artifact {
                ledger.state = EffectState::Compensated;
                if fence.bad {
                    ledger.error_code = Some("ARTIFACT_HASH_MISMATCH");
                }
            } else if ledger.state.is_open() {
                ledger.state = EffectState::Failed;
                ledger.error_code = Some("FENCED");
            }
        }
        let command = if fence.used {
            Command::CompleteTask {
                attempt: fence.attempt,
                artifact_sha256: expected.unwrap_or([0; 32]),
            }
        } else {
            match fence.purpose {
                FencePurpose::Cancel | FencePurpose::CancelAfterRefusal => {
                    Command::ConfirmCancelled
                }
                FencePurpose::Retry if fence.bad => Command::FailTask {
                    attempt: fence.attempt,
                    error_code: "ARTIFACT_HASH_MISMATCH",
                },
                FencePurpose::Retry if u64::from(fence.attempt) < self.config.attempts_max => {
                    Command::FailAttempt {
                        attempt: fence.attempt,
                        error_code: "LEASE_EXPIRED",
                    }
                }
                FencePurpose::Retry => Command::FailTask {
                    attempt: fence.attempt,
                    error_code: "ATTEMPTS_EXHAUSTED",
                },
            }
        };
        let retry = matches!(command, Command::FailAttempt { .. });
        let outcome = self.execute(fence.task, fence.version, command);
        self.rec.outcome = outcome.code();
        match outcome {
            CommandOutcome::Committed { .. } | CommandOutcome::Duplicate { .. } => {
                if retry && matches!(outcome, CommandOutcome::Committed { .. }) {
                    let not_before = self.now + self.config.retry_backoff_ms;
                    self.insert_work_row(
                        fence.task,
                        WorkKind::TaskRetry,
                        fence.attempt + 1,
                        not_before,
                    );
                    self.sometimes("attempt-retried");
                }
                if self.db.task(fence.task).state.status == Status::Queued
                    || self.db.task(fence.task).state.status.is_terminal()
                {
                    self.drop_lease(fence.task);
                }
                if fence.hid_artifact {
                    self.sometimes("compensation");
                }
                FenceProgress::Done
            }
            CommandOutcome::VersionConflict => {
                if fence.purpose == FencePurpose::Retry {
                    self.race("cancel × attempt failure");
                }
                fence.phase = FencePhase::Claim;
                FenceProgress::Next(self.latency())
            }
            CommandOutcome::Rejected(_) | CommandOutcome::EventIdConflict => {
                FenceProgress::Abort("rejected")
            }
        }
    }
}
