//! Code that runs only with a named mutant on: the API's wrong orders of a
//! create and of a cancel. Kept out of cargo-mutants' scope (a mutant of a
//! planted bug is not a bug of the protocol; README, Mutation testing).

use super::*;

impl World {
    /// `publish-before-commit`: the message goes out for the task this call
    /// is about to create, before anything commits.
    pub(super) fn api_publish_before_commit(&mut self, input: &Arc<Input>) -> Option<ApiPhase> {
        let task = self.db.next_task_id();
        self.publish_direct(task, input);
        Some(ApiPhase::CreateAfterPublish)
    }

    /// `publish-after-commit` and `split-create-transaction`: a create that
    /// just committed a new task answers first and finishes in a later step.
    /// `None` on the protocol as built.
    pub(super) fn api_split_after_commit(
        &mut self,
        intent: Option<IntentId>,
        answer: Answer,
        crash: Option<bool>,
    ) -> Option<Option<ApiPhase>> {
        let Answer::Accepted(task) = answer else {
            return None;
        };
        if !self.touched.created.contains(&task) || crash.is_some() {
            return None;
        }
        let then = match self.mutant {
            Some(Mutant::PublishAfterCommit) => ApiPhase::Publish { task },
            Some(Mutant::SplitCreateTransaction) => ApiPhase::CreateTask { task },
            _ => return None,
        };
        Some(self.reply_then(intent, answer, then))
    }

    /// `early-idempotency-expiry`: how long a record is kept (a thousandth
    /// of its TTL).
    pub(super) fn early_record_keep_ms(&self) -> u64 {
        (self.config.idempotency_ttl_ms / 1000).max(1)
    }

    /// `split-idempotency-insert`, second step: insert without re-checking.
    pub(super) fn api_insert_after_check(
        &mut self,
        intent: Option<IntentId>,
        key: &Text,
        input: &Arc<Input>,
        fingerprint: Sha,
    ) -> Option<ApiPhase> {
        if self.commit_fault() == Some(false) {
            return None;
        }
        let answer = if self.db.quota_remaining == 0 {
            Answer::Refused("QUOTA_EXCEEDED")
        } else {
            self.db.quota_remaining -= 1;
            Answer::Accepted(self.insert_task(key, input, fingerprint, None, true))
        };
        let state = match answer {
            Answer::Accepted(_) => RecordState::Succeeded,
            Answer::Refused(_) => RecordState::FailedFinal,
        };
        self.insert_record(key, fingerprint, state, answer);
        self.reply_create(intent, answer)
    }

    /// `quota-read-then-write`, second step: write the remaining count read
    /// earlier, minus one.
    pub(super) fn api_write_quota(
        &mut self,
        intent: Option<IntentId>,
        key: &Text,
        input: &Arc<Input>,
        fingerprint: Sha,
        remaining: u64,
    ) -> Option<ApiPhase> {
        if self.commit_fault() == Some(false) {
            return None;
        }
        if let Some(answer) = self.lookup(key, fingerprint) {
            return self.reply_create(intent, answer);
        }
        let answer = if remaining == 0 {
            let answer = Answer::Refused("QUOTA_EXCEEDED");
            self.insert_record(key, fingerprint, RecordState::FailedFinal, answer);
            answer
        } else {
            self.db.quota_remaining = remaining - 1;
            let task = self.insert_task(key, input, fingerprint, None, true);
            let answer = Answer::Accepted(task);
            self.insert_record(key, fingerprint, RecordState::Succeeded, answer);
            answer
        };
        self.reply_create(intent, answer)
    }

    /// `split-create-transaction`, second transaction: record and outbox row.
    pub(super) fn api_finish_split_create(
        &mut self,
        intent: Option<IntentId>,
        key: &Text,
        fingerprint: Sha,
        task: TaskId,
    ) -> Option<ApiPhase> {
        if self.commit_fault() == Some(false) {
            return None;
        }
        let answer = Answer::Accepted(task);
        self.insert_record(key, fingerprint, RecordState::Succeeded, answer);
        self.insert_work_row(task, WorkKind::TaskCreated, 1, self.now);
        self.reply_create(intent, answer)
    }

    /// `publish-*-commit`: the API hands the message to the broker itself,
    /// under an id no outbox row has.
    pub(super) fn publish_direct(&mut self, task: TaskId, input: &Arc<Input>) {
        let payload = Payload::Work {
            kind: WorkKind::TaskCreated,
            task,
            attempt: 1,
            input_sha256: input.sha256,
            not_before_ms: self.now,
        };
        let sha = payload.sha256();
        let message = crate::world::engine::ids::OutboxId(DIRECT_MESSAGE_BASE + task.0);
        let entry = self
            .broker
            .publish(Topic::TaskWork, message, task, payload, sha, self.now);
        self.touched.entries.push(entry);
        self.rec.entry = Some(entry);
        self.rec.message = Some(message);
        self.rec.task = Some(task);
        self.rec.outcome = "published";
        self.poke_broker(self.now);
    }

    /// `cache-write-before-db`: the cache is written with the status a
    /// cancel is expected to reach, before the database is.
    pub(super) fn api_cache_before_cancel(&mut self, target: &Target) -> Option<ApiPhase> {
        if let Some(task) = self.resolve(target) {
            let state = self.db.task(task).state.clone();
            let predicted = match state.status {
                Status::Queued => Status::Cancelled,
                _ => Status::Cancelling,
            };
            self.cache.entries.insert(
                task,
                crate::world::stores::cache::CacheEntry::View {
                    status: predicted,
                    version: state.version + 1,
                },
            );
            self.touched.cache.push(task);
            self.rec.task = Some(task);
            self.rec.version = Some(state.version + 1);
            self.rec.outcome = predicted.as_str();
        }
        Some(ApiPhase::CancelAfterCacheWrite)
    }
}
