//! The publisher's steps: claim unpublished outbox rows, publish, mark.

use crate::faults::{FaultKind, Site};
use crate::mutants::Mutant;
use crate::world::World;
use crate::world::engine::ids::{ActorId, ActorKind};
use crate::world::engine::step::Verb;
use crate::world::windows::{Component, Held};

use super::*;

impl World {
    /// Tells idle publishers that rows may be waiting.
    pub fn poke_publishers(&mut self) {
        for index in 0..self.publishers.len() {
            if self.publishers[index].phase == PublisherPhase::Idle {
                let at = self.now + 1;
                self.poke(ActorId::new(ActorKind::Publisher, index as u16), at);
            }
        }
    }

    pub(in crate::world) fn publisher_step(&mut self, index: usize, poked: bool) -> bool {
        let actor = ActorId::new(ActorKind::Publisher, index as u16);
        match self.publishers[index].phase {
            PublisherPhase::Idle if poked => self.publisher_claim(index, actor),
            PublisherPhase::Idle => false,
            PublisherPhase::Publishing if !poked => self.publisher_publish(index, actor),
            PublisherPhase::Marking if !poked => self.publisher_mark(index, actor),
            _ => false,
        }
    }

    /// The claim transaction: up to `publish_batch_max` rows due now.
    fn publisher_claim(&mut self, index: usize, actor: ActorId) -> bool {
        let now = self.now;
        let due = &mut self.publishers[index].due;
        due.clear();
        due.extend(
            self.db
                .unpublished
                .iter()
                .take_while(|(ready, _)| *ready <= now)
                .take(self.config.publish_batch_max as usize)
                .map(|&(_, id)| id),
        );
        if due.is_empty() {
            if let Some((ready, _)) = self.db.unpublished.first().copied() {
                self.poke(actor, ready);
            }
            return false;
        }
        self.begin(actor, Verb::Claim);
        if self.commit_fault() == Some(false) {
            self.finish();
            return true;
        }
        // Taken out while the rows are claimed (that needs `self`); it
        // goes back as the batch below.
        let due = std::mem::take(&mut self.publishers[index].due);
        let incarnation = self.publishers[index].life.incarnation;
        let until = now + self.config.publish_lease_ms;
        for &id in &due {
            self.db.reindex_outbox(id, Some(until));
            if self
                .db
                .outbox_row(id)
                .lease
                .is_some_and(|(holder, inc, _)| (holder, inc) != (actor, incarnation))
            {
                // Its claim by another publisher ran out: both may publish.
                self.race("two publishers on one outbox row");
                self.taken_over(Held::Claim(id));
            }
            let row = self.db.outbox_row_mut(id);
            let replaced = row.lease.replace((actor, incarnation, until));
            self.touched.claims.push(crate::world::ClaimWrite {
                message: id,
                replaced,
                writer: actor,
                incarnation,
            });
            row.publish_attempts += 1;
        }
        self.rec.message = due.first().copied();
        self.rec.outcome = "claimed";
        let publisher = &mut self.publishers[index];
        // The claimed rows become the batch; the last batch's list is the
        // next claim's buffer.
        publisher.due = std::mem::replace(&mut publisher.claimed, due);
        publisher.next = 0;
        publisher.confirmed.clear();
        publisher.unknown.clear();
        publisher.phase = PublisherPhase::Publishing;
        let crashed = self.crash_now.is_some();
        self.finish();
        if !crashed {
            let delay = self.latency();
            self.continue_after(actor, delay);
        }
        true
    }

    /// Publishes the next claimed row and waits for its confirm.
    fn publisher_publish(&mut self, index: usize, actor: ActorId) -> bool {
        let publisher = &self.publishers[index];
        let id = publisher.claimed[publisher.next];
        self.begin(actor, Verb::Publish);
        let row = self.db.outbox_row(id);
        let (task, payload_sha256, publish_attempts, last_error) = (
            row.task,
            row.payload_sha256,
            row.publish_attempts,
            row.last_error,
        );
        let mut message = id;
        if self.mutant == Some(Mutant::NewMessageIdOnRepublish) && last_error.is_some() {
            message = self.fresh_message_id();
        }
        let (topic, payload) = (row.topic, row.payload.clone());
        self.rec.task = Some(task);
        self.rec.message = Some(message);
        self.rec.hash = Some(payload_sha256);
        if publish_attempts > 1 || last_error.is_some() {
            self.sometimes("outbox-republished");
        }
        // The broker never got it (out, or the publish lost on the way):
        // the publisher hears no confirm, as after a lost confirm.
        let lost = self.out_of_service(Component::Broker)
            || self.fault(Site::BrokerPublish) == Some(FaultKind::Lost);
        if !lost {
            let entry =
                self.broker
                    .publish(topic, message, task, payload, payload_sha256, self.now);
            self.touched.entries.push(entry);
            self.rec.entry = Some(entry);
        }
        let confirm = if lost {
            Some(FaultKind::ConfirmLost)
        } else {
            self.fault(Site::PublisherConfirm)
        };
        match confirm {
            Some(FaultKind::ConfirmLost) => {
                self.rec.outcome = if lost {
                    "publish-lost"
                } else {
                    "confirm-unknown"
                };
                self.publishers[index].unknown.push(id);
            }
            Some(FaultKind::CrashAfterConfirm) => {
                self.rec.outcome = "confirmed";
                self.publishers[index].confirmed.push(id);
                self.crash_after_step();
            }
            _ => {
                self.rec.outcome = "confirmed";
                self.publishers[index].confirmed.push(id);
            }
        }
        let publisher = &mut self.publishers[index];
        publisher.next += 1;
        if publisher.next == publisher.claimed.len() {
            publisher.phase = PublisherPhase::Marking;
        }
        let crashed = self.crash_now.is_some();
        self.poke_broker(self.now);
        self.finish();
        if !crashed {
            let delay = self.latency();
            self.continue_after(actor, delay);
        }
        true
    }

    /// Marks confirmed rows published (conditional: still unpublished) and
    /// records unknown outcomes for a later republish under the same id.
    fn publisher_mark(&mut self, index: usize, actor: ActorId) -> bool {
        self.begin(actor, Verb::Mark);
        if self.commit_fault() == Some(false) {
            self.finish();
            return true;
        }
        let now = self.now;
        let incarnation = self.publishers[index].life.incarnation;
        let confirmed = std::mem::take(&mut self.publishers[index].confirmed);
        let unknown = std::mem::take(&mut self.publishers[index].unknown);
        let mut marked = 0;
        for id in &confirmed {
            let row = self.db.outbox_row_mut(*id);
            if row.published_ms.is_some() {
                continue;
            }
            row.published_ms = Some(now);
            row.lease = None;
            self.db.reindex_outbox(*id, None);
            marked += 1;
        }
        for id in &unknown {
            let row = self.db.outbox_row_mut(*id);
            let mine = row
                .lease
                .is_some_and(|(holder, inc, _)| holder == actor && inc == incarnation);
            if row.published_ms.is_some() || !mine {
                continue;
            }
            let replaced = row.lease.take();
            row.last_error = Some("CONFIRM_UNKNOWN");
            row.next_retry_ms = now + self.config.publish_retry_ms;
            let retry = row.next_retry_ms;
            self.db.reindex_outbox(*id, Some(retry));
            self.touched.claims.push(crate::world::ClaimWrite {
                message: *id,
                replaced,
                writer: actor,
                incarnation,
            });
        }
        self.rec.outcome = match (marked, unknown.is_empty()) {
            (0, true) => "already-published",
            (_, true) => "marked",
            (_, false) => "marked-some-unknown",
        };
        self.rec.message = confirmed.first().or(unknown.first()).copied();
        let publisher = &mut self.publishers[index];
        publisher.claimed.clear();
        publisher.next = 0;
        publisher.phase = PublisherPhase::Idle;
        self.finish();
        // More may be waiting.
        self.poke(actor, now + 1);
        true
    }
}
