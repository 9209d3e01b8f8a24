//! The projector's steps: apply events in order, refetch gaps, rebuild from a verified snapshot, invalidate the cache, ack.

use crate::faults::{FaultKind, Site};
use crate::hash::Sha;
use crate::mutants::Mutant;
use crate::task::json::state_sha256;
use crate::task::replay::fold;
use crate::task::{RejectReason, TaskEvent, Text, Transition, initial_state};
use crate::world::World;
use crate::world::engine::ids::{ActorId, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::broker::Delivery;
use crate::world::stores::db::ReviewReason;
use crate::world::windows::Component;
use std::sync::Arc;

use super::*;

impl World {
    pub(in crate::world) fn projector_receive(&mut self, delivery: Delivery, arrival: u64) {
        if !self.projector.life.up {
            return;
        }
        self.projector.next_order += 1;
        let order = self.projector.next_order;
        self.projector.mailbox.push((arrival, order, delivery));
        self.poke(ActorId::PROJECTOR, arrival);
    }

    pub(in crate::world) fn projector_step(&mut self, poked: bool) -> bool {
        match self.projector.phase.clone() {
            ProjectorPhase::Idle if poked => self.projector_take(),
            ProjectorPhase::Idle => false,
            _ if poked => false,
            ProjectorPhase::Refetch => {
                self.begin(ActorId::PROJECTOR, Verb::Refetch);
                let delivery = self
                    .projector
                    .current
                    .clone()
                    .expect("refetching a delivery");
                let event = event_of(&delivery);
                let task = delivery.task;
                self.rec.task = Some(task);
                self.rec.version = Some(event.sequence);
                self.refetch(task, event.sequence);
                self.projector_after_apply(task);
                true
            }
            ProjectorPhase::Invalidate { task, version } => {
                self.begin(ActorId::PROJECTOR, Verb::Invalidate);
                self.rec.task = Some(task);
                self.rec.version = Some(version);
                self.invalidate(task, version);
                self.finish_projector_step();
                true
            }
            ProjectorPhase::Ack => {
                self.begin(ActorId::PROJECTOR, Verb::Ack);
                let delivery = self.projector.current.take().expect("acking a delivery");
                self.rec.task = Some(delivery.task);
                self.touched.projector_done.push(delivery.task);
                self.rec.entry = Some(delivery.entry);
                // A broker that is out loses the ack: the entry comes back
                // after its visibility timeout, a duplicate to the model.
                if self.out_of_service(Component::Broker) {
                    self.rec.outcome = "ack-lost";
                } else {
                    let acked = self.broker.ack(delivery.entry);
                    self.touched.entries.push(delivery.entry);
                    self.rec.outcome = if acked { "acked" } else { "already-gone" };
                }
                self.projector.phase = ProjectorPhase::Idle;
                self.finish();
                self.projector_idle();
                true
            }
        }
    }

    fn projector_idle(&mut self) {
        if !self.projector.life.up {
            return;
        }
        if let Some(arrival) = self
            .projector
            .mailbox
            .iter()
            .map(|(arrival, _, _)| *arrival)
            .min()
        {
            let at = arrival.max(self.now);
            self.poke(ActorId::PROJECTOR, at);
        }
        self.poke_broker(self.now);
    }

    fn projector_continue(&mut self, phase: ProjectorPhase) {
        if !self.projector.life.up {
            return;
        }
        if phase == ProjectorPhase::Idle {
            self.projector_idle();
            return;
        }
        let delay = match phase {
            ProjectorPhase::Invalidate { .. } if self.rec_failed_delete() => {
                self.config.cache_delete_retry_ms
            }
            _ => self.latency(),
        };
        self.continue_after(ActorId::PROJECTOR, delay);
    }

    fn rec_failed_delete(&self) -> bool {
        self.trace
            .last()
            .is_some_and(|record| record.outcome == "delete-failed")
    }

    /// Takes the next arrived delivery and applies it.
    fn projector_take(&mut self) -> bool {
        let now = self.now;
        let Some(position) = self
            .projector
            .mailbox
            .iter()
            .enumerate()
            .filter(|(_, (arrival, _, _))| *arrival <= now)
            .min_by_key(|(_, (arrival, order, _))| (*arrival, *order))
            .map(|(position, _)| position)
        else {
            self.projector_idle();
            return false;
        };
        let (_, _, delivery) = self.projector.mailbox.remove(position);
        let event = event_of(&delivery);
        let task = delivery.task;
        let payload_sha256 = delivery.payload_sha256;
        self.projector.current = Some(delivery);
        // A task it has no model of: new, or forgotten in a crash. A task
        // created after the projector's restart (above the watermark it
        // read then) is new, and its first event is taken at face value;
        // any other task is rebuilt from the store. So is a task the store
        // does not have (an outside event can name any id): the rebuild
        // finds nothing, and no model is made for a task that is not there.
        // A compacted task's events are gone from the store: only an
        // outside event can still name it, and nothing is modelled for it.
        let may_have_forgotten = event.sequence > 1 || task.0 <= self.projector.watermark;
        let row = self.db.find_task(task).map(|row| row.compacted);
        if !self.projector.models.contains(task) && (may_have_forgotten || row != Some(false)) {
            self.begin(ActorId::PROJECTOR, Verb::Rebuild);
            self.rec.task = Some(task);
            self.rec.hash = Some(payload_sha256);
            if row != Some(false) {
                self.rec.outcome = if row.is_none() {
                    "TASK_NOT_FOUND"
                } else {
                    "TASK_COMPACTED"
                };
                self.answer_delivery();
                self.finish_projector_step();
                return true;
            }
            self.rebuild(task);
            // The delivered event is now old news or next in line, unless
            // the store does not hold it: then the rebuilt model is all
            // there is to know.
            match self.refusal(task, &event, payload_sha256) {
                Some(refused) => self.refuse(task, &event, payload_sha256, refused),
                None => {
                    let _ = self.apply_to_model(task, &event, payload_sha256);
                }
            }
            self.projector_after_apply(task);
            return true;
        }
        self.begin(ActorId::PROJECTOR, Verb::Apply);
        self.rec.task = Some(task);
        self.rec.version = Some(event.sequence);
        self.rec.hash = Some(payload_sha256);
        if let Some(stored) = self.refusal(task, &event, payload_sha256) {
            // Not the fact the event store holds at that sequence: a copy
            // altered on its way, or an event no producer of this pipeline
            // committed. Never applied; the model takes the stored events
            // instead (a refetch through this sequence), then acks.
            self.refuse(task, &event, payload_sha256, stored);
            self.projector.phase = ProjectorPhase::Refetch;
            self.finish_projector_step();
            return true;
        }
        match self.apply_to_model(task, &event, payload_sha256) {
            Applied::Fresh => {
                self.rec.outcome = "applied";
                self.projector_after_apply(task);
            }
            Applied::Duplicate => {
                self.rec.outcome = "duplicate";
                self.sometimes("event-duplicate-ignored");
                self.answer_delivery();
                self.finish_projector_step();
            }
            Applied::Conflict(code) => {
                self.rec.outcome = code;
                self.answer_delivery();
                self.finish_projector_step();
            }
            Applied::Gap => {
                self.rec.outcome = "SEQUENCE_GAP";
                self.sometimes("sequence-gap-refetched");
                self.projector.phase = ProjectorPhase::Refetch;
                self.finish_projector_step();
            }
        }
        true
    }

    /// How the delivered event stands against the event store, the source
    /// of truth the model is derived from. A task the store does not have
    /// is answered before this is asked.
    fn stored_as(&self, task: TaskId, event: &TaskEvent, payload_sha256: Sha) -> Stored {
        let row = self.db.task(task);
        let at_sequence = usize::try_from(event.sequence - 1)
            .ok()
            .and_then(|index| row.events.get(index));
        if at_sequence.is_some_and(|stored| {
            stored.event.event_id == event.event_id && stored.payload_sha256 == payload_sha256
        }) {
            return Stored::Same;
        }
        let id_known = row
            .events
            .iter()
            .any(|stored| stored.event.event_id == event.event_id);
        if id_known {
            Stored::AnotherPayload
        } else {
            Stored::Absent
        }
    }

    /// Why the event must be refused before the model judges it, if it
    /// must: an id the store holds with another payload always is; an
    /// event the store does not hold is when the model would take it (its
    /// sequence is past the model's), while at an old sequence the model
    /// already calls it a duplicate or a history conflict, as lesson 003
    /// §7 does.
    fn refusal(&self, task: TaskId, event: &TaskEvent, payload_sha256: Sha) -> Option<Stored> {
        let version = self
            .projector
            .models
            .get(task)
            .map_or(0, |model| model.state.version);
        match self.stored_as(task, event, payload_sha256) {
            Stored::Same => None,
            Stored::AnotherPayload => Some(Stored::AnotherPayload),
            Stored::Absent => (event.sequence > version).then_some(Stored::Absent),
        }
    }

    /// Records why a delivered event was not applied.
    fn refuse(&mut self, task: TaskId, event: &TaskEvent, payload_sha256: Sha, stored: Stored) {
        let code = match stored {
            Stored::AnotherPayload => {
                self.sometimes("altered-event-refetched");
                "EVENT_ID_PAYLOAD_CONFLICT"
            }
            Stored::Absent | Stored::Same => {
                self.sometimes("unstored-event-refused");
                "EVENT_NOT_IN_STORE"
            }
        };
        self.rec.outcome = code;
        self.record_rejection(task, event, payload_sha256, code);
    }

    /// Invalidates the cache for the model's version, then acks.
    fn projector_after_apply(&mut self, task: TaskId) {
        let version = self
            .projector
            .models
            .get(task)
            .map_or(0, |model| model.state.version);
        self.touched.projection.push(task);
        self.invalidate(task, version);
        self.finish_projector_step();
    }

    fn finish_projector_step(&mut self) {
        let next = self.projector.phase.clone();
        self.finish();
        self.projector_continue(next);
    }

    /// Deletes the cache key, leaving a version tombstone; a failed delete
    /// is retried until it succeeds.
    fn invalidate(&mut self, task: TaskId, version: i64) {
        self.touched.cache.push(task);
        if self.fault(Site::CacheDelete) == Some(FaultKind::Fail) {
            self.rec.outcome = "delete-failed";
            self.sometimes("cache-delete-retried");
            self.projector.phase = ProjectorPhase::Invalidate { task, version };
            return;
        }
        self.touched.cache_writes.push((task, self.cache.get(task)));
        self.cache.delete(task, version);
        if self.rec.outcome == "ok" {
            self.rec.outcome = "invalidated";
        }
        self.answer_delivery();
    }

    /// Done with the current delivery: ack it to the broker next, or, for an
    /// event handed over directly (`deliver-event`), simply let it go.
    fn answer_delivery(&mut self) {
        let direct = self.projector.current.as_ref().is_some_and(|d| d.direct);
        self.projector.phase = if direct {
            if let Some(delivery) = self.projector.current.take() {
                self.touched.projector_done.push(delivery.task);
            }
            ProjectorPhase::Idle
        } else {
            ProjectorPhase::Ack
        };
    }

    /// Applies one event to the model of its task (lesson 003 §7).
    /// `payload_sha256` is the hash the message carried (the event store's
    /// payload hash): the projector compares it, it does not recompute it.
    fn apply_to_model(&mut self, task: TaskId, event: &TaskEvent, payload_sha256: Sha) -> Applied {
        let state = self
            .projector
            .models
            .get_or_insert_with(task, || Model {
                state: initial_state(event.task_id.clone()),
                applied: Vec::with_capacity(3),
            })
            .state
            .clone();
        // The state machine judges the order first (lesson 003 §7): an old
        // sequence is a duplicate or a history conflict, a gap is refetched.
        let result = match self.run_transition(&state, event) {
            Transition::Rejected {
                reason: RejectReason::SequenceGap,
            } if self.mutant == Some(Mutant::SkipSequenceGaps) => self.apply_over_gap(state, event),
            other => other,
        };
        match result {
            Transition::Accepted { next, .. } => {
                let model = self.projector.models.get_mut(task).expect("inserted above");
                model.state = next;
                while model.applied.len() < (event.sequence - 1) as usize {
                    model.applied.push((Text::from(""), [0; 32]));
                }
                model.applied.push((event.event_id.clone(), payload_sha256));
                self.touched.projection.push(task);
                Applied::Fresh
            }
            Transition::Rejected {
                reason: RejectReason::DuplicateOrOldSequence,
            } => {
                let model = self.projector.models.get(task).expect("modelled");
                let seen = usize::try_from(event.sequence - 1)
                    .ok()
                    .and_then(|index| model.applied.get(index));
                match seen {
                    Some((id, hash)) if *id == event.event_id && *hash == payload_sha256 => {
                        Applied::Duplicate
                    }
                    Some((id, _)) if *id == event.event_id => {
                        self.record_rejection(
                            task,
                            event,
                            payload_sha256,
                            "EVENT_ID_PAYLOAD_CONFLICT",
                        );
                        Applied::Conflict("EVENT_ID_PAYLOAD_CONFLICT")
                    }
                    _ => {
                        self.record_rejection(task, event, payload_sha256, "HISTORY_CONFLICT");
                        self.sometimes("history-conflict-reported");
                        Applied::Conflict("HISTORY_CONFLICT")
                    }
                }
            }
            Transition::Rejected {
                reason: RejectReason::SequenceGap,
            } => Applied::Gap,
            Transition::Rejected { reason } => {
                self.record_rejection(task, event, payload_sha256, reason.as_str());
                Applied::Conflict(reason.as_str())
            }
        }
    }

    /// Fills a gap from the event store, in order, up to `through`.
    fn refetch(&mut self, task: TaskId, through: i64) {
        let version = self
            .projector
            .models
            .get(task)
            .map_or(0, |model| model.state.version);
        let missing: Vec<(Arc<TaskEvent>, Sha)> = self
            .db
            .task(task)
            .events
            .iter()
            .filter(|stored| stored.event.sequence > version && stored.event.sequence <= through)
            .map(|stored| (Arc::clone(&stored.event), stored.payload_sha256))
            .collect();
        self.rec.outcome = "refetched";
        for (event, sha) in missing {
            if !matches!(self.apply_to_model(task, &event, sha), Applied::Fresh) {
                self.rec.outcome = "refetch-stopped";
                break;
            }
        }
    }

    /// Lazy recovery of one task in ONE read: the latest snapshot whose
    /// checks pass, the later events, and the state row to compare with.
    ///
    /// The row is read in place: what the read finds is judged while it is
    /// borrowed, and the reports and counters that need the world
    /// mutably follow, in the order they were found. (Copying the events,
    /// the snapshots and the state row out first, to be free of the
    /// borrow, cost a vector and a reference count per event at every
    /// rebuild.)
    fn rebuild(&mut self, task: TaskId) {
        let policy = self.config.cancel_policy;
        let trust = self.mutant == Some(Mutant::TrustSnapshot);
        let row = self.db.task(task);
        let row_state = &row.state;
        let applied: Vec<(Text, Sha)> = row
            .events
            .iter()
            .map(|stored| (stored.event.event_id.clone(), stored.payload_sha256))
            .collect();
        let events = || row.events.iter().map(|stored| &*stored.event);
        // Snapshots refused, newest first, with why; and how many failed
        // their hash.
        let mut refused: Vec<(i64, &'static str)> = Vec::new();
        let mut stale = 0;
        let mut start = None;
        for snapshot in row.snapshots.iter().rev() {
            let hash_checks = state_sha256(&snapshot.state) == snapshot.state_sha256;
            if !hash_checks {
                // What a `corrupt` snapshot write leaves: the damage landed
                // after hashing.
                stale += 1;
            }
            let sound = hash_checks
                && snapshot.state.task_id == row_state.task_id
                && snapshot.state.version == snapshot.through_sequence;
            if sound || trust {
                start = Some(snapshot);
                break;
            }
            refused.push((snapshot.through_sequence, "SNAPSHOT_HASH_MISMATCH"));
        }
        let mut outcome = "rebuilt-from-events";
        let mut state = None;
        let mut from_snapshot = None;
        if let Some(snapshot) = start {
            let later = events().filter(|event| event.sequence > snapshot.through_sequence);
            match fold(snapshot.state.clone(), later, policy) {
                Ok(rebuilt) if rebuilt == *row_state || trust => {
                    outcome = "rebuilt-from-snapshot";
                    from_snapshot = Some(true);
                    state = Some(rebuilt);
                }
                _ => {
                    // A snapshot whose hash matches its damaged state
                    // (`corrupt-rehashed`): only the replay shows it.
                    from_snapshot = Some(false);
                    refused.push((snapshot.through_sequence, "SNAPSHOT_MISMATCH"));
                }
            }
        }
        let state = match state {
            Some(state) => state,
            None => match fold(initial_state(row_state.task_id.clone()), events(), policy) {
                Ok(rebuilt) => rebuilt,
                Err(_) => {
                    outcome = "REPLAY_FAILED";
                    row_state.clone()
                }
            },
        };
        for _ in 0..stale {
            self.sometimes("snapshot-hash-stale");
        }
        match from_snapshot {
            Some(true) => self.sometimes("snapshot-used"),
            Some(false) => self.sometimes("snapshot-replay-mismatch"),
            None => {}
        }
        for (through_sequence, reason) in refused {
            self.report_snapshot(task, through_sequence, reason);
        }
        self.rec.outcome = outcome;
        self.rec.version = Some(state.version);
        self.projector.models.insert(task, Model { state, applied });
        self.touched.projection.push(task);
        self.sometimes("projection-rebuilt");
    }

    fn report_snapshot(&mut self, task: TaskId, through_sequence: i64, reason: &'static str) {
        if !self.db.reported_snapshots.insert((task, through_sequence)) {
            return;
        }
        self.db
            .snapshot_reports
            .push(crate::world::stores::db::SnapshotReport {
                task,
                through_sequence,
                reason,
                step: self.steps + 1,
            });
        self.db.review(
            Some(task),
            ReviewReason::SnapshotMismatch,
            format!("{task}@{through_sequence}"),
            self.now,
        );
        self.sometimes("snapshot-rejected");
    }
}
