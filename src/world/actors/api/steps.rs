//! The API's steps for create, cancel and read-status: validation, the one create transaction, the cache-aside read, the answer.

use crate::faults::{FaultKind, Site};
use crate::hash::Sha;
use crate::mutants::Mutant;
use crate::task::{Status, Text, initial_state};
use crate::world::World;
use crate::world::actors::client::ClientOp;
use crate::world::engine::ids::{
    ActorId, ActorKind, CallId, DeadLetterId, IntentId, RequestId, SignalId, TaskId, TextBuf,
};
use crate::world::engine::schedule::Wake;
use crate::world::engine::step::Verb;
use crate::world::input::Target;
use crate::world::stores::db::{
    Answer, IdempotencyRecord, Input, OutboxRow, Payload, RecordState, TaskRow, Topic, WorkKind,
};
use crate::world::stores::events::{Command, CommandOutcome};
use std::sync::Arc;

use super::*;

mod mutant_hooks;

impl World {
    pub(in crate::world) fn api_step(&mut self, call_id: CallId) -> bool {
        let Some(call) = self.calls.get(call_id) else {
            return false;
        };
        let (api, incarnation, intent, request, phase) = (
            call.api,
            call.incarnation,
            call.intent,
            call.request,
            call.phase,
        );
        let life = self.apis[api as usize];
        if !life.up || life.incarnation != incarnation {
            self.remove_call(call_id);
            return false;
        }
        let reads = matches!(*call.op, ClientOp::Read { .. });
        // Half of a call's steps (the read's later phases, every answer)
        // need nothing of its operation: only the others take a counted
        // reference to it, which lets the step borrow it while it changes
        // the world.
        let op = match phase {
            ApiPhase::ReadDb { .. } | ApiPhase::FillCache { .. } | ApiPhase::Respond(_) => None,
            _ => Some(std::sync::Arc::clone(&call.op)),
        };
        let actor = ActorId::new(ActorKind::Api, api);
        let next = match (phase, op.as_deref()) {
            (ApiPhase::Arrive, Some(ClientOp::Create { input, .. }))
                if self.mutant == Some(Mutant::PublishBeforeCommit) =>
            {
                self.begin(actor, Verb::Publish);
                self.api_publish_before_commit(input)
            }
            (
                ApiPhase::Arrive | ApiPhase::CreateAfterPublish,
                Some(ClientOp::Create {
                    key,
                    input,
                    fingerprint,
                }),
            ) => {
                self.begin(actor, Verb::Create);
                self.api_create(intent, key, input, *fingerprint)
            }
            (
                ApiPhase::InsertRecord,
                Some(ClientOp::Create {
                    key,
                    input,
                    fingerprint,
                }),
            ) => {
                self.begin(actor, Verb::InsertRecord);
                self.api_insert_after_check(intent, key, input, *fingerprint)
            }
            (
                ApiPhase::WriteQuota { remaining },
                Some(ClientOp::Create {
                    key,
                    input,
                    fingerprint,
                }),
            ) => {
                self.begin(actor, Verb::Create);
                self.api_write_quota(intent, key, input, *fingerprint, remaining)
            }
            (
                ApiPhase::CreateTask { task },
                Some(ClientOp::Create {
                    key, fingerprint, ..
                }),
            ) => {
                self.begin(actor, Verb::CreateTask);
                self.api_finish_split_create(intent, key, *fingerprint, task)
            }
            (ApiPhase::Publish { task }, Some(ClientOp::Create { input, .. })) => {
                self.begin(actor, Verb::Publish);
                self.publish_direct(task, input);
                let answer = Answer::Accepted(task);
                Some(ApiPhase::Respond(Response::Create(answer)))
            }
            (ApiPhase::Arrive, Some(ClientOp::Cancel { target })) => {
                if self.mutant == Some(Mutant::CacheWriteBeforeDb) {
                    self.begin(actor, Verb::FillCache);
                    self.api_cache_before_cancel(target)
                } else {
                    self.begin(actor, Verb::Cancel);
                    self.api_cancel(request, target)
                }
            }
            (ApiPhase::CancelAfterCacheWrite, Some(ClientOp::Cancel { target })) => {
                self.begin(actor, Verb::Cancel);
                self.api_cancel(request, target)
            }
            (ApiPhase::Arrive, Some(ClientOp::Read { target })) => {
                self.begin(actor, Verb::ReadCache);
                self.api_read_cache(target)
            }
            (ApiPhase::ReadDb { task }, None) if reads => {
                self.begin(actor, Verb::ReadDb);
                self.api_read_db(task)
            }
            (
                ApiPhase::FillCache {
                    task,
                    status,
                    version,
                },
                None,
            ) if reads => {
                self.begin(actor, Verb::FillCache);
                self.rec.task = Some(task);
                self.rec.version = Some(version);
                self.touched.cache.push(task);
                self.touched.fills.push((task, self.cache.get(task)));
                let filled = self.cache.fill(task, status, version);
                self.rec.outcome = match filled {
                    crate::world::stores::cache::Fill::Stored => "stored",
                    crate::world::stores::cache::Fill::Refused => "refused",
                };
                Some(ApiPhase::Respond(Response::Status(Some((
                    task, status, version,
                )))))
            }
            (ApiPhase::Respond(response), None) => {
                self.begin(actor, Verb::Respond);
                self.rec.outcome = match &response {
                    Response::Create(Answer::Accepted(task)) => {
                        self.rec.task = Some(*task);
                        "accepted"
                    }
                    Response::Create(Answer::Refused(code)) => code,
                    Response::Cancel(Ok(_)) => "cancel-accepted",
                    Response::Cancel(Err(code)) => code,
                    Response::Status(Some((task, status, version))) => {
                        self.rec.task = Some(*task);
                        self.rec.version = Some(*version);
                        status.as_str()
                    }
                    Response::Status(None) => "TASK_NOT_FOUND",
                };
                if self.fault(Site::ApiResponse) == Some(FaultKind::Lost) {
                    self.rec.outcome = "lost";
                } else {
                    self.deliver_response(request, response);
                }
                None
            }
            (phase, _) => unreachable!(
                "API phase {phase:?} does not fit {:?}",
                self.calls.get(call_id).map(|call| &call.op)
            ),
        };
        self.finish();
        let api_up = self.apis[api as usize].incarnation == incarnation;
        match next {
            Some(phase) if api_up => {
                self.calls.set_phase(call_id, phase);
                let delay = self.latency();
                let at = self.now + self.stretched(actor, delay);
                self.schedule(at, Wake::Call(call_id));
            }
            _ => {
                self.remove_call(call_id);
            }
        }
        true
    }

    fn remove_call(&mut self, call_id: CallId) {
        if let Some(call) = self.calls.remove(call_id) {
            self.end_call(&call);
        }
    }

    /// What ends with a call taken out of `calls`: its hold on its intent.
    pub(in crate::world) fn end_call(&mut self, call: &Call) {
        self.release_intent(call.intent);
    }

    /// The answer an intent got, for ground truth.
    fn answered(&mut self, intent: Option<IntentId>, answer: Answer) {
        if let Some(intent) = intent {
            self.touched.answers.push((intent, answer, self.now));
        }
        if let Answer::Accepted(task) = answer {
            self.rec.task = Some(task);
        }
    }

    /// The create transaction (lesson 000 §3.1, DESIGN §3 "Create").
    fn api_create(
        &mut self,
        intent: Option<IntentId>,
        key: &Text,
        input: &Arc<Input>,
        fingerprint: Sha,
    ) -> Option<ApiPhase> {
        self.rec.hash = Some(fingerprint);
        // A refusal before any read is an answer to the intent too: ground
        // truth judges it against the lesson's rule.
        if !valid_key(key) {
            self.rec.outcome = "INVALID_IDEMPOTENCY_KEY";
            self.answered(intent, Answer::Refused("INVALID_IDEMPOTENCY_KEY"));
            return Some(ApiPhase::Respond(Response::Create(Answer::Refused(
                "INVALID_IDEMPOTENCY_KEY",
            ))));
        }
        if !valid_input(input) {
            self.rec.outcome = "INVALID_INPUT";
            self.answered(intent, Answer::Refused("INVALID_INPUT"));
            return Some(ApiPhase::Respond(Response::Create(Answer::Refused(
                "INVALID_INPUT",
            ))));
        }
        if self.mutant == Some(Mutant::SplitIdempotencyInsert) {
            // Check now, insert in a later step, with no unique key between.
            return match self.lookup(key, fingerprint) {
                Some(answer) => self.reply_create(intent, answer),
                None => {
                    self.rec.outcome = "key-absent";
                    Some(ApiPhase::InsertRecord)
                }
            };
        }
        if self.mutant == Some(Mutant::QuotaReadThenWrite)
            && self.lookup(key, fingerprint).is_none()
        {
            self.rec.outcome = "quota-read";
            return Some(ApiPhase::WriteQuota {
                remaining: self.db.quota_remaining,
            });
        }
        let crash = self.commit_fault();
        if crash == Some(false) {
            return None;
        }
        let answer = match self.lookup(key, fingerprint) {
            Some(answer) => answer,
            None => self.insert_new(key, input, fingerprint),
        };
        if let Some(next) = self.api_split_after_commit(intent, answer, crash) {
            return next;
        }
        if crash == Some(true) {
            self.answered(intent, answer);
            return None;
        }
        self.reply_create(intent, answer)
    }

    fn reply_create(&mut self, intent: Option<IntentId>, answer: Answer) -> Option<ApiPhase> {
        self.reply_then(intent, answer, ApiPhase::Respond(Response::Create(answer)))
    }

    fn reply_then(
        &mut self,
        intent: Option<IntentId>,
        answer: Answer,
        next: ApiPhase,
    ) -> Option<ApiPhase> {
        self.answered(intent, answer);
        if self.rec.outcome == "ok" {
            self.rec.outcome = match answer {
                Answer::Accepted(_) => "accepted",
                Answer::Refused(code) => code,
            };
        }
        Some(next)
    }

    /// The record for `key`, if one answers this request.
    fn lookup(&mut self, key: &Text, fingerprint: Sha) -> Option<Answer> {
        self.touched.keys.push(key.clone());
        let record = self.db.record(key)?;
        if record.fingerprint == fingerprint || self.mutant == Some(Mutant::NoFingerprintCheck) {
            self.rec.outcome = "replayed";
            Some(record.answer)
        } else {
            Some(Answer::Refused(
                "IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST",
            ))
        }
    }

    /// A new key: conditional quota decrement, then record + task + outbox
    /// row, or a recorded refusal.
    fn insert_new(&mut self, key: &Text, input: &Arc<Input>, fingerprint: Sha) -> Answer {
        if self.db.quota_remaining == 0 {
            let answer = Answer::Refused("QUOTA_EXCEEDED");
            self.insert_record(key, fingerprint, RecordState::FailedFinal, answer);
            return answer;
        }
        self.db.quota_remaining -= 1;
        let task_only = matches!(
            self.mutant,
            Some(Mutant::PublishBeforeCommit)
                | Some(Mutant::PublishAfterCommit)
                | Some(Mutant::SplitCreateTransaction)
        );
        let task = self.insert_task(key, input, fingerprint, None, !task_only);
        let answer = Answer::Accepted(task);
        // `split-create-transaction` writes the record in a second
        // transaction.
        if self.mutant != Some(Mutant::SplitCreateTransaction) {
            self.insert_record(key, fingerprint, RecordState::Succeeded, answer);
        }
        answer
    }

    pub(in crate::world) fn insert_record(
        &mut self,
        key: &Text,
        fingerprint: Sha,
        state: RecordState,
        answer: Answer,
    ) {
        self.touched.keys.push(key.clone());
        self.db.put_record(IdempotencyRecord {
            key: key.clone(),
            fingerprint,
            state,
            answer,
            committed_ms: self.now,
            kept_since_ms: None,
        });
        let keep = if self.mutant == Some(Mutant::EarlyIdempotencyExpiry) {
            self.early_record_keep_ms()
        } else {
            self.config.idempotency_ttl_ms
        };
        self.db.retain_until(self.now + keep, key.clone());
    }

    /// Inserts a queued task at version 0 and, unless told otherwise, its
    /// `TaskCreated` outbox row on `task-work`.
    pub(in crate::world) fn insert_task(
        &mut self,
        key: &Text,
        input: &Arc<Input>,
        fingerprint: Sha,
        replay_of: Option<DeadLetterId>,
        write_outbox: bool,
    ) -> TaskId {
        let id = self.db.next_task_id();
        let mut task_id = TextBuf::new();
        id.push_to(&mut task_id);
        let task_id = task_id.text();
        self.db.tasks.push(TaskRow {
            id,
            state: initial_state(task_id),
            key: key.clone(),
            fingerprint,
            input: input.clone(),
            input_sha256: input.sha256,
            replay_of,
            created_ms: self.now,
            // Most tasks have two events, one effect and three outbox rows;
            // the lists of events and effects are sized on their first push
            // (`db::push_sized`), so a task still queued holds none.
            events: Vec::new(),
            snapshots: Vec::new(),
            effects: Vec::new(),
            lease: None,
            outbox_rows: Vec::with_capacity(3),
            redrives: 0,
            event_redrives: 0,
            artifact: None,
            compacted: false,
            retention_parked: false,
        });
        if write_outbox {
            self.insert_work_row(id, WorkKind::TaskCreated, 1, self.now);
        }
        self.touched.tasks.push(id);
        self.touched.created.push(id);
        self.rec.task = Some(id);
        self.rec.version = Some(0);
        id
    }

    /// A `task-work` outbox row for `attempt`, not published before `not_before`.
    pub(in crate::world) fn insert_work_row(
        &mut self,
        task: TaskId,
        kind: WorkKind,
        attempt: u32,
        not_before: u64,
    ) {
        let input_sha256 = self.db.task(task).input_sha256;
        let payload = Payload::Work {
            kind,
            task,
            attempt,
            input_sha256,
            not_before_ms: not_before,
        };
        let payload_sha256 = payload.sha256();
        let id = self.db.next_outbox_id();
        let version = self.db.task(task).state.version;
        self.db.insert_outbox(OutboxRow {
            id,
            task,
            topic: Topic::TaskWork,
            event_type: kind.as_str(),
            aggregate_version: version,
            payload,
            payload_sha256,
            created_ms: self.now,
            ready_ms: not_before.max(self.now),
            published_ms: None,
            publish_attempts: 0,
            last_error: None,
            next_retry_ms: not_before,
            lease: None,
            claimable_ms: None,
        });
        self.rec.message = Some(id);
        self.poke_publishers();
    }

    /// Which task a cancel or read names, through the idempotency record
    /// for a key.
    pub(in crate::world) fn resolve(&self, target: &Target) -> Option<TaskId> {
        match target {
            Target::Task(task) => self.db.find_task(*task).map(|row| row.id),
            Target::Key(key) => match self.db.record(key)?.answer {
                Answer::Accepted(task) => Some(task),
                Answer::Refused(_) => None,
            },
        }
    }

    /// `RequestCancellation`, decided on the database in one transaction.
    fn api_cancel(&mut self, request: RequestId, target: &Target) -> Option<ApiPhase> {
        if self.commit_fault() == Some(false) {
            return None;
        }
        let Some(task) = self.resolve(target) else {
            self.rec.outcome = "TASK_NOT_FOUND";
            return Some(ApiPhase::Respond(Response::Cancel(Err("TASK_NOT_FOUND"))));
        };
        self.rec.task = Some(task);
        let version = self.db.task(task).state.version;
        // The signal id comes from the request, so a retried cancel is the
        // same fact.
        let signal = SignalId(request.0);
        let outcome = self.execute(
            task,
            version,
            Command::RequestCancellation {
                signal,
                reason: "client-request",
            },
        );
        self.rec.outcome = outcome.code();
        let response = match outcome {
            CommandOutcome::Committed { version } | CommandOutcome::Duplicate { version } => {
                Ok(version)
            }
            other => Err(other.code()),
        };
        if self.crash_now.is_some() {
            return None;
        }
        self.touched.cancels.push((task, signal, response.is_ok()));
        Some(ApiPhase::Respond(Response::Cancel(response)))
    }

    fn api_read_cache(&mut self, target: &Target) -> Option<ApiPhase> {
        let Some(task) = self.resolve(target) else {
            self.rec.outcome = "TASK_NOT_FOUND";
            return Some(ApiPhase::Respond(Response::Status(None)));
        };
        self.rec.task = Some(task);
        if self.fault(Site::CacheEvict) == Some(FaultKind::Evict) {
            let found = self.cache.get(task);
            if self.cache.evict(task) {
                self.touched.cache.push(task);
                self.touched.cache_writes.push((task, found));
            }
        }
        match self.cache.get(task) {
            Some(crate::world::stores::cache::CacheEntry::View { status, version }) => {
                self.rec.outcome = "hit";
                self.sometimes("status-read-from-cache");
                self.rec.version = Some(version);
                Some(ApiPhase::Respond(Response::Status(Some((
                    task, status, version,
                )))))
            }
            _ => {
                self.rec.outcome = "miss";
                Some(ApiPhase::ReadDb { task })
            }
        }
    }

    fn api_read_db(&mut self, task: TaskId) -> Option<ApiPhase> {
        let state = &self.db.task(task).state;
        let (status, version) = (state.status, state.version);
        self.rec.task = Some(task);
        self.rec.version = Some(version);
        self.rec.outcome = status.as_str();
        Some(ApiPhase::FillCache {
            task,
            status,
            version,
        })
    }
}
