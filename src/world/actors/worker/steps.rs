//! The worker's steps on a task-work delivery, from inbox registration to ack (see the parent file for the phases).

use crate::faults::{FaultKind, Site};
use crate::hash::Sha;
use crate::mutants::Mutant;
use crate::task::Status;
use crate::world::World;
use crate::world::actors::fence::{Fence, FenceProgress, FencePurpose};
use crate::world::engine::ids::{ActorId, ActorKind, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::db::{
    EffectKind, EffectState, InboxRow, InboxState, Lease, LedgerRow, Payload, ProcessResult,
    ReviewReason, Token,
};
use crate::world::stores::events::{Command, CommandOutcome};
use crate::world::stores::store::{Observed, Version};

use super::*;

impl World {
    /// The artifact a task's transform produces (computed once per task).
    pub fn expected_artifact(&mut self, task: TaskId) -> (Sha, u64) {
        if let Some(artifact) = self.db.task(task).artifact {
            return artifact;
        }
        let artifact = artifact_for(task, &self.db.task(task).input.canonical);
        self.db.task_mut(task).artifact = Some(artifact);
        artifact
    }

    /// Read-back verification: task id, attempt, size and SHA-256 of both
    /// the bytes and the metadata.
    pub fn artifact_is_good(
        &mut self,
        task: TaskId,
        attempt: u32,
        expected: Option<Sha>,
        version: &Version,
    ) -> bool {
        let (sha, size) = self.expected_artifact(task);
        let Some(expected) = expected else {
            return false;
        };
        expected == sha && *version == Version::plain(task, attempt, sha, size)
    }

    fn worker_actor(index: usize) -> ActorId {
        ActorId::new(ActorKind::Worker, index as u16)
    }

    pub(in crate::world) fn worker_step(&mut self, index: usize, poked: bool) -> bool {
        if self.workers[index].phase == WorkerPhase::Idle {
            return poked && self.worker_take(index);
        }
        if poked {
            return false;
        }
        let actor = World::worker_actor(index);
        let phase = self.workers[index].phase.clone();
        let mut job = self.workers[index]
            .job
            .take()
            .expect("a busy worker has a job");
        self.begin(actor, verb_of(&phase, &job));
        self.rec.task = Some(job.task);
        self.rec.message = Some(job.delivery.message);
        self.rec.entry = Some(job.delivery.entry);
        self.rec.attempt = job.attempt;
        let next = match phase {
            WorkerPhase::Idle => unreachable!("handled above"),
            WorkerPhase::Register => {
                self.touch_delivery(&job, DeliveryAct::Register);
                self.worker_register(&mut job)
            }
            WorkerPhase::Start => self.worker_start(&mut job),
            WorkerPhase::Plan => self.worker_plan(&mut job),
            WorkerPhase::Put => self.worker_put(&mut job),
            WorkerPhase::RecordUnknown => self.worker_record_unknown(&mut job),
            WorkerPhase::ReadBack => self.worker_read_back(&mut job),
            WorkerPhase::Verify { good } => self.worker_verify(&mut job, good),
            WorkerPhase::Recheck => self.worker_recheck(&mut job),
            WorkerPhase::Reload => self.worker_reload(&mut job),
            WorkerPhase::Complete => self.worker_complete(&mut job),
            WorkerPhase::Ack => self.worker_ack(&mut job),
            WorkerPhase::Nack(code) => self.worker_nack(&mut job, code),
            WorkerPhase::Quarantine => self.worker_quarantine(&mut job),
            WorkerPhase::FailPoison(code) => self.worker_fail_poison(&mut job, code),
            WorkerPhase::DeadLetter(code) => self.worker_dead_letter(&mut job, code),
            WorkerPhase::Compensate => self.worker_compensate(&mut job),
            WorkerPhase::CheckHidden => self.worker_check_hidden(&mut job),
            WorkerPhase::Fail => self.worker_fail(&mut job),
            WorkerPhase::Fence => self.worker_fence(&mut job),
        };
        self.settle(index, job, next);
        true
    }

    /// After a step: record it, then go on to the next phase or fall idle.
    fn settle(&mut self, index: usize, job: Box<Job>, next: Step) {
        let crashed = self.crash_now.is_some();
        match next {
            Step::Next(phase, delay) if !crashed => {
                if phase_processes(&phase) {
                    self.touch_delivery(&job, DeliveryAct::Work);
                }
                self.workers[index].phase = phase;
                self.workers[index].job = Some(job);
                self.finish();
                if self.workers[index].life.up {
                    self.continue_after(World::worker_actor(index), delay);
                }
            }
            Step::Next(..) | Step::Done => {
                if crashed {
                    self.touch_delivery(&job, DeliveryAct::Drop);
                }
                self.workers[index].phase = WorkerPhase::Idle;
                self.finish();
                self.worker_idle(index);
            }
        }
    }

    fn touch_delivery(&mut self, job: &Job, act: DeliveryAct) {
        self.touched.deliveries.push(DeliveryTouch {
            delivery: job.delivery_id,
            message: job.delivery.message,
            payload_sha256: job.delivery.payload_sha256,
            act,
        });
    }

    /// A worker fell idle: take what is in its mailbox, or ask the broker.
    fn worker_idle(&mut self, index: usize) {
        let worker = &self.workers[index];
        if !worker.life.up {
            return;
        }
        match worker.mailbox.iter().map(|(arrival, _, _)| *arrival).min() {
            Some(arrival) => {
                let at = arrival.max(self.now);
                self.poke(World::worker_actor(index), at);
            }
            None => self.poke_broker(self.now),
        }
    }

    /// Takes the next arrived delivery and registers it: the first step of
    /// processing is the inbox transaction.
    fn worker_take(&mut self, index: usize) -> bool {
        let now = self.now;
        let worker = &mut self.workers[index];
        let Some(position) = worker
            .mailbox
            .iter()
            .enumerate()
            .filter(|(_, (arrival, _, _))| *arrival <= now)
            .min_by_key(|(_, (arrival, id, _))| (*arrival, *id))
            .map(|(position, _)| position)
        else {
            self.worker_idle(index);
            return false;
        };
        let (_, delivery_id, delivery) = worker.mailbox.remove(position);
        let Payload::Work { task, attempt, .. } = delivery.payload else {
            unreachable!("workers only consume task-work");
        };
        let mut job = Box::new(Job {
            delivery_id,
            task,
            attempt,
            version: 0,
            token: Token {
                task,
                attempt,
                kind: EffectKind::Artifact,
                generation: 0,
            },
            puts: 0,
            reads: 0,
            hides: 0,
            hide_answered: false,
            result: None,
            fence: None,
            delivery,
        });
        let actor = World::worker_actor(index);
        if self.mutant == Some(Mutant::AckBeforeProcess) {
            // Acks on receipt, then processes: a crash now loses the work.
            self.begin(actor, Verb::Ack);
            self.rec.task = Some(task);
            self.rec.entry = Some(job.delivery.entry);
            self.broker.ack(job.delivery.entry);
            self.touched.entries.push(job.delivery.entry);
            self.rec.outcome = "acked-on-receipt";
            let delay = self.latency();
            self.settle(index, job, Step::Next(WorkerPhase::Register, delay));
            return true;
        }
        self.begin(actor, Verb::Register);
        self.rec.task = Some(task);
        self.rec.message = Some(job.delivery.message);
        self.rec.entry = Some(job.delivery.entry);
        self.rec.attempt = attempt;
        self.rec.hash = Some(job.delivery.payload_sha256);
        self.touch_delivery(&job, DeliveryAct::Register);
        let next = self.worker_register(&mut job);
        self.settle(index, job, next);
        true
    }

    /// The inbox transaction (DESIGN §3 Process step 1), which also reads
    /// the task and decides (step 2).
    fn worker_register(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        let now = self.now;
        let (actor, incarnation) = self.worker_holder();
        let message = job.delivery.message;
        let hash = job.delivery.payload_sha256;
        let lease = Some((actor, incarnation, now + self.config.inbox_lease_ms));
        let dedupe = self.mutant != Some(Mutant::NoInboxDedupe);
        match self.db.inbox.get(message).cloned() {
            Some(row) if dedupe && row.payload_sha256 != hash => {
                if self.mutant == Some(Mutant::NoInboxHashCheck) {
                    // Treated as a plain duplicate.
                    if let Some(result) = row.result.filter(|_| row.state.is_final()) {
                        job.result = Some(result);
                        self.rec.outcome = "duplicate";
                        return Step::Next(WorkerPhase::Ack, self.latency());
                    }
                    self.rec.outcome = "in-progress";
                    self.touch_delivery(job, DeliveryAct::Drop);
                    return Step::Done;
                }
                self.rec.outcome = "MESSAGE_ID_PAYLOAD_CONFLICT";
                self.db.review(
                    Some(job.task),
                    ReviewReason::MessageIdPayloadConflict,
                    message.to_string(),
                    now,
                );
                self.sometimes("inbox-conflict-quarantined");
                return Step::Next(WorkerPhase::Quarantine, self.latency());
            }
            Some(row) if dedupe && row.state.is_final() => {
                job.result = row.result;
                self.rec.outcome = "duplicate";
                self.sometimes("duplicate-absorbed-by-inbox");
                return Step::Next(WorkerPhase::Ack, self.latency());
            }
            Some(row) if dedupe => {
                let held = row.lease.is_some_and(|(holder, inc, until)| {
                    until > now && (holder, inc) != (actor, incarnation)
                });
                if held {
                    self.rec.outcome = "lease-held";
                    self.sometimes("inbox-lease-held");
                    self.touch_delivery(job, DeliveryAct::Drop);
                    return Step::Done;
                }
                self.db.inbox.get_mut(message).expect("row exists").lease = lease;
            }
            _ => {
                self.db.inbox.insert(
                    message,
                    InboxRow {
                        message,
                        payload_sha256: hash,
                        state: InboxState::Processing,
                        result: None,
                        lease,
                        first_seen_ms: now,
                        completed_ms: None,
                    },
                );
                self.touched.inbox.push(message);
            }
        }
        self.touched.entries.push(job.delivery.entry);
        self.decide(job)
    }

    /// Reads the task and decides what this delivery means now (DESIGN §3
    /// Process step 2). Part of the inbox transaction or of a reload.
    fn decide(&mut self, job: &mut Job) -> Step {
        let now = self.now;
        let (actor, incarnation) = self.worker_holder();
        let state = StateSeen::of(&self.db.task(job.task).state);
        job.version = state.version;
        self.rec.version = Some(state.version);
        let attempt = i64::from(job.attempt);
        let lease = self.db.task(job.task).lease;
        let lease_held_elsewhere = lease
            .is_some_and(|l| l.until_ms > now && (l.holder, l.incarnation) != (actor, incarnation));
        match state.status {
            Status::Queued if state.attempt + 1 == attempt => {
                self.rec.outcome = "start";
                Step::Next(WorkerPhase::Start, self.latency())
            }
            Status::Running | Status::Cancelling if state.attempt == attempt => {
                if lease_held_elsewhere {
                    self.rec.outcome = "lease-held";
                    self.race("two workers starting one task");
                    self.touch_delivery(job, DeliveryAct::Drop);
                    return Step::Done;
                }
                self.lease_attempt(job);
                if state.status == Status::Cancelling {
                    self.rec.outcome = "cancelling";
                    job.fence = Some(Fence::new(job.task, job.attempt, FencePurpose::Cancel));
                    return Step::Next(WorkerPhase::Fence, self.latency());
                }
                self.rec.outcome = "resume";
                self.sometimes("attempt-resumed");
                self.transform_then_plan(job)
            }
            _ => {
                // Terminal, or an attempt the task has moved past.
                let result = settled_result(job.task, job.attempt, state);
                job.result = Some(result);
                self.finalize_inbox(job, InboxState::Completed);
                self.rec.outcome = "superseded";
                self.sometimes("stale-message-superseded");
                Step::Next(WorkerPhase::Ack, self.latency())
            }
        }
    }

    /// `StartTask` through the event store, with the attempt's lease.
    fn worker_start(&mut self, job: &mut Job) -> Step {
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
    fn transform_then_plan(&mut self, job: &Job) -> Step {
        let needed = self.db.task(job.task).input.handler_needed;
        if needed > self.handler_version {
            if self.mutant == Some(Mutant::UnboundedRequeue) {
                return Step::Next(WorkerPhase::Nack("UNSUPPORTED_FORMAT"), self.latency());
            }
            return Step::Next(
                WorkerPhase::FailPoison("UNSUPPORTED_FORMAT"),
                self.latency(),
            );
        }
        Step::Next(WorkerPhase::Plan, self.latency())
    }

    /// The worker taking this step, and its incarnation: who holds what
    /// it leases.
    fn worker_holder(&self) -> (ActorId, u32) {
        let actor = self.rec.actor;
        (actor, self.workers[actor.index as usize].life.incarnation)
    }

    fn renew_inbox(&mut self, job: &Job) {
        let (actor, incarnation) = self.worker_holder();
        let until = self.now + self.config.inbox_lease_ms;
        if let Some(row) = self.db.inbox.get_mut(job.delivery.message)
            && !row.state.is_final()
        {
            row.lease = Some((actor, incarnation, until));
        }
    }

    /// Whether this worker still holds the attempt's lease; renews it.
    fn holds_lease(&mut self, job: &Job) -> bool {
        let (actor, incarnation) = self.worker_holder();
        let lease = self.db.task(job.task).lease;
        let mine = lease.is_some_and(|l| {
            (l.holder, l.incarnation, l.attempt) == (actor, incarnation, job.attempt)
                && l.until_ms >= self.now
        });
        if mine {
            self.lease_attempt(job);
            self.renew_inbox(job);
        }
        mine
    }

    /// The attempt's lease, held by this worker's incarnation.
    fn lease_attempt(&mut self, job: &Job) {
        let (holder, incarnation) = self.worker_holder();
        self.grant_lease(job.task, job.attempt, holder, incarnation);
    }

    /// Gives `attempt` of `task` to `holder`'s incarnation for
    /// `task_lease_ms` from now (a worker's attempt, or a fence's claim).
    pub(in crate::world) fn grant_lease(
        &mut self,
        task: TaskId,
        attempt: u32,
        holder: ActorId,
        incarnation: u32,
    ) {
        let lease = Lease {
            attempt,
            holder,
            incarnation,
            until_ms: self.now + self.config.task_lease_ms,
        };
        self.db.set_lease(task, Some(lease));
    }

    /// Let the delivery go: the lease moved on or a fence claimed the effect.
    fn let_go(&mut self, job: &Job, why: &'static str) -> Step {
        self.rec.outcome = why;
        self.race("reconciler × worker");
        self.touch_delivery(job, DeliveryAct::Drop);
        Step::Done
    }

    /// Plans the artifact effect in the ledger under its stable token.
    fn worker_plan(&mut self, job: &mut Job) -> Step {
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
                row.effects.push(LedgerRow {
                    token: job.token,
                    state: EffectState::Started,
                    request_sha256: sha,
                    observed_sha256: None,
                    error_code: None,
                    fenced_by: None,
                });
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

    /// `new-token-on-retry`: the retried effect gets a fresh token, and the
    /// ledger row follows it.
    fn renew_token(&mut self, job: &mut Job) {
        job.token.generation += 1;
        let token = job.token;
        if let Some(ledger) = self
            .db
            .task_mut(job.task)
            .effects
            .iter_mut()
            .rfind(|l| l.token.kind == EffectKind::Artifact && l.token.attempt == job.attempt)
        {
            ledger.token = token;
        }
    }

    /// An unknown outcome on a store without query support: no blind retry,
    /// a manual review.
    fn cannot_confirm(&mut self, job: &mut Job) -> Step {
        self.review_cannot_confirm(job.task, job.token);
        job.result = None;
        Step::Next(WorkerPhase::Ack, self.latency())
    }

    /// A store without query support left the effect under `token`
    /// unknown: manual review, never a blind retry.
    pub(in crate::world) fn review_cannot_confirm(&mut self, task: TaskId, token: Token) {
        self.rec.outcome = "STORE_CANNOT_CONFIRM";
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
    fn worker_put(&mut self, job: &mut Job) -> Step {
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

    fn fail_attempt_blindly(&mut self, job: &mut Job) -> Step {
        let command = if u64::from(job.attempt) < self.config.attempts_max {
            Command::FailAttempt {
                attempt: job.attempt,
                error_code: "STORE_TIMEOUT",
            }
        } else {
            Command::FailTask {
                attempt: job.attempt,
                error_code: "STORE_TIMEOUT",
            }
        };
        let retry = matches!(command, Command::FailAttempt { .. });
        if let CommandOutcome::Committed { .. } = self.execute(job.task, job.version, command) {
            if retry {
                let not_before = self.now + self.config.retry_backoff_ms;
                self.insert_work_row(
                    job.task,
                    crate::world::stores::db::WorkKind::TaskRetry,
                    job.attempt + 1,
                    not_before,
                );
            }
            self.db.set_lease(job.task, None);
        }
        job.result = Some(ProcessResult::Superseded { task: job.task });
        self.finalize_inbox(job, InboxState::Completed);
        Step::Next(WorkerPhase::Ack, self.latency())
    }

    /// Records the unknown outcome in the ledger before resolving it.
    fn worker_record_unknown(&mut self, job: &mut Job) -> Step {
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
    fn worker_read_back(&mut self, job: &mut Job) -> Step {
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
    fn worker_verify(&mut self, job: &mut Job, good: bool) -> Step {
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
        let compensation = Token {
            kind: EffectKind::Compensation,
            ..token
        };
        let request_sha256 = ledger.request_sha256;
        row.effects.push(LedgerRow {
            token: compensation,
            state: EffectState::Started,
            request_sha256,
            observed_sha256: None,
            error_code: None,
            fenced_by: None,
        });
        self.rec.outcome = "compensation_required";
        if self.mutant == Some(Mutant::NoCompensation) {
            return Step::Next(WorkerPhase::Fail, self.latency());
        }
        Step::Next(WorkerPhase::Compensate, self.latency())
    }

    /// Hides the bad artifact (the compensation's store call).
    fn worker_compensate(&mut self, job: &mut Job) -> Step {
        let call = self.hide_call(job.token, &mut job.hides);
        job.hide_answered = call.answered;
        let delay = call.delay;
        if self.mutant == Some(Mutant::UnverifiedCompensation) {
            return Step::Next(WorkerPhase::Fail, delay);
        }
        Step::Next(WorkerPhase::CheckHidden, delay)
    }

    /// One `store.hide` call under `token` (a tombstone if nothing is
    /// there), counted in `hides`: whether the store answered (a timeout
    /// leaves the outcome unknown), whether an artifact was there to hide,
    /// and when to look next (a latency after an answer, the store timeout
    /// after none).
    pub(in crate::world) fn hide_call(&mut self, token: Token, hides: &mut u32) -> HideCall {
        *hides += 1;
        self.touched.tokens.push(token);
        let had_artifact = matches!(self.store.observe(token), Observed::Present { .. });
        let answered = match self.fault(Site::StoreHide) {
            Some(FaultKind::TimeoutBeforeCommit) => {
                self.rec.outcome = "timeout";
                false
            }
            Some(FaultKind::TimeoutAfterCommit) => {
                self.store.hide(token);
                self.rec.outcome = "timeout";
                false
            }
            _ => {
                self.store.hide(token);
                self.rec.outcome = if had_artifact { "hidden" } else { "tombstoned" };
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
            had_artifact,
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
    fn read_or_wait(&mut self, job: &mut Job, again: WorkerPhase) -> Option<Step> {
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
    fn worker_check_hidden(&mut self, job: &mut Job) -> Step {
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
                Step::Next(WorkerPhase::Fail, self.latency())
            }
        }
    }

    /// Compensation verified: ledger compensated, `TaskFailed` with
    /// `ARTIFACT_HASH_MISMATCH`, inbox failed — one transaction.
    fn worker_fail(&mut self, job: &mut Job) -> Step {
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
                self.db.set_lease(job.task, None);
                Step::Next(WorkerPhase::Ack, self.latency())
            }
            _ => Step::Next(WorkerPhase::Reload, self.latency()),
        }
    }

    /// Re-reads the task after a conflict (reload) or before completing
    /// (recheck: a cancellation may have arrived, DESIGN §3 step 7).
    fn worker_reload(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        self.decide_after_reload(job)
    }

    fn worker_recheck(&mut self, job: &mut Job) -> Step {
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
    fn decide_after_reload(&mut self, job: &mut Job) -> Step {
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
    fn worker_complete(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        let observed = match self.db.task(job.task).effect(job.token) {
            Some(l) if l.state == EffectState::Verified => l.observed_sha256,
            _ => return self.let_go(job, "not-verified"),
        };
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

    fn finalize_inbox(&mut self, job: &Job, state: InboxState) {
        let now = self.now;
        if let Some(row) = self.db.inbox.get_mut(job.delivery.message)
            && row.payload_sha256 == job.delivery.payload_sha256
        {
            row.state = state;
            row.result = job.result;
            row.completed_ms = Some(now);
            row.lease = None;
            self.touched.inbox.push(job.delivery.message);
        }
    }

    /// The cancellation path: fence, then settle.
    fn worker_fence(&mut self, job: &mut Job) -> Step {
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
    fn worker_fail_poison(&mut self, job: &mut Job, code: &'static str) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
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
                self.db.set_lease(job.task, None);
                Step::Next(WorkerPhase::DeadLetter(code), self.latency())
            }
            _ => Step::Next(WorkerPhase::Reload, self.latency()),
        }
    }

    /// Copies the poison message to the dead-letter queue.
    fn worker_dead_letter(&mut self, job: &mut Job, code: &'static str) -> Step {
        let entry = self.broker.entries.get(job.delivery.entry).cloned();
        let entry = entry.unwrap_or_else(|| crate::world::stores::broker::Entry {
            id: job.delivery.entry,
            topic: job.delivery.topic,
            message: job.delivery.message,
            task: job.task,
            payload: job.delivery.payload.clone(),
            payload_sha256: job.delivery.payload_sha256,
            deliveries: job.delivery.count,
            state: crate::world::stores::broker::EntryState::Ready {
                visible_ms: self.now,
            },
            last_error: None,
        });
        let id = self
            .broker
            .push_dead_letter(&entry, code, self.handler_version, self.now);
        self.rec.outcome = "dead-lettered";
        self.rec.version = Some(i64::from(id.0));
        self.sometimes("poison-dead-lettered");
        self.schedule_reconcile();
        Step::Next(WorkerPhase::Ack, self.latency())
    }

    /// Acks the delivery (the ack may be lost on the way).
    fn worker_ack(&mut self, job: &mut Job) -> Step {
        self.touch_delivery(job, DeliveryAct::Ack(job.result));
        self.touched.entries.push(job.delivery.entry);
        if self.fault(Site::WorkerAck) == Some(FaultKind::AckLost) {
            self.rec.outcome = "ack-lost";
            return Step::Done;
        }
        let acked = self.broker.ack(job.delivery.entry);
        self.rec.outcome = match (acked, job.result) {
            (false, _) => "already-gone",
            (true, Some(result)) => result.as_str(),
            (true, None) => "acked",
        };
        Step::Done
    }

    fn worker_nack(&mut self, job: &mut Job, code: &'static str) -> Step {
        self.touch_delivery(job, DeliveryAct::Nack);
        self.touched.entries.push(job.delivery.entry);
        let visible = self.now + self.config.nack_delay_ms;
        self.broker.nack(job.delivery.entry, visible, code);
        self.rec.outcome = code;
        self.poke_broker(visible);
        Step::Done
    }

    /// Rejects a conflicting delivery to the dead-letter queue.
    fn worker_quarantine(&mut self, job: &mut Job) -> Step {
        self.touch_delivery(job, DeliveryAct::Quarantine);
        self.touched.entries.push(job.delivery.entry);
        let entry = job.delivery.entry;
        if self.broker.entries.contains(entry) {
            self.broker.dead_letter(
                entry,
                "MESSAGE_ID_PAYLOAD_CONFLICT",
                self.handler_version,
                self.now,
            );
            self.rec.outcome = "dead-lettered";
        } else {
            self.rec.outcome = "already-gone";
        }
        Step::Done
    }
}

impl Job {
    fn version_now(&self, world: &World) -> i64 {
        world.db.task(self.task).state.version
    }
}
