//! The worker's effect (lesson 000 §7-§8): start the attempt, plan the
//! artifact in the ledger under a stable token, put, resolve an unknown
//! outcome by reading back, verify, and compensate a bad artifact.

use crate::faults::{FaultKind, Site};
use crate::mutants::Mutant;
use crate::world::World;
use crate::world::engine::ids::TaskId;
use crate::world::stores::db::{EffectKind, EffectState, LedgerRow, ReviewReason, Token};
use crate::world::stores::events::{Command, CommandOutcome};
use crate::world::stores::store::{Observed, Version};

use super::*;

impl World {
    /// `StartTask` through the event store, with the attempt's lease.
    pub(super) fn worker_start(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        let outcome = self.execute(
            job.task,
            job.version,
            Command::StartTask {
                attempt: job.attempt,
                worker: self.rec.actor,
                lease_until_ms: self.now + self.config.task_lease_ms,
            },
        );
        self.rec.outcome = outcome.code();
        match outcome {
            CommandOutcome::Committed { version } => {
                job.version = version;
                self.lease_attempt(job);
                self.renew_inbox(job);
                self.transform_then_plan(job)
            }
            CommandOutcome::VersionConflict | CommandOutcome::Duplicate { .. } => {
                self.race("two workers starting one task");
                Step::Next(WorkerPhase::Reload, self.latency())
            }
            CommandOutcome::Rejected(_) | CommandOutcome::EventIdConflict => {
                Step::Next(WorkerPhase::Reload, self.latency())
            }
        }
    }

    /// The transform runs once the attempt is the worker's (started or
    /// resumed): an input it rejects under the current handler version is
    /// poison and is classified now; anything else goes on to the effect.
    pub(super) fn transform_then_plan(&mut self, job: &Job) -> Step {
        let needed = self.db.task(job.task).input.handler_needed;
        if needed > self.handler_version {
            if self.mutant == Some(Mutant::UnboundedRequeue) {
                return Step::Next(WorkerPhase::Nack(POISON_CODE), self.latency());
            }
            return Step::Next(WorkerPhase::FailPoison(POISON_CODE), self.latency());
        }
        Step::Next(WorkerPhase::Plan, self.latency())
    }

    /// Plans the artifact effect in the ledger under its stable token.
    pub(super) fn worker_plan(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        if !self.holds_lease(job) {
            return self.let_go(job, "lease-lost");
        }
        let (sha, _) = self.expected_artifact(job.task);
        self.touched.tokens.push(job.token);
        let row = self.db.task_mut(job.task);
        let existing = row
            .effects
            .iter()
            .rfind(|ledger| {
                ledger.token.kind == EffectKind::Artifact && ledger.token.attempt == job.attempt
            })
            .cloned();
        match existing {
            None => {
                crate::world::stores::db::push_sized(
                    &mut row.effects,
                    1,
                    LedgerRow {
                        token: job.token,
                        state: EffectState::Started,
                        request_sha256: sha,
                        observed_sha256: None,
                        error_code: None,
                        fenced_by: None,
                    },
                );
                self.rec.outcome = "started";
                Step::Next(WorkerPhase::Put, self.latency())
            }
            Some(ledger) if ledger.fenced_by.is_some() => self.let_go(job, "fenced"),
            Some(ledger) => {
                job.token = ledger.token;
                self.rec.outcome = ledger.state.as_str();
                match ledger.state {
                    EffectState::Verified => Step::Next(WorkerPhase::Recheck, self.latency()),
                    EffectState::Unknown if !self.config.store_supports_query => {
                        self.cannot_confirm(job)
                    }
                    EffectState::Planned
                    | EffectState::Started
                    | EffectState::Unknown
                    | EffectState::Completed => {
                        if self.mutant == Some(Mutant::NewTokenOnRetry) {
                            self.renew_token(job);
                        }
                        Step::Next(WorkerPhase::Put, self.latency())
                    }
                    EffectState::CompensationRequired => {
                        Step::Next(WorkerPhase::Compensate, self.latency())
                    }
                    EffectState::Compensated | EffectState::Failed => self.let_go(job, "fenced"),
                }
            }
        }
    }

    /// An unknown outcome on a store without query support: no blind retry,
    /// a manual review.
    pub(super) fn cannot_confirm(&mut self, job: &mut Job) -> Step {
        self.review_cannot_confirm(job.task, job.token);
        job.result = None;
        Step::Next(WorkerPhase::Ack, self.latency())
    }

    /// A store without query support left the effect under `token`
    /// unknown: manual review, never a blind retry.
    pub(in crate::world) fn review_cannot_confirm(&mut self, task: TaskId, token: Token) {
        self.rec.outcome = "STORE_CANNOT_CONFIRM";
        self.touched.reviews.push(token);
        let subject = token.to_string();
        self.db.review(
            Some(task),
            ReviewReason::StoreCannotConfirm,
            subject,
            self.now,
        );
        self.sometimes("store-cannot-confirm");
    }

    /// Puts the artifact under the token.
    pub(super) fn worker_put(&mut self, job: &mut Job) -> Step {
        job.puts += 1;
        let (sha, size) = self.expected_artifact(job.task);
        let version = Version::plain(job.task, job.attempt, sha, size);
        self.touched.tokens.push(job.token);
        self.rec.hash = Some(sha);
        let overwrite = self.mutant == Some(Mutant::UnconditionalPut);
        let fault = self.fault(Site::StorePut);
        let written = match fault {
            Some(FaultKind::TimeoutBeforeCommit) => None,
            Some(FaultKind::Corrupt) => Some(crate::world::stores::store::corrupt_bytes(version)),
            Some(FaultKind::CorruptMetadata) => {
                let mut damaged = version;
                damaged.metadata.attempt += 1;
                Some(damaged)
            }
            _ => Some(version),
        };
        if let Some(written) = written {
            let new = self.store.put(job.token, written, overwrite);
            if !new {
                self.sometimes("put-returned-first-object");
            }
        }
        let timed_out = matches!(
            fault,
            Some(FaultKind::TimeoutAfterCommit) | Some(FaultKind::TimeoutBeforeCommit)
        );
        if timed_out {
            self.rec.outcome = "timeout";
            if self.mutant == Some(Mutant::TimeoutMeansNotExecuted) {
                // Treats the timeout as "not executed": fails the attempt
                // with no read-back and no fence.
                return self.fail_attempt_blindly(job);
            }
            return Step::Next(WorkerPhase::RecordUnknown, self.config.store_timeout_ms);
        }
        self.rec.outcome = "ok";
        if !self.config.store_supports_query || self.mutant == Some(Mutant::NoReadbackVerify) {
            // The put's own answer is all there is to go on.
            let good = self.mutant == Some(Mutant::NoReadbackVerify) || {
                let stored = self.store.get(job.token).and_then(|o| o.current().copied());
                stored.is_some_and(|v| self.artifact_is_good(job.task, job.attempt, Some(sha), &v))
            };
            return Step::Next(WorkerPhase::Verify { good }, self.latency());
        }
        Step::Next(WorkerPhase::ReadBack, self.latency())
    }

    /// Records the unknown outcome in the ledger before resolving it.
    pub(super) fn worker_record_unknown(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        if !self.holds_lease(job) {
            return self.let_go(job, "lease-lost");
        }
        let row = self.db.task_mut(job.task);
        let Some(ledger) = row.effect_mut(job.token) else {
            return self.let_go(job, "fenced");
        };
        if ledger.fenced_by.is_some() || !ledger.state.is_open() {
            return self.let_go(job, "fenced");
        }
        ledger.state = EffectState::Unknown;
        self.touched.tokens.push(job.token);
        self.rec.outcome = "unknown";
        if !self.config.store_supports_query {
            return self.cannot_confirm(job);
        }
        Step::Next(WorkerPhase::ReadBack, self.latency())
    }

    /// Reads the artifact back by the same token.
    pub(super) fn worker_read_back(&mut self, job: &mut Job) -> Step {
        // The configuration's store cannot be read by token: a worker that
        // reads it anyway trusts an answer the real store would not give.
        assert!(
            self.config.store_supports_query,
            "{} read back {} from a store without query support",
            self.rec.actor, job.token
        );
        if let Some(wait) = self.read_or_wait(job, WorkerPhase::ReadBack) {
            return wait;
        }
        let (sha, _) = self.expected_artifact(job.task);
        match self.store.observe(job.token) {
            Observed::Absent => {
                self.rec.outcome = "absent";
                if job.puts >= self.config.store_calls_max as u32 {
                    return Step::Next(WorkerPhase::Nack("STORE_UNAVAILABLE"), self.latency());
                }
                if self.mutant == Some(Mutant::NewTokenOnRetry) {
                    self.renew_token(job);
                }
                self.sometimes("put-retried-same-token");
                Step::Next(WorkerPhase::Put, self.latency())
            }
            Observed::Tombstone | Observed::Present { hidden: true, .. } => {
                self.let_go(job, "fenced")
            }
            Observed::Present { version, .. } => {
                self.rec.hash = Some(version.bytes_sha256);
                let good = self.artifact_is_good(job.task, job.attempt, Some(sha), &version);
                self.rec.outcome = if good { "matches" } else { "MISMATCH" };
                Step::Next(WorkerPhase::Verify { good }, self.latency())
            }
        }
    }

    /// The ledger says `verified`, or `compensation_required` with a
    /// compensation entry of its own.
    pub(super) fn worker_verify(&mut self, job: &mut Job, good: bool) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        if !self.holds_lease(job) {
            return self.let_go(job, "lease-lost");
        }
        let observed = self
            .store
            .get(job.token)
            .and_then(|object| object.current())
            .map(|version| version.bytes_sha256);
        self.touched.tokens.push(job.token);
        let task = job.task;
        let token = job.token;
        let row = self.db.task_mut(task);
        let Some(ledger) = row.effect_mut(token) else {
            return self.let_go(job, "fenced");
        };
        if ledger.fenced_by.is_some() || !ledger.state.is_open() {
            return self.let_go(job, "fenced");
        }
        let was_unknown = ledger.state == EffectState::Unknown;
        ledger.observed_sha256 = observed;
        if good {
            ledger.state = EffectState::Verified;
            self.rec.outcome = "verified";
            if was_unknown {
                self.sometimes("unknown-effect-verified");
            }
            return Step::Next(WorkerPhase::Recheck, self.latency());
        }
        ledger.state = EffectState::CompensationRequired;
        ledger.error_code = Some("ARTIFACT_HASH_MISMATCH");
        let request_sha256 = ledger.request_sha256;
        row.effects
            .push(LedgerRow::started_compensation(token, request_sha256));
        self.rec.outcome = "compensation_required";
        if self.mutant == Some(Mutant::NoCompensation) {
            return Step::Next(WorkerPhase::Fail, self.latency());
        }
        Step::Next(WorkerPhase::Compensate, self.latency())
    }

    /// Hides the bad artifact (the compensation's store call).
    pub(super) fn worker_compensate(&mut self, job: &mut Job) -> Step {
        let call = self.hide_call(job.token, &mut job.hides, HideMode::TakeBack);
        job.hide_answered = call.answered;
        let delay = call.delay;
        if self.mutant == Some(Mutant::UnverifiedCompensation) {
            return Step::Next(WorkerPhase::Fail, delay);
        }
        Step::Next(WorkerPhase::CheckHidden, delay)
    }

    /// One `store.hide` call under `token`, counted in `hides`: whether the
    /// store answered (a timeout leaves the outcome unknown), whether it
    /// hid a written artifact or refused to, and when to look next (a
    /// latency after an answer, the store timeout after none). `mode` says
    /// what the caller meant: to take back the artifact it found, or to
    /// leave a tombstone where it found nothing.
    pub(in crate::world) fn hide_call(
        &mut self,
        token: Token,
        hides: &mut u32,
        mode: HideMode,
    ) -> HideCall {
        *hides += 1;
        self.touched.tokens.push(token);
        let had_artifact = matches!(self.store.observe(token), Observed::Present { .. });
        // A tombstone is a conditional create, as a put is: an artifact
        // written since the caller read nothing there stays as it is.
        let refused = mode == HideMode::TombstoneIfAbsent && had_artifact;
        let answered = match self.fault(Site::StoreHide) {
            Some(FaultKind::TimeoutBeforeCommit) => {
                self.rec.outcome = "timeout";
                false
            }
            Some(FaultKind::TimeoutAfterCommit) => {
                if !refused {
                    self.store.hide(token);
                }
                self.rec.outcome = "timeout";
                false
            }
            _ => {
                self.rec.outcome = if refused {
                    "exists"
                } else {
                    self.store.hide(token);
                    if had_artifact { "hidden" } else { "tombstoned" }
                };
                true
            }
        };
        let delay = if answered {
            self.latency()
        } else {
            self.config.store_timeout_ms
        };
        HideCall {
            answered,
            hid_artifact: had_artifact && !refused,
            refused: answered && refused,
            delay,
        }
    }

    /// Whether a store read goes through or meets the `store.read` timeout
    /// fault; a timed-out read counts in `reads`, and the last one allowed
    /// (`store_calls_max`) exhausts the store.
    pub(in crate::world) fn store_read(&mut self, reads: &mut u32) -> StoreRead {
        if self.fault(Site::StoreRead) != Some(FaultKind::Timeout) {
            return StoreRead::Answered;
        }
        *reads += 1;
        self.rec.outcome = "timeout";
        if *reads >= self.config.store_calls_max as u32 {
            StoreRead::Exhausted
        } else {
            StoreRead::TimedOut
        }
    }

    /// A store read for the job: `None` when it goes through, else the step
    /// after a timeout (`again`, or giving the delivery back once the
    /// store is exhausted), both after the store timeout.
    pub(super) fn read_or_wait(&mut self, job: &mut Job, again: WorkerPhase) -> Option<Step> {
        let timeout = self.config.store_timeout_ms;
        match self.store_read(&mut job.reads) {
            StoreRead::Answered => None,
            StoreRead::TimedOut => Some(Step::Next(again, timeout)),
            StoreRead::Exhausted => {
                Some(Step::Next(WorkerPhase::Nack("STORE_UNAVAILABLE"), timeout))
            }
        }
    }

    /// Reads back that the artifact is hidden before the ledger says so.
    pub(super) fn worker_check_hidden(&mut self, job: &mut Job) -> Step {
        if !self.config.store_supports_query {
            // Only the hide call's own answer can say it is hidden.
            if job.hide_answered {
                self.rec.outcome = "hidden-by-answer";
                return Step::Next(WorkerPhase::Fail, self.latency());
            }
            return self.cannot_confirm(job);
        }
        if let Some(wait) = self.read_or_wait(job, WorkerPhase::CheckHidden) {
            return wait;
        }
        match self.store.observe(job.token) {
            Observed::Present { hidden: false, .. } | Observed::Absent => {
                self.rec.outcome = "visible";
                if job.hides >= self.config.store_calls_max as u32 {
                    return Step::Next(WorkerPhase::Nack("STORE_UNAVAILABLE"), self.latency());
                }
                Step::Next(WorkerPhase::Compensate, self.latency())
            }
            Observed::Present { hidden: true, .. } | Observed::Tombstone => {
                self.rec.outcome = "hidden";
                if !job.hide_answered {
                    self.sometimes("hide-took-unanswered");
                }
                Step::Next(WorkerPhase::Fail, self.latency())
            }
        }
    }
}
