//! The worker's inbox steps (lesson 000 §6): register a delivery with its
//! payload hash under a processing lease, answer a duplicate with the
//! recorded result, quarantine a conflicting payload, ack, nack, dead-letter.

use crate::faults::{FaultKind, Site};
use crate::mutants::Mutant;
use crate::task::Status;
use crate::world::World;
use crate::world::actors::fence::{Fence, FencePurpose};
use crate::world::engine::ids::OutboxId;
use crate::world::stores::db::{InboxLease, InboxRow, InboxState, ProcessResult, ReviewReason};
use crate::world::windows::Held;

use super::*;

impl World {
    /// The inbox transaction (DESIGN §3 Process step 1), which also reads
    /// the task and decides (step 2).
    pub(super) fn worker_register(&mut self, job: &mut Job) -> Step {
        if self.commit_fault() == Some(false) {
            return Step::Done;
        }
        let now = self.now;
        let (actor, incarnation) = self.worker_holder();
        let message = job.delivery.message;
        self.taken_over(Held::Message(message));
        let hash = job.delivery.payload_sha256;
        let lease = Some(InboxLease {
            holder: actor,
            incarnation,
            until_ms: now + self.config.inbox_lease_ms,
        });
        let dedupe = self.mutant != Some(Mutant::NoInboxDedupe);
        match self.db.inbox.get(message).cloned() {
            Some(row) if dedupe && row.payload_sha256 != hash => {
                if self.mutant == Some(Mutant::NoInboxHashCheck) {
                    return self.conflict_as_duplicate(job, &row);
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
                // A poison failure owes the message to the dead-letter
                // queue. A worker that crashed between committing the
                // failure and copying the message left it unpaid: the
                // duplicate pays it before its ack, or the dead letter is
                // lost for good (nothing to inspect, nothing to replay).
                if let Some(ProcessResult::Failed { code, .. }) = row.result
                    && code == POISON_CODE
                    && !self.broker.has_dead_letter(message, code)
                {
                    self.sometimes("poison-dead-letter-owed");
                    return Step::Next(WorkerPhase::PayDeadLetter(code), self.latency());
                }
                return Step::Next(WorkerPhase::Ack, self.latency());
            }
            Some(row)
                if dedupe
                    && row
                        .lease
                        .is_some_and(|lease| lease.held_by_other(now, actor, incarnation)) =>
            {
                self.rec.outcome = "lease-held";
                self.sometimes("inbox-lease-held");
                self.touch_delivery(job, DeliveryAct::Drop);
                return Step::Done;
            }
            // Both arms below take the row's lease: not for a delivery the
            // attempt's lease turns away.
            _ if self.attempt_held_elsewhere(job) => return self.drop_attempt_held(job),
            Some(_) if dedupe => self.set_inbox_lease(message, lease),
            _ => {
                // A row is there only under the no-inbox-dedupe mutant.
                let replaced = self.db.inbox.get(message).and_then(|row| row.lease);
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
                self.touched.inbox_leases.push((message, replaced));
            }
        }
        self.touched.entries.push(job.delivery.entry);
        self.decide(job)
    }

    /// Reads the task and decides what this delivery means now (DESIGN §3
    /// Process step 2). Part of the inbox transaction or of a reload.
    pub(super) fn decide(&mut self, job: &mut Job) -> Step {
        let state = StateSeen::of(&self.db.task(job.task).state);
        job.version = state.version;
        self.rec.version = Some(state.version);
        let attempt = i64::from(job.attempt);
        match state.status {
            Status::Queued if state.attempt + 1 == attempt => {
                self.rec.outcome = "start";
                Step::Next(WorkerPhase::Start, self.latency())
            }
            Status::Running | Status::Cancelling if state.attempt == attempt => {
                if self.lease_held_elsewhere(job) {
                    return self.drop_attempt_held(job);
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

    /// Whether the delivery's attempt is running under another holder's
    /// live lease. The inbox transaction then writes nothing: an inbox
    /// lease taken by a worker that goes on to drop the delivery would be
    /// a lease no one works under, shutting the attempt's own worker out
    /// of renewing and finalizing its row.
    fn attempt_held_elsewhere(&self, job: &Job) -> bool {
        let state = &self.db.task(job.task).state;
        matches!(state.status, Status::Running | Status::Cancelling)
            && state.attempt == i64::from(job.attempt)
            && self.lease_held_elsewhere(job)
    }

    /// Drops a delivery whose attempt another worker runs.
    fn drop_attempt_held(&mut self, job: &Job) -> Step {
        self.rec.outcome = "lease-held";
        self.race("two workers starting one task");
        self.touch_delivery(job, DeliveryAct::Drop);
        Step::Done
    }

    /// Renews this worker's processing lease on the job's inbox row, while
    /// the row is open and no other holder took it over.
    pub(super) fn renew_inbox(&mut self, job: &Job) {
        let (actor, incarnation) = self.worker_holder();
        let until_ms = self.now + self.config.inbox_lease_ms;
        let message = job.delivery.message;
        let renewable = self.db.inbox.get(message).is_some_and(|row| {
            !row.state.is_final()
                && row
                    .lease
                    .is_none_or(|lease| !lease.held_by_other(self.now, actor, incarnation))
        });
        if renewable {
            let lease = InboxLease {
                holder: actor,
                incarnation,
                until_ms,
            };
            self.set_inbox_lease(message, Some(lease));
        }
    }

    /// Writes an existing inbox row's processing lease, listing the lease
    /// it replaced for the lease checks.
    fn set_inbox_lease(&mut self, message: OutboxId, lease: Option<InboxLease>) {
        let row = self.db.inbox.get_mut(message).expect("row exists");
        let replaced = std::mem::replace(&mut row.lease, lease);
        self.touched.inbox_leases.push((message, replaced));
    }

    pub(super) fn finalize_inbox(&mut self, job: &Job, state: InboxState) {
        let now = self.now;
        let (actor, incarnation) = self.worker_holder();
        // Only the holder of the row's processing lease finalizes it, once:
        // a worker that froze past its lease while another took the message
        // over and finalized it must not overwrite that result.
        if let Some(row) = self.db.inbox.get_mut(job.delivery.message)
            && row.payload_sha256 == job.delivery.payload_sha256
            && row.state == InboxState::Processing
            && row
                .lease
                .is_none_or(|lease| lease.taken_by(actor, incarnation))
        {
            row.state = state;
            row.result = job.result;
            row.completed_ms = Some(now);
            row.lease = None;
            self.touched.inbox.push(job.delivery.message);
        }
    }

    /// Copies the poison message to the dead-letter queue.
    pub(super) fn worker_dead_letter(&mut self, job: &mut Job, code: &'static str) -> Step {
        // Dead-lettering is idempotent by message and code: a worker frozen
        // past its lease after failing the input may find that the
        // redelivery's worker met the failed inbox row and put the message
        // there already (and the operator may have bumped the handler
        // since, so a second copy would name a version that never ran it).
        if self.broker.has_dead_letter(job.delivery.message, code) {
            self.rec.outcome = "already-dead-lettered";
            return Step::Next(WorkerPhase::Ack, self.latency());
        }
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
    pub(super) fn worker_ack(&mut self, job: &mut Job) -> Step {
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

    pub(super) fn worker_nack(&mut self, job: &mut Job, code: &'static str) -> Step {
        self.touch_delivery(job, DeliveryAct::Nack);
        self.touched.entries.push(job.delivery.entry);
        let visible = self.now + self.config.nack_delay_ms;
        self.broker.nack(job.delivery.entry, visible, code);
        self.rec.outcome = code;
        self.poke_broker(visible);
        Step::Done
    }

    /// Rejects a conflicting delivery to the dead-letter queue.
    pub(super) fn worker_quarantine(&mut self, job: &mut Job) -> Step {
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
