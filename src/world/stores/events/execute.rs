//! The event store's command handler: check the version, run `transition`, append the event, its state row and its outbox row in one transaction.

use crate::faults::{FaultKind, Site};
use crate::hash::{Sha, hex_text};
use crate::mutants::Mutant;
use crate::task::json::{Sink, emit_i64};
use crate::task::json::{event_payload_sha256, state_sha256};
use crate::task::replay::fold;
use crate::task::{EventBody, RejectReason, TaskEvent, TaskState, Transition, transition};
use crate::world::World;
use crate::world::engine::ids::{ActorKind, OutboxId, TaskId, TextBuf};
use crate::world::stores::db::{OutboxRow, Payload, Rejection, Snapshot, StoredEvent, Topic};
use std::sync::Arc;

use super::*;

impl World {
    /// Runs the transition with the mutant's guard switched off if asked,
    /// and counts coverage.
    pub fn run_transition(&mut self, state: &TaskState, event: &TaskEvent) -> Transition {
        let policy = self.config.cancel_policy;
        let mut result = transition(state, event, policy);
        if self.mutant == Some(Mutant::NoTerminalGuard)
            && matches!(
                result,
                Transition::Rejected {
                    reason: RejectReason::TerminalState
                }
            )
        {
            result = self.apply_past_terminal(state, event);
        }
        *self
            .counters
            .transitions
            .entry((state.status, event.event_type()))
            .or_insert(0) += 1;
        if let Transition::Rejected { reason } = &result {
            *self.counters.rejections.entry(reason.as_str()).or_insert(0) += 1;
        }
        result
    }

    /// Handles a command on `task` decided at `expected_version`, inside the
    /// caller's transaction.
    pub fn execute(
        &mut self,
        task: TaskId,
        expected_version: i64,
        command: Command,
    ) -> CommandOutcome {
        let row = self.db.task(task);
        let current = row.state.clone();
        let kind = command.event_type();
        let attempt = match &command {
            Command::StartTask { attempt, .. }
            | Command::CompleteTask { attempt, .. }
            | Command::FailAttempt { attempt, .. }
            | Command::FailTask { attempt, .. } => i64::from(*attempt),
            Command::RequestCancellation { .. } | Command::ConfirmCancelled => current.attempt,
        };
        let signal = match &command {
            Command::RequestCancellation { signal, .. } => Some(signal.to_string()),
            _ => None,
        };
        // A fact re-issued after a crash: reuse what is stored.
        let semantic_duplicate = semantic_key_taken(&row.events, kind, attempt, signal.as_deref());
        if semantic_duplicate {
            return CommandOutcome::Duplicate {
                version: current.version,
            };
        }
        let blind = self.mutant == Some(Mutant::BlindStatusWrite);
        if current.version != expected_version && !blind {
            return CommandOutcome::VersionConflict;
        }
        // The blind writer computes from the state it read, not the row.
        let base = if blind && current.version != expected_version {
            let prefix = row
                .events
                .iter()
                .filter(|stored| stored.event.sequence <= expected_version)
                .map(|stored| &*stored.event);
            match fold(
                crate::task::initial_state(current.task_id.clone()),
                prefix,
                self.config.cancel_policy,
            ) {
                Ok(state) => state,
                Err(_) => current,
            }
        } else {
            current
        };
        let event = self.event_for(task, &base, command, attempt, signal);
        let payload_sha256 = event_payload_sha256(&event);
        match self.run_transition(&base, &event) {
            Transition::Accepted { next, evidence } => {
                self.commit_event(task, event, payload_sha256, next, evidence, attempt);
                CommandOutcome::Committed {
                    version: self.db.task(task).state.version,
                }
            }
            Transition::Rejected { reason } => {
                self.record_rejection(task, &event, payload_sha256, reason.as_str());
                CommandOutcome::Rejected(reason)
            }
        }
    }

    fn event_for(
        &self,
        task: TaskId,
        base: &TaskState,
        command: Command,
        attempt: i64,
        signal: Option<String>,
    ) -> TaskEvent {
        let kind = command.event_type();
        // `<task>:<type>:<attempt>[:<signal>]`, built without `format!`
        // (one per event, on the hot path).
        let mut event_id = TextBuf::new();
        task.push_to(&mut event_id);
        event_id.put(":");
        event_id.put(kind.as_str());
        event_id.put(":");
        emit_i64(&mut event_id, attempt);
        if let Some(signal) = &signal {
            event_id.put(":");
            event_id.put(signal);
        }
        let event_id = event_id.text();
        let body = match command {
            Command::StartTask {
                attempt,
                worker,
                lease_until_ms,
            } => EventBody::TaskStarted {
                attempt: i64::from(attempt),
                worker_id: self.actor_name(worker),
                lease_until_epoch_ms: lease_until_ms as i64,
            },
            Command::RequestCancellation { reason, .. } => EventBody::CancellationRequested {
                signal_id: signal.unwrap_or_default().into(),
                requester: "user".into(),
                reason: reason.into(),
            },
            Command::CompleteTask {
                attempt,
                artifact_sha256,
            } => EventBody::TaskCompleted {
                attempt: i64::from(attempt),
                artifact_sha256: hex_text(&artifact_sha256),
                artifact_verified: true,
            },
            Command::FailAttempt {
                attempt,
                error_code,
            } => EventBody::AttemptFailed {
                attempt: i64::from(attempt),
                error_code: error_code.into(),
                retryable: true,
                next_attempt: i64::from(attempt) + 1,
            },
            Command::FailTask {
                attempt,
                error_code,
            } => EventBody::TaskFailed {
                attempt: i64::from(attempt),
                error_code: error_code.into(),
            },
            Command::ConfirmCancelled => EventBody::TaskCancelled {
                stopped_at_sequence: base.version,
                effects_reconciled: true,
            },
        };
        TaskEvent {
            event_id,
            task_id: base.task_id.clone(),
            sequence: base.version + 1,
            body,
        }
    }

    pub fn record_rejection(
        &mut self,
        task: TaskId,
        event: &TaskEvent,
        payload_sha256: Sha,
        reason: &'static str,
    ) {
        let rejection = Rejection {
            step: self.steps + 1,
            task,
            event_id: event.event_id.clone(),
            payload_sha256,
            event_type: event.event_type().as_str(),
            reason,
            actor: self.rec.actor,
        };
        self.db.reject(rejection);
    }

    /// Appends an accepted event: event row, state row, evidence, the
    /// event's outbox row on `task-events`, and a snapshot when one is due.
    fn commit_event(
        &mut self,
        task: TaskId,
        event: TaskEvent,
        payload_sha256: Sha,
        next: TaskState,
        evidence: crate::task::Evidence,
        attempt: i64,
    ) {
        let now = self.now;
        let was_terminal = self.db.task(task).state.status.is_terminal();
        let becomes_terminal = next.status.is_terminal();
        if evidence.completion_won_cancellation_race {
            self.sometimes("completion-won-cancellation-race");
        }
        let sequence = event.sequence;
        let actor = self.rec.actor;
        if matches!(actor.kind, ActorKind::Worker | ActorKind::Reconciler) {
            let commit = crate::world::Commit {
                task,
                kind: event.event_type(),
                attempt,
                actor,
                incarnation: self.life(actor).incarnation,
                lease: self.db.task(task).lease,
            };
            self.touched.commits.push(commit);
        }
        let event = Arc::new(event);
        self.insert_event_row(task, Arc::clone(&event), payload_sha256);
        let row = self.db.task_mut(task);
        crate::world::stores::db::push_sized(
            &mut row.events,
            2,
            StoredEvent {
                event,
                payload_sha256,
                evidence,
                appended_ms: now,
                attempt,
            },
        );
        row.state = next;
        let snapshot_every = self.config.snapshot_every as i64;
        if snapshot_every > 0 && sequence % snapshot_every == 0 {
            self.write_snapshot(task);
        }
        if becomes_terminal && !was_terminal {
            self.counters.tasks_terminal += 1;
            let row = self.db.task_mut(task);
            if std::mem::take(&mut row.retention_parked) {
                let key = row.key.clone();
                self.db.retain_until(now, key);
            }
            if self.db.task(task).lease.is_some() {
                self.drop_lease(task);
            }
        }
        self.touched.tasks.push(task);
        self.rec.task = Some(task);
        self.rec.version = Some(sequence);
        self.rec.hash = Some(payload_sha256);
        self.poke_publishers();
    }

    /// A `task-events` outbox row carrying `event`, ready now.
    pub(in crate::world) fn insert_event_row(
        &mut self,
        task: TaskId,
        event: Arc<TaskEvent>,
        payload_sha256: Sha,
    ) -> OutboxId {
        let id = self.db.next_outbox_id();
        let now = self.now;
        self.db.insert_outbox(OutboxRow {
            id,
            task,
            topic: Topic::TaskEvents,
            event_type: event.event_type().as_str(),
            aggregate_version: event.sequence,
            payload: Payload::Event(event),
            payload_sha256,
            created_ms: now,
            ready_ms: now,
            published_ms: None,
            publish_attempts: 0,
            last_error: None,
            next_retry_ms: now,
            lease: None,
            claimable_ms: None,
        });
        id
    }

    fn write_snapshot(&mut self, task: TaskId) {
        let mut state = self.db.task(task).state.clone();
        let mut state_sha256 = state_sha256(&state);
        match self.fault(Site::SnapshotWrite) {
            Some(FaultKind::Corrupt) => {
                // The damage lands after hashing: the hash is left stale.
                damage(&mut state);
            }
            Some(FaultKind::CorruptRehashed) => {
                damage(&mut state);
                state_sha256 = crate::task::json::state_sha256(&state);
            }
            _ => {}
        }
        let through_sequence = self.db.task(task).state.version;
        self.db.task_mut(task).snapshots.push(Snapshot {
            through_sequence,
            state,
            state_sha256,
        });
    }

    /// Lesson 003's `applyEvent` for an event that comes from outside the
    /// pipeline's actors (`append-event` requests): dedupe by event id and
    /// payload hash, then transition at the event's own sequence.
    pub fn append_external(&mut self, event: TaskEvent) -> &'static str {
        let Some(task) =
            TaskId::parse(&event.task_id).filter(|id| self.db.find_task(*id).is_some())
        else {
            return "TASK_NOT_FOUND";
        };
        let payload_sha256 = event_payload_sha256(&event);
        self.rec.task = Some(task);
        self.rec.hash = Some(payload_sha256);
        let existing = self
            .db
            .task(task)
            .payload_of(&event.event_id)
            .or_else(|| {
                // Event ids are unique across tasks: an id in another task's
                // own namespace (`task-N:…`) names that task's event.
                let owner = event
                    .event_id
                    .split_once(':')
                    .and_then(|(prefix, _)| TaskId::parse(prefix))
                    .filter(|owner| *owner != task)?;
                self.db.find_task(owner)?.payload_of(&event.event_id)
            })
            .or_else(|| {
                self.db
                    .foreign_event_ids
                    .get(&event.event_id)
                    .map(|(owner, sequence)| {
                        self.db
                            .task(*owner)
                            .events
                            .iter()
                            .find(|stored| stored.event.sequence == *sequence)
                            .map_or([0; 32], |stored| stored.payload_sha256)
                    })
            });
        if let Some(stored_sha) = existing {
            if stored_sha == payload_sha256 {
                return "duplicate";
            }
            let subject = event.event_id.to_string();
            self.db.review(
                Some(task),
                crate::world::stores::db::ReviewReason::EventIdPayloadConflict,
                subject,
                self.now,
            );
            self.record_rejection(task, &event, payload_sha256, "EVENT_ID_PAYLOAD_CONFLICT");
            self.sometimes("event-id-payload-conflict");
            return "EVENT_ID_PAYLOAD_CONFLICT";
        }
        let current = self.db.task(task).state.clone();
        let attempt = event_attempt(&event, &current);
        let semantic_taken = semantic_key_taken(
            &self.db.task(task).events,
            event.event_type(),
            attempt,
            signal_of(&event),
        );
        match self.run_transition(&current, &event) {
            Transition::Accepted { .. } if semantic_taken => {
                self.record_rejection(task, &event, payload_sha256, "SEMANTIC_KEY_CONFLICT");
                "SEMANTIC_KEY_CONFLICT"
            }
            Transition::Accepted { next, evidence } => {
                if !event.event_id.starts_with(&format!("{task}:")) {
                    self.db
                        .foreign_event_ids
                        .insert(event.event_id.clone(), (task, event.sequence));
                }
                self.commit_event(task, event, payload_sha256, next, evidence, attempt);
                "committed"
            }
            Transition::Rejected { reason } => {
                self.record_rejection(task, &event, payload_sha256, reason.as_str());
                reason.as_str()
            }
        }
    }
}

/// What a corrupted snapshot write damages: one field of the state, chosen
/// by its version (no draw, so the fault stream stays as it was) so that
/// over a run every field the state hash must cover is damaged somewhere:
/// the attempt, the status, or the holder's name.
fn damage(state: &mut crate::task::TaskState) {
    let before = state.clone();
    match state.version % 3 {
        0 => state.attempt += 1,
        1 => {
            let at = crate::task::Status::ALL
                .iter()
                .position(|status| *status == state.status)
                .unwrap_or(0);
            state.status = crate::task::Status::ALL[(at + 1) % crate::task::Status::ALL.len()];
        }
        _ => {
            let named = state.worker_id.as_deref().unwrap_or("");
            state.worker_id = Some(format!("{named}~").into());
        }
    }
    // A corrupt write that damages nothing would report a fault that
    // never happened: a bug in sim, reported with the seed.
    assert!(
        *state != before,
        "a corrupted snapshot of {} left it unchanged",
        state.task_id
    );
}
