//! Code that runs only with a named mutant on: the worker's planted bugs
//! (a fresh token per retry, a timeout taken as not executed, an ack on
//! receipt, a conflict taken as a duplicate). Kept out of cargo-mutants'
//! scope (a mutant of a planted bug is not a bug of the protocol; README,
//! Mutation testing).

use crate::world::World;
use crate::world::engine::step::Verb;
use crate::world::stores::db::{EffectKind, InboxRow, InboxState, ProcessResult};
use crate::world::stores::events::{Command, CommandOutcome};

use super::*;

impl World {
    /// `new-token-on-retry`: the retried effect gets a fresh token, and the
    /// ledger row follows it.
    pub(super) fn renew_token(&mut self, job: &mut Job) {
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

    /// `timeout-means-not-executed`: a timed-out put is taken as never
    /// executed, and the attempt failed with no read-back and no fence.
    pub(super) fn fail_attempt_blindly(&mut self, job: &mut Job) -> Step {
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

    /// `ack-before-process`: acks on receipt, then processes; a crash now
    /// loses the work.
    pub(super) fn ack_on_receipt(&mut self, index: usize, job: Box<Job>) {
        let task = job.task;
        self.begin(World::worker_actor(index), Verb::Ack);
        self.rec.task = Some(task);
        self.rec.entry = Some(job.delivery.entry);
        self.broker.ack(job.delivery.entry);
        self.touched.entries.push(job.delivery.entry);
        self.rec.outcome = "acked-on-receipt";
        let delay = self.latency();
        self.settle(index, job, Step::Next(WorkerPhase::Register, delay));
    }

    /// `no-inbox-hash-check`: a message id met again with another payload
    /// is treated as a plain duplicate.
    pub(super) fn conflict_as_duplicate(&mut self, job: &mut Job, row: &InboxRow) -> Step {
        if let Some(result) = row.result.filter(|_| row.state.is_final()) {
            job.result = Some(result);
            self.rec.outcome = "duplicate";
            return Step::Next(WorkerPhase::Ack, self.latency());
        }
        self.rec.outcome = "in-progress";
        self.touch_delivery(job, DeliveryAct::Drop);
        Step::Done
    }
}
