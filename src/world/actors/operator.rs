//! Operator actions from scenario requests: bump the handler version,
//! replay a dead letter as a NEW task, append an event from outside the
//! pipeline, or hand an event straight to the projector.

use crate::task::Text;
use crate::world::input::{DeadLetterRef, RequestKind};

use crate::faults::{FaultKind, Site};
use crate::world::World;
use crate::world::engine::ids::{ActorId, DeadLetterId, EntryId, OutboxId, TaskId};
use crate::world::engine::step::Verb;
use crate::world::stores::broker::Delivery;
use crate::world::stores::db::{Answer, Payload, RecordState, Topic};

impl World {
    pub(in crate::world) fn operator_step(&mut self, kind: &RequestKind) -> bool {
        if !self.workload_on {
            return false;
        }
        match kind {
            RequestKind::BumpHandlerVersion { version } => {
                self.begin(ActorId::OPERATOR, Verb::BumpHandlerVersion);
                self.handler_version = *version;
                self.rec.outcome = "bumped";
                self.rec.version = Some(*version as i64);
            }
            RequestKind::ReplayDeadLetter { dead_letter } => {
                self.begin(ActorId::OPERATOR, Verb::ReplayDeadLetter);
                let asked = self.find_dead_letter(dead_letter);
                self.replay_dead_letter(dead_letter);
                // The replay was owed a task from the moment it was asked
                // for (`issue`); a transaction the fault injector rolled
                // back owes none.
                let rolled_back =
                    self.rec.fault == Some((Site::DbCommit, FaultKind::CrashBeforeCommit));
                if let Some(id) = asked.filter(|_| rolled_back)
                    && let Some(at) = self.replays_owed.iter().rposition(|owed| *owed == id)
                {
                    self.replays_owed.remove(at);
                }
            }
            RequestKind::AppendEvent { event } => {
                self.begin(ActorId::OPERATOR, Verb::AppendEvent);
                if self.commit_fault() != Some(false) {
                    let outcome = self.append_external(event.clone());
                    self.rec.outcome = outcome;
                    self.touched.appends.push((event.clone(), outcome));
                }
            }
            RequestKind::DeliverEvent { event } => {
                self.begin(ActorId::OPERATOR, Verb::DeliverEvent);
                let task = TaskId::parse(&event.task_id).unwrap_or(TaskId(u32::MAX));
                let payload = Payload::Event(std::sync::Arc::new(event.clone()));
                let payload_sha256 = payload.sha256();
                let delivery = Delivery {
                    entry: EntryId(0),
                    topic: Topic::TaskEvents,
                    message: OutboxId(0),
                    task,
                    payload,
                    payload_sha256,
                    count: 0,
                    tampered: false,
                    direct: true,
                };
                self.rec.task = Some(task).filter(|t| t.0 != u32::MAX);
                self.rec.hash = Some(payload_sha256);
                self.rec.outcome = "handed-to-projector";
                let at = self.now;
                self.projector_receive(delivery, at);
            }
            RequestKind::Create { .. }
            | RequestKind::Cancel { .. }
            | RequestKind::ReadStatus { .. } => {
                unreachable!("client requests are sent by clients")
            }
        }
        self.finish();
        true
    }

    pub(in crate::world) fn find_dead_letter(
        &self,
        reference: &DeadLetterRef,
    ) -> Option<DeadLetterId> {
        let letters = &self.broker.dead_letters;
        match reference {
            DeadLetterRef::Id(id) => letters.get(id.slot()).map(|letter| letter.id),
            DeadLetterRef::Message(message) => letters
                .iter()
                .find(|letter| letter.message == *message)
                .map(|letter| letter.id),
            DeadLetterRef::Task(task) => letters
                .iter()
                .find(|letter| letter.task == *task && letter.topic == Topic::TaskWork)
                .map(|letter| letter.id),
        }
    }

    /// Replays a dead letter as a NEW task linked by `replayOf`, idempotent
    /// by the dead letter's id, outside the client quota. A terminal task
    /// never reopens.
    fn replay_dead_letter(&mut self, reference: &DeadLetterRef) {
        let found = self.find_dead_letter(reference);
        self.touched.replays.push((reference.clone(), found));
        let Some(id) = found else {
            self.rec.outcome = "DEAD_LETTER_NOT_FOUND";
            return;
        };
        if self.commit_fault() == Some(false) {
            return;
        }
        if let Some(task) = self.db.replays.get(&id) {
            self.rec.task = Some(*task);
            self.rec.outcome = "duplicate";
            return;
        }
        let letter = self
            .broker
            .dead_letter_by_id(id)
            .expect("found above")
            .clone();
        let original = self.db.task(letter.task);
        let (input, fingerprint) = (original.input.clone(), original.fingerprint);
        let replays = self
            .db
            .replays
            .values()
            .filter(|task| {
                self.db
                    .task(**task)
                    .replay_of
                    .is_some_and(|d| self.broker.dead_letters[d.slot()].task == letter.task)
            })
            .count();
        // The key keeps the key format (at most 80 characters) by keeping
        // the first 60 of the task's, and n counts this task's replays
        // only: two long keys alike in those 60, or two tasks made in turn
        // under one key (its record expired between them), name the same
        // replay key. As the database's unique key would, a key a live
        // record holds is passed over for the next n.
        let base: String = original.key.chars().take(60).collect();
        let key: Text = (replays + 1..)
            .map(|n| Text::from(format!("{base}-replay-{n}")))
            .find(|key| self.db.record(key).is_none())
            .expect("a live record holds one of finitely many keys");
        let task = self.insert_task(&key, &input, fingerprint, Some(id), true);
        self.insert_record(
            &key,
            fingerprint,
            RecordState::Succeeded,
            Answer::Accepted(task),
        );
        self.db.replays.insert(id, task);
        // Not a create the API checks: the operator replays what it accepted.
        let intent = self.intent_for(&key, fingerprint, true, true);
        self.touched
            .answers
            .push((intent, Answer::Accepted(task), self.now));
        self.sometimes("dead-letter-replayed");
        self.rec.outcome = "replayed";
    }
}
