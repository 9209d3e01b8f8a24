//! The broker's own steps: hand a visible entry to a free consumer (one
//! delivery per step), or dead-letter an entry that reached
//! `delivery_attempts_max`. Network faults on the hand-off (duplicate copy,
//! delay, tampered copy) happen here.

use crate::faults::{FaultKind, Site};
use crate::mutants::Mutant;

use crate::world::World;
use crate::world::actors::worker::WorkerPhase;
use crate::world::engine::ids::{ActorId, ActorKind, EntryId};
use crate::world::engine::step::Verb;
use crate::world::stores::broker::Delivery;
use crate::world::stores::db::Topic;

/// Deliveries the projector takes ahead (prefetch).
pub const PROJECTOR_PREFETCH: usize = 8;

impl World {
    /// A consumer of `topic` that can take a delivery now.
    fn free_consumer(&self, topic: Topic) -> Option<ActorId> {
        match topic {
            Topic::TaskWork => {
                let count = self.workers.len();
                (0..count)
                    .map(|offset| (self.next_worker + offset) % count)
                    .find(|index| self.workers[*index].free())
                    .map(|index| ActorId::new(ActorKind::Worker, index as u16))
            }
            Topic::TaskEvents => (self.projector.life.up
                && self.projector.mailbox.len() < PROJECTOR_PREFETCH)
                .then_some(ActorId::PROJECTOR),
        }
    }

    pub(in crate::world) fn broker_step(&mut self) -> bool {
        let now = self.now;
        // An outage stops every delivery until the broker is back.
        if let Some(back) = self.broker_down() {
            self.poke_broker(back);
            return false;
        }
        self.broker.expire(now);
        let mut choice: Option<(u64, EntryId, ActorId)> = None;
        for topic in [Topic::TaskWork, Topic::TaskEvents] {
            let Some((visible, id)) = self.broker.next_ready(topic, now) else {
                continue;
            };
            let Some(consumer) = self.free_consumer(topic) else {
                continue;
            };
            if choice.is_none_or(|(v, e, _)| (visible, id) < (v, e)) {
                choice = Some((visible, id, consumer));
            }
        }
        let Some((_, id, consumer)) = choice else {
            if let Some(due) = self.broker.next_due().filter(|due| *due > now) {
                self.poke_broker(due);
            }
            return false;
        };
        let entry = self.broker.entries.get(id).expect("a ready entry exists");
        let (deliveries, last_error, task, message) = (
            entry.deliveries,
            entry.last_error,
            entry.task,
            entry.message,
        );
        let limit = self.config.delivery_attempts_max as u32;
        if deliveries >= limit && self.mutant != Some(Mutant::UnboundedRequeue) {
            self.begin(ActorId::BROKER, Verb::DeadLetter);
            let code = last_error.unwrap_or("DELIVERY_ATTEMPTS_EXHAUSTED");
            self.rec.task = Some(task);
            self.rec.message = Some(message);
            self.rec.entry = Some(id);
            self.rec.outcome = code;
            self.broker.dead_letter(id, code, self.handler_version, now);
            self.touched.entries.push(id);
            self.sometimes("dead-lettered-by-broker");
            self.schedule_reconcile();
            self.finish();
            self.poke_broker(now);
            return true;
        }
        self.begin(ActorId::BROKER, Verb::Deliver);
        let deadline = now + self.config.visibility_timeout_ms;
        let entry = self.broker.take(id, consumer, deadline);
        let mut delivery = Delivery {
            entry: id,
            topic: entry.topic,
            message: entry.message,
            task: entry.task,
            payload: entry.payload.clone(),
            payload_sha256: entry.payload_sha256,
            count: entry.deliveries,
            tampered: false,
            direct: false,
        };
        self.touched.entries.push(id);
        self.touched.delivered.push((id, delivery.count));
        if delivery.count > 1 {
            self.sometimes("redelivered");
        }
        self.rec.task = Some(delivery.task);
        self.rec.message = Some(delivery.message);
        self.rec.entry = Some(id);
        self.rec.hash = Some(delivery.payload_sha256);
        self.rec.outcome = match consumer.kind {
            ActorKind::Worker => "to-worker",
            _ => "to-projector",
        };
        let mut arrival = now + self.latency();
        // The hand-off's faults count per receiving consumer, so a scenario
        // can say "the 2nd delivery to the projector".
        let fault = self.faults.at(Site::BrokerDeliver, consumer, self.rec.step);
        if let Some(kind) = fault {
            self.rec.fault = Some((Site::BrokerDeliver, kind));
        }
        // The duplicate is this very delivery again (a duplicate is never
        // also tampered).
        let mut copy = None;
        match fault {
            Some(FaultKind::Delay) => {
                let extra = self.faults.parameter(1, self.config.delay_ms_max);
                arrival += extra;
                self.sometimes("delivery-delayed");
            }
            Some(FaultKind::Tamper) => {
                delivery.payload = delivery.payload.tampered();
                delivery.payload_sha256 = delivery.payload.sha256();
                delivery.tampered = true;
            }
            Some(FaultKind::Duplicate) => copy = Some(delivery.clone()),
            _ => {}
        }
        self.assert_in_network_time(arrival);
        match consumer.kind {
            ActorKind::Worker => {
                let index = consumer.index as usize;
                self.next_worker = (index + 1) % self.workers.len();
                let delivery_id = self.new_delivery_id();
                self.workers[index]
                    .mailbox
                    .push((arrival, delivery_id, delivery));
                if let Some(copy) = copy {
                    let copy_id = self.new_delivery_id();
                    let later = arrival + self.latency();
                    self.assert_in_network_time(later);
                    self.workers[index].mailbox.push((later, copy_id, copy));
                }
                debug_assert_eq!(self.workers[index].phase, WorkerPhase::Idle);
                self.poke(consumer, arrival);
            }
            _ => {
                self.projector_receive(delivery, arrival);
                if let Some(copy) = copy {
                    let later = arrival + self.latency();
                    self.assert_in_network_time(later);
                    self.projector_receive(copy, later);
                }
            }
        }
        self.finish();
        self.poke_broker(now);
        true
    }
}

impl World {
    /// A hand-off arrives within the network's time: two latencies and
    /// the longest delay fault. Anything later is a bug in sim's delivery
    /// arithmetic (a copy that would sit in a mailbox for the rest of the
    /// run), reported with the seed like any panic.
    fn assert_in_network_time(&self, arrival: u64) {
        let bound = self.now
            + 2 * self.config.latency_ms_max.max(self.config.latency_ms_min)
            + self.config.delay_ms_max;
        assert!(
            arrival <= bound,
            "a hand-off at {arrival} ms arrives after the network's bound, {bound} ms"
        );
    }
}
