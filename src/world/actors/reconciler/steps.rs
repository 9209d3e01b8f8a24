//! The reconciler's steps: expired leases, unknown effects, dead-lettered messages, retention and compaction.

use crate::mutants::Mutant;
use crate::world::World;
use crate::world::actors::fence::{Fence, FenceProgress, FencePurpose, FenceTarget};
use crate::world::actors::publisher::PublisherPhase;
use crate::world::engine::ids::{ActorId, DeadLetterId, OutboxId, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::db::{Payload, ReviewReason, Topic, WorkKind};

use super::*;

/// How many deferred compactions an expiry looks at again.
const COMPACTIONS_RETRIED_PER_EXPIRY: usize = 4;

/// How many deferred compactions a compaction step looks at: one such
/// step a reconcile period while any wait.
const COMPACTIONS_RETRIED_PER_STEP: usize = 64;

impl World {
    /// The earliest time the reconciler has something to look at.
    /// When the next repair is due: an expired lease or a dead letter.
    fn reconcile_due(&self) -> Option<u64> {
        let lease = self.db.lease_index.first().map(|(until, _)| until + 1);
        let letters = (!self.broker.unseen_dead_letters.is_empty()).then_some(self.now);
        let compactions =
            (!self.compaction_deferred.is_empty()).then_some(self.compaction_retry_at);
        [lease, letters, compactions].into_iter().flatten().min()
    }

    /// Wakes the reconciler at the first tick of its period at which
    /// something is due.
    pub fn schedule_reconcile(&mut self) {
        if self.mutant == Some(Mutant::NoReconciler) || !self.reconciler.life.up {
            return;
        }
        if !matches!(self.reconciler.phase, ReconcilerPhase::Idle) {
            return;
        }
        let period = self.config.reconcile_every_ms;
        let tick = |due: u64, now: u64| (due.div_ceil(period) * period).max(now);
        if let Some(due) = self.reconcile_due() {
            self.poke(ActorId::RECONCILER, tick(due, self.now));
        }
        // Retention is housekeeping: its wake never keeps a run alive.
        if let Some((due, _)) = self.db.retention_index.first() {
            let at = tick(*due, self.now);
            self.housekeeping(at);
        }
    }

    pub(in crate::world) fn reconciler_step(&mut self, poked: bool) -> bool {
        match self.reconciler.phase.clone() {
            ReconcilerPhase::Idle if poked => self.reconciler_scan(),
            ReconcilerPhase::Idle => false,
            ReconcilerPhase::Fence(_) if poked => false,
            ReconcilerPhase::Fence(mut fence) => {
                self.begin(ActorId::RECONCILER, fence.verb());
                let incarnation = self.reconciler.life.incarnation;
                let progress = self.fence_step(ActorId::RECONCILER, &mut fence, incarnation);
                match progress {
                    FenceProgress::Next(delay) => {
                        self.reconciler.phase = ReconcilerPhase::Fence(fence);
                        self.finish();
                        if self.reconciler.life.up {
                            self.continue_after(ActorId::RECONCILER, delay);
                        }
                    }
                    FenceProgress::Done | FenceProgress::Abort(_) => {
                        self.reconciler.phase = ReconcilerPhase::Idle;
                        self.finish();
                        let at = self.now + self.latency();
                        self.poke(ActorId::RECONCILER, at);
                    }
                }
                true
            }
        }
    }

    fn next_due_item(&self) -> Option<Due> {
        let now = self.now;
        if let Some((until, task)) = self.db.lease_index.first()
            && *until < now
        {
            return Some(Due::Lease(*task));
        }
        if let Some(id) = self.broker.unseen_dead_letters.first() {
            return Some(Due::DeadLetter(*id));
        }
        if let Some((due, _)) = self.db.retention_index.first()
            && *due <= now
        {
            return Some(Due::Retention);
        }
        if !self.compaction_deferred.is_empty() && self.compaction_retry_at <= now {
            return Some(Due::Compaction);
        }
        None
    }

    fn reconciler_scan(&mut self) -> bool {
        let Some(item) = self.next_due_item() else {
            self.schedule_reconcile();
            return false;
        };
        match item {
            Due::Lease(task) => self.reconcile_lease(task),
            Due::DeadLetter(id) => self.reconcile_dead_letter(id),
            Due::Retention => self.expire_record(),
            Due::Compaction => self.retry_compactions(),
        }
        let at = self.now + self.latency();
        if matches!(self.reconciler.phase, ReconcilerPhase::Idle) {
            self.poke(ActorId::RECONCILER, at);
        } else if self.reconciler.life.up {
            self.continue_after(ActorId::RECONCILER, at - self.now);
        }
        true
    }

    /// An attempt whose lease expired: fence it (its worker is gone or too
    /// slow), unless the task waits for a human.
    fn reconcile_lease(&mut self, task: TaskId) {
        self.begin(ActorId::RECONCILER, Verb::Scan);
        self.rec.task = Some(task);
        let lease = self.db.task(task).lease.expect("indexed leases exist");
        self.rec.attempt = lease.attempt;
        match self.fence_target(task, lease.attempt) {
            FenceTarget::Ended => {
                self.drop_lease(task);
                self.rec.outcome = "stale-lease";
            }
            FenceTarget::InReview => {
                self.drop_lease(task);
                self.rec.outcome = "in-manual-review";
            }
            FenceTarget::Due { status, .. } => {
                let purpose = FencePurpose::for_status(status);
                self.rec.outcome = "lease-expired";
                self.sometimes("lease-expired-fenced");
                self.reconciler.phase =
                    ReconcilerPhase::Fence(Fence::new(task, lease.attempt, purpose));
            }
        }
        self.finish();
    }

    /// A dead letter: re-drive a transiently dead-lettered task (a fresh
    /// outbox row for the same attempt) within its budget, else review.
    fn reconcile_dead_letter(&mut self, id: DeadLetterId) {
        let letter = self
            .broker
            .dead_letter_by_id(id)
            .expect("listed dead letters exist")
            .clone();
        let task = letter.task;
        let transient = letter.transient;
        let message_live = self.broker.has_live_message(letter.message);
        // An event the projector never got is worth sending again: applying
        // it is idempotent, and the read model needs it. But not for ever: a
        // projector that never acks in time (its steps outlast the
        // visibility timeout, one delivery allowed) had its events
        // dead-lettered and re-driven without end, a fresh outbox row and
        // dead letter each time, until memory ran out. The task's events
        // share one budget of `redrive_max`, kept apart from its work's.
        if letter.topic == Topic::TaskEvents
            && transient
            && !message_live
            && self.event_redrive_spent(task)
        {
            self.review_dead_letter(id, task, letter.message);
            return;
        }
        if letter.topic == Topic::TaskEvents && transient && !message_live {
            self.begin(ActorId::RECONCILER, Verb::Redrive);
            self.rec.task = Some(task);
            if self.commit_fault() != Some(false) {
                self.seen_dead_letter(id);
                self.db.task_mut(task).event_redrives += 1;
                let Payload::Event(event) = letter.payload else {
                    unreachable!("task-events carry events");
                };
                let message = self.insert_event_row(task, event, letter.payload_sha256);
                self.rec.message = Some(message);
                self.touched.redriven.push(id);
                self.poke_publishers();
                self.rec.outcome = "redriven";
                self.sometimes("dead-letter-redriven");
            }
            self.finish();
            return;
        }
        let live_task = self
            .db
            .find_task(task)
            .is_some_and(|row| !row.state.status.is_terminal());
        if !transient || !live_task || message_live {
            self.begin(ActorId::RECONCILER, Verb::Scan);
            self.rec.task = Some(task);
            self.rec.message = Some(letter.message);
            self.rec.outcome = if transient {
                "nothing-to-redrive"
            } else {
                "not-transient"
            };
            self.seen_dead_letter(id);
            self.finish();
            return;
        }
        let redrives = self.db.task(task).redrives;
        if u64::from(redrives) >= self.config.redrive_max {
            self.review_dead_letter(id, task, letter.message);
            return;
        }
        self.begin(ActorId::RECONCILER, Verb::Redrive);
        self.rec.task = Some(task);
        if self.commit_fault() == Some(false) {
            self.finish();
            return;
        }
        self.seen_dead_letter(id);
        self.db.task_mut(task).redrives += 1;
        let Payload::Work { attempt, .. } = letter.payload else {
            unreachable!("task-work carries work");
        };
        self.insert_work_row(task, WorkKind::TaskRedrive, attempt, self.now);
        self.touched.redriven.push(id);
        self.rec.outcome = "redriven";
        self.sometimes("dead-letter-redriven");
        self.finish();
    }

    /// Whether the task's events used up their re-drive budget. A task
    /// gone from the table has no budget left to spend.
    fn event_redrive_spent(&self, task: TaskId) -> bool {
        self.db
            .find_task(task)
            .is_none_or(|row| u64::from(row.event_redrives) >= self.config.redrive_max)
    }

    /// A dead letter past its task's re-drive budget goes to a human.
    fn review_dead_letter(&mut self, id: DeadLetterId, task: TaskId, message: OutboxId) {
        self.begin(ActorId::RECONCILER, Verb::Review);
        self.rec.task = Some(task);
        self.rec.message = Some(message);
        if self.commit_fault() != Some(false) {
            self.seen_dead_letter(id);
            self.db.review(
                Some(task),
                ReviewReason::DeadLettered,
                message.to_string(),
                self.now,
            );
            self.rec.outcome = "DEAD_LETTERED";
            self.touched.dead_letter_reviews.push(id);
            self.sometimes("dead-letter-to-review");
        }
        self.finish();
    }

    /// The dead letter is handled: it leaves the reconciler's work list
    /// only with the step that handled it, so a crash before commit leaves
    /// it there for the next scan.
    fn seen_dead_letter(&mut self, id: DeadLetterId) {
        self.broker.unseen_dead_letters.retain(|seen| *seen != id);
    }

    /// Ends an idempotency record's retention once its task is terminal,
    /// its outbox rows published and its effects reconciled (lesson 000
    /// §3.3); otherwise looks again later.
    fn expire_record(&mut self) {
        // The index's first record is the one due (`next_due_item` looked
        // at it): taken off the front, not searched for by its key's text.
        let (due, key) = self.db.retention_index.pop_first().expect("due");
        self.begin(ActorId::RECONCILER, Verb::Expire);
        self.touched.keys.push(key.clone());
        if self.commit_fault() == Some(false) {
            self.db.retain_until(due, key);
            self.finish();
            return;
        }
        let Some((answer, committed_ms, fingerprint)) = self
            .db
            .record(&key)
            .map(|record| (record.answer, record.committed_ms, record.fingerprint))
        else {
            self.rec.outcome = "gone";
            self.finish();
            return;
        };
        let task = match answer {
            crate::world::stores::db::Answer::Accepted(task) => Some(task),
            crate::world::stores::db::Answer::Refused(_) => None,
        };
        self.rec.task = task;
        let early = self.mutant == Some(Mutant::EarlyIdempotencyExpiry);
        let done = task.filter(|&task| self.task_finished(task));
        let finished = early || task.is_none() || done.is_some();
        if finished {
            self.db.remove_record(&key);
            // Past its TTL, the same key and input are a new intent.
            if self.now >= committed_ms + self.config.idempotency_ttl_ms {
                self.forget_intent_key(&key, fingerprint);
            }
            self.rec.outcome = "expired";
            self.sometimes("idempotency-record-expired");
            // Only a finished task is compacted (the early-expiry mutant
            // drops records of unfinished ones; their rows stay).
            if let Some(task) = done
                && !self.compact_task(task)
            {
                self.compaction_deferred.push_back(task);
            }
        } else if task.is_some_and(|task| self.db.in_review(task)) {
            // Kept until a human settles the task; nothing to look at again.
            self.rec.outcome = "kept-for-review";
        } else if let Some(task) =
            task.filter(|&task| !self.db.task(task).state.status.is_terminal())
        {
            // Kept while its task works; the task's terminal event puts
            // the record back in the index (no polling).
            self.db.task_mut(task).retention_parked = true;
            self.rec.outcome = "kept";
            self.sometimes("retention-kept-unfinished");
        } else {
            // Ended, but its messages are not all published or an effect
            // is still open: look again after as long as it has been kept
            // so far, and at least a reconcile period. Behind a backlog
            // (one publisher, many workers) a record is looked at a few
            // times, not once a period: polled every period, 30,000 such
            // records took 82% of the steps of a long fuzz run.
            let now = self.now;
            let record = self.db.record_mut(&key).expect("read above");
            let kept_since = *record.kept_since_ms.get_or_insert(now);
            let again = now + (now - kept_since).max(self.config.reconcile_every_ms);
            self.db.retain_until(again, key);
            self.rec.outcome = "kept";
            self.sometimes("retention-kept-unfinished");
        }
        self.compact_deferred(COMPACTIONS_RETRIED_PER_EXPIRY);
        self.finish();
    }

    /// Looks again at a few of the finished tasks an earlier expiry left
    /// whole because something still carried them, oldest first: each is
    /// compacted if nothing carries it now, or goes to the back of the
    /// line. A few per expiry, not all: behind a backlog (the events of
    /// an overloaded run wait long for the projector) thousands wait, and
    /// looking at every one at every expiry took 45% of a 3x10^6-step run.
    /// Each expiry adds at most one, so the line drains. Looks at up to
    /// `most`; returns whether any was compacted.
    fn compact_deferred(&mut self, most: usize) -> bool {
        let waiting = self.compaction_deferred.len();
        for _ in 0..most.min(waiting) {
            let task = self.compaction_deferred.pop_front().expect("counted");
            if !self.compact_task(task) {
                self.compaction_deferred.push_back(task);
            }
        }
        self.compaction_deferred.len() < waiting
    }

    /// Looks again, a reconcile period after the last look, at the
    /// finished tasks expiries left whole because something carried them.
    /// Expiries alone did not drain the line: the last expiries of a run
    /// (or a lull in them) left hundreds of settled tasks uncompacted for
    /// good, their events, rows and ledgers kept with no record to find
    /// them by (seed 58 with a 10 s TTL: 267).
    fn retry_compactions(&mut self) {
        self.begin(ActorId::RECONCILER, Verb::Compact);
        self.compaction_retry_at = self.now + self.config.reconcile_every_ms;
        if self.commit_fault() == Some(false) {
            self.finish();
            return;
        }
        self.rec.outcome = if self.compact_deferred(COMPACTIONS_RETRIED_PER_STEP) {
            "compacted"
        } else {
            "kept"
        };
        self.finish();
    }

    /// Terminal, every outbox row published, no effect left open.
    pub fn task_finished(&self, task: TaskId) -> bool {
        let row = self.db.task(task);
        row.state.status.is_terminal()
            && row
                .outbox_rows
                .iter()
                .all(|id| self.db.outbox_row(*id).published_ms.is_some())
            && row.effects.iter().all(|ledger| !ledger.state.is_open())
    }
}

impl World {
    /// Whether a publisher in the middle of a batch holds one of the
    /// task's outbox rows. Every live row of a task is in its
    /// `outbox_rows` (rows are made by `insert_outbox`, which lists them,
    /// and dropped only by compaction, which empties the list), so the
    /// claimed ids are compared with that short list: looking each claimed
    /// row up to read its task touched a cold row per id at every
    /// compaction attempt.
    fn claimed_by_a_publisher(&self, task: TaskId) -> bool {
        let rows = &self.db.task(task).outbox_rows;
        !rows.is_empty()
            && self.publishers.iter().any(|publisher| {
                !matches!(publisher.phase, PublisherPhase::Idle)
                    && publisher.claimed.iter().any(|id| rows.contains(id))
            })
    }

    /// Compacts a task whose retention ended, so memory follows the work in
    /// flight, not the work done: its state row, key and fingerprint stay
    /// (a key still maps to its one task, a terminal task still cannot
    /// reopen) and so do its artifacts (archived, in what the dump shows of
    /// them); its events, snapshots, ledger,
    /// outbox and inbox rows, cache entry and read model go. A task that
    /// anything still carries (a broker entry, a delivery on its way, an
    /// actor's job, a publisher's claimed batch: a claim that ran out while
    /// another publisher published and marked the row) is left whole, and
    /// this returns false; so is a task no
    /// longer finished: a deferred task can be given new work after its
    /// record expired (a re-drive of an event the broker dead-lettered
    /// makes a new, unpublished outbox row). Otherwise true (compacted now
    /// or before).
    pub fn compact_task(&mut self, task: TaskId) -> bool {
        let in_flight = !self.task_finished(task)
            || self.broker.carries_task(task)
            || self
                .projector
                .current
                .as_ref()
                .is_some_and(|d| d.task == task)
            || self
                .projector
                .mailbox
                .iter()
                .any(|(_, _, d)| d.task == task)
            || self.workers.iter().any(|worker| {
                worker.job.as_ref().is_some_and(|job| job.task == task)
                    || worker.mailbox.iter().any(|(_, _, d)| d.task == task)
            })
            || self.calls.hold_task(task)
            || self.claimed_by_a_publisher(task);
        if in_flight {
            return false;
        }
        // Noted only for checks that will run: unread, the notes of a run
        // without invariants would pile up.
        if self.invariants_on {
            let carried = self.carried_by(task);
            self.checker
                .note_compaction(&self.db, &self.store, task, carried);
        }
        if self.db.task(task).compacted {
            return true;
        }
        self.sometimes("task-compacted");
        self.counters.tasks_compacted += 1;
        let row = self.db.task_mut(task);
        row.compacted = true;
        row.events = Vec::new();
        row.snapshots = Vec::new();
        row.effects = Vec::new();
        // A dead letter of the task can be replayed at any time, as a new
        // task with this input: only what nothing can replay drops it.
        if !self.broker.has_dead_letter_of(task) {
            row.input = self.compacted_input.clone();
        }
        let rows = std::mem::take(&mut row.outbox_rows);
        for id in rows {
            self.db.inbox.discard(id);
            self.db.drop_outbox_row(id);
            self.checker.forget_message(id);
        }
        self.cache.entries.remove(task);
        self.projector.models.remove(task);
        self.store.archive_task(task);
        self.highest_seen
            .extract_if((task, 0)..=(task, u16::MAX), |_, _| true)
            .for_each(drop);
        self.checker.forget_history(task);
        true
    }
}
