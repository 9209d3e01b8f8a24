//! The final dump: canonical JSON (keys sorted, `schemaVersion` first-class)
//! of every table, the broker, the store, the cache, the projection, the
//! quota and the manual-review list (DESIGN §8).

use serde_json::{Map, Value, json};

use crate::hash::hex;
use crate::lesson_json::{event_to_json, state_to_json};
use crate::world::World;
use crate::world::stores::broker::EntryState;
use crate::world::stores::cache::{CacheEntry, cache_key};
use crate::world::stores::db::{Answer, CONSUMER, Payload, SCOPE};

pub const SCHEMA_VERSION: u64 = 1;

fn answer_json(answer: Answer) -> Value {
    match answer {
        Answer::Accepted(task) => json!({"status": "accepted", "taskId": task.to_string()}),
        Answer::Refused(code) => json!({"status": "refused", "errorCode": code}),
    }
}

fn opt_hex(sha: Option<crate::hash::Sha>) -> Value {
    sha.map_or(Value::Null, |sha| Value::String(hex(&sha)))
}

impl World {
    /// The whole dump as a JSON value (objects are sorted maps).
    pub fn dump(&self, scenario: &str) -> Value {
        let mut tasks = Map::new();
        let mut events = Map::new();
        let mut snapshots = Map::new();
        let mut evidence = Map::new();
        let mut ledger = Map::new();
        for row in &self.db.tasks {
            let mut task = state_to_json(&row.state);
            let object = task.as_object_mut().expect("a state is an object");
            object.insert(
                "idempotencyKey".into(),
                json!(format!("{SCOPE}:{}", row.key)),
            );
            object.insert("inputSha256".into(), json!(hex(&row.input_sha256)));
            if row.compacted {
                // Retention ended: its events, ledger, outbox and inbox rows
                // were compacted away.
                object.insert("compacted".into(), json!(true));
            }
            if let Some(replay) = row.replay_of {
                object.insert("replayOf".into(), json!(replay.to_string()));
            }
            if let Some(lease) = row.lease {
                object.insert(
                    "lease".into(),
                    json!({"attempt": lease.attempt, "holder": lease.holder.to_string(), "untilMs": lease.until_ms}),
                );
            }
            tasks.insert(row.id.to_string(), task);
            if !row.events.is_empty() {
                let list: Vec<Value> = row
                    .events
                    .iter()
                    .map(|stored| event_to_json(&stored.event))
                    .collect();
                events.insert(row.id.to_string(), Value::Array(list));
            }
            for stored in &row.events {
                let e = &stored.evidence;
                evidence.insert(
                    stored.event.event_id.to_string(),
                    json!({
                        "previousStatus": e.previous_status.as_str(),
                        "nextStatus": e.next_status.as_str(),
                        "eventId": e.event_id.as_ref(),
                        "completionWonCancellationRace": e.completion_won_cancellation_race,
                    }),
                );
            }
            if !row.snapshots.is_empty() {
                let list: Vec<Value> = row
                    .snapshots
                    .iter()
                    .map(|snapshot| {
                        json!({
                            "taskId": row.id.to_string(),
                            "throughSequence": snapshot.through_sequence,
                            "state": state_to_json(&snapshot.state),
                            "stateSha256": hex(&snapshot.state_sha256),
                            "reducerVersion": crate::world::stores::db::REDUCER_VERSION,
                        })
                    })
                    .collect();
                snapshots.insert(row.id.to_string(), Value::Array(list));
            }
            for effect in &row.effects {
                ledger.insert(
                    effect.token.to_string(),
                    json!({
                        "taskId": row.id.to_string(),
                        "attempt": effect.token.attempt,
                        "effectKind": effect.token.kind.as_str(),
                        "idempotencyToken": effect.token.to_string(),
                        "state": effect.state.as_str(),
                        "requestSha256": hex(&effect.request_sha256),
                        "observedResultSha256": opt_hex(effect.observed_sha256),
                        "errorCode": effect.error_code,
                        "fencedBy": effect.fenced_by.map(|a| a.to_string()),
                    }),
                );
            }
        }
        let mut idempotency = Map::new();
        for record in self.db.records() {
            idempotency.insert(
                format!("{SCOPE}:{}", record.key),
                json!({
                    "requestFingerprint": hex(&record.fingerprint),
                    "state": record.state.as_str(),
                    "response": answer_json(record.answer),
                    "committedMs": record.committed_ms,
                }),
            );
        }
        let mut outbox = Map::new();
        for row in self.db.outbox_rows() {
            outbox.insert(
                row.id.to_string(),
                json!({
                    "aggregateId": row.task.to_string(),
                    "aggregateVersion": row.aggregate_version,
                    "eventType": row.event_type,
                    "topic": row.topic.as_str(),
                    "payloadSha256": hex(&row.payload_sha256),
                    "publishedMs": row.published_ms,
                    "publishAttempts": row.publish_attempts,
                    "lastErrorCode": row.last_error,
                    "nextRetryMs": row.next_retry_ms,
                }),
            );
        }
        let mut inbox = Map::new();
        for row in self.db.inbox.values() {
            inbox.insert(
                format!("{CONSUMER}:{}", row.message),
                json!({
                    "payloadSha256": hex(&row.payload_sha256),
                    "state": row.state.as_str(),
                    "result": row.result.map(|r| r.as_str()),
                    "firstSeenMs": row.first_seen_ms,
                    "completedMs": row.completed_ms,
                }),
            );
        }
        let mut artifacts = Map::new();
        for (token, object) in self.store.all_objects() {
            let versions: Vec<Value> = object
                .versions
                .iter()
                .map(|version| {
                    json!({
                        "sha256": hex(&version.bytes_sha256),
                        "size": version.size,
                        "metadata": {
                            "taskId": version.metadata.task.to_string(),
                            "attempt": version.metadata.attempt,
                            "size": version.metadata.size,
                            "sha256": hex(&version.metadata.sha256),
                        },
                    })
                })
                .collect();
            artifacts.insert(
                token.to_string(),
                json!({"versions": versions, "hidden": object.hidden, "tombstone": object.tombstone}),
            );
        }
        let mut work = Vec::new();
        let mut task_events = Vec::new();
        for entry in self.broker.entries.values() {
            let state = match entry.state {
                EntryState::Ready { visible_ms } => json!({"ready": {"visibleMs": visible_ms}}),
                EntryState::InFlight {
                    deadline_ms,
                    consumer,
                } => {
                    json!({"inFlight": {"deadlineMs": deadline_ms, "consumer": consumer.to_string()}})
                }
            };
            let value = json!({
                "entry": entry.id.to_string(),
                "messageId": entry.message.to_string(),
                "taskId": entry.task.to_string(),
                "payloadSha256": hex(&entry.payload_sha256),
                "deliveries": entry.deliveries,
                "state": state,
            });
            match entry.topic {
                crate::world::stores::db::Topic::TaskWork => work.push(value),
                crate::world::stores::db::Topic::TaskEvents => task_events.push(value),
            }
        }
        let dead_letters: Vec<Value> = self
            .broker
            .dead_letters
            .iter()
            .map(|letter| {
                let attempt = match &letter.payload {
                    Payload::Work { attempt, .. } => Some(*attempt),
                    Payload::Event(_) => None,
                };
                json!({
                    "id": letter.id.to_string(),
                    "topic": letter.topic.as_str(),
                    "messageId": letter.message.to_string(),
                    "taskId": letter.task.to_string(),
                    "taskAttempt": attempt,
                    "payloadSha256": hex(&letter.payload_sha256),
                    "errorCode": letter.error_code,
                    "handlerVersion": letter.handler_version,
                    "attempts": letter.attempts,
                    "deadLetteredMs": letter.dead_lettered_ms,
                    "replayedAs": self.db.replays.get(&letter.id).map(|t| t.to_string()),
                })
            })
            .collect();
        let mut cache = Map::new();
        for (task, entry) in self.cache.entries.iter() {
            let value = match entry {
                CacheEntry::View { status, version } => {
                    json!({"status": status.as_str(), "version": version})
                }
                CacheEntry::Tombstone { version } => json!({"tombstone": version}),
            };
            cache.insert(cache_key(task), value);
        }
        let mut projection = Map::new();
        for (task, model) in self.projector.models.iter() {
            projection.insert(task.to_string(), state_to_json(&model.state));
        }
        let manual_review: Vec<Value> = self
            .db
            .manual_review
            .iter()
            .map(|item| {
                json!({
                    "taskId": item.task.map(|t| t.to_string()),
                    "reason": item.reason.as_str(),
                    "subject": item.subject,
                    "addedMs": item.added_ms,
                })
            })
            .collect();
        let snapshot_reports: Vec<Value> = self
            .db
            .snapshot_reports
            .iter()
            .map(|report| {
                json!({
                    "taskId": report.task.to_string(),
                    "throughSequence": report.through_sequence,
                    "reason": report.reason,
                    "step": report.step,
                })
            })
            .collect();
        let rejections: Vec<Value> = self
            .db
            .rejections
            .iter()
            .map(|r| {
                json!({
                    "step": r.step,
                    "taskId": r.task.to_string(),
                    "eventId": r.event_id.as_ref(),
                    "eventType": r.event_type,
                    "reason": r.reason,
                    "actor": r.actor.to_string(),
                })
            })
            .collect();
        let violations: Vec<Value> = self
            .violation
            .iter()
            .map(|v| {
                json!({
                    "invariant": v.invariant,
                    "step": v.step,
                    "timeMs": v.time_ms,
                    "message": v.message,
                    "entities": v.entities,
                })
            })
            .collect();
        let accepted = self.db.quota_total - self.db.quota_remaining;
        let dump = json!({
            "schemaVersion": SCHEMA_VERSION,
            "scenario": scenario,
            "seed": self.seed,
            "steps": self.steps,
            "virtualTimeMs": self.last_step_ms,
            "traceSha256": hex(&self.trace.sha256()),
            "handlerVersion": self.handler_version,
            "tasks": tasks,
            "idempotency": idempotency,
            "outbox": outbox,
            "inbox": inbox,
            "ledger": ledger,
            "events": events,
            "snapshots": snapshots,
            "snapshotReports": snapshot_reports,
            "evidence": evidence,
            "rejections": rejections,
            "rejectionsTotal": self.db.rejections_total,
            "artifacts": artifacts,
            "broker": {
                "topics": {"task-work": work, "task-events": task_events},
                "deadLetters": dead_letters,
            },
            "cache": cache,
            "projection": projection,
            "quota": {"total": self.db.quota_total, "remaining": self.db.quota_remaining, "accepted": accepted},
            "manualReview": manual_review,
            "counters": {
                "tasksTerminal": self.counters.tasks_terminal,
                "invariantChecks": self.counters.invariant_checks,
                "faultsInjected": self.faults.injected.len(),
            },
            "violations": violations,
        });
        // What each request got back, when the run kept it (`sim run`).
        let mut dump = dump;
        if let Some(answers) = &self.answers {
            dump["requests"] = Value::Array(answers.list.clone());
        }
        dump
    }
}
