//! The incremental safety checks: after each step, only the invariants
//! whose entities the step touched (`World::touched`) are judged.

use crate::hash::hex;
use crate::task::{Status, Text};
use crate::world::World;
use crate::world::actors::worker::DeliveryAct;
use crate::world::engine::ids::{DeadLetterId, KeyOf, OutboxId, TaskId};
use crate::world::stores::db::{Answer, EffectKind, ReviewReason, Token};

use super::*;
use crate::invariants::Violation;

impl World {
    /// Runs the incremental checks as if the last step had touched
    /// `touched`, and returns the violation they find. For tests that break
    /// the state by hand and expect an invariant's id.
    pub fn check_as_touched(&mut self, touched: crate::world::Touched) -> Option<Violation> {
        self.violation = None;
        *self.touched = touched;
        self.check_step();
        self.violation.take()
    }

    /// Runs the checks for everything the step touched.
    pub(crate) fn check_step(&mut self) {
        // A store call that timed out touches nothing, so its budget is
        // counted first.
        let store_calls = self.count_store_calls();
        // Nor does a plan that the transform should not have let through,
        // nor a delivery resumed or fenced on a status it did not read.
        let transform = self.judge_transform();
        let decision = self.judge_delivery_decision();
        // Nor the stores' footprint, taken after every step.
        let uncommitted = self.judge_uncommitted();
        // About one step in five (a wake that only moves time, a broker
        // tick) touches nothing: no check to run, nothing to count.
        if store_calls.is_none()
            && transform.is_none()
            && decision.is_none()
            && uncommitted.is_none()
            && self.touched.is_empty()
            && self.checker.compacted_unsettled.is_empty()
            && self.checker.compacted_objects.is_empty()
        {
            return;
        }
        self.checker.round += 1;
        self.checker.records.clear();
        let mut fired: Option<Fired> = None;
        let mut checks = 0u64;
        macro_rules! check {
            ($result:expr) => {{
                checks += 1;
                if fired.is_none() {
                    if let Err(found) = $result {
                        fired = Some(found);
                    }
                }
            }};
        }
        // The checks need `&mut self`, so each list is read by index (the
        // items are `Copy`) instead of moving the whole `Touched` out and
        // back every step; only the key list, whose items are shared text,
        // is taken out for the loop.
        macro_rules! check_each {
            ($list:ident, |$item:pat_param| $check:expr) => {
                for index in 0..self.touched.$list.len() {
                    let $item = self.touched.$list[index];
                    check!($check);
                }
            };
        }
        // One `if let` each: an array of the last two, iterated, moved
        // both (room for a violation apiece) every step, and was the
        // costliest line of this function in a profile (35 instructions a
        // step of `fuzz-1e5`).
        if let Some(result) = store_calls {
            check!(result);
        }
        if let Some(result) = transform {
            check!(result);
        }
        if let Some(result) = decision {
            check!(result);
        }
        if let Some(result) = uncommitted {
            check!(result);
        }
        check_each!(created, |task| self.check_created(task));
        for index in 0..self.touched.created.len() {
            let key = self.db.task(self.touched.created[index]).key.clone();
            self.touched.keys.push(key);
        }
        if !self.touched.keys.is_empty() {
            let mut keys = std::mem::take(&mut self.touched.keys);
            keys.sort();
            keys.dedup();
            for key in &keys {
                check!(self.check_key(key));
            }
            self.touched.keys = keys;
        }
        while let Some((task, why)) = self.checker.compacted_unsettled.pop() {
            check!(Err::<(), Fired>(Fired {
                invariant: "retained-until-settled",
                message: format!("{task} was compacted while {why}"),
                entities: vec![task.to_string()],
            }));
        }
        if !self.checker.compacted_objects.is_empty() {
            check!(self.check_compacted_objects());
        }
        if !self.touched.created.is_empty() || !self.touched.answers.is_empty() {
            check!(self.check_quota_ledger());
        }
        check_each!(answers, |(intent, answer, at)| self
            .check_answer(intent, answer, at));
        let touched = &mut *self.touched;
        if !touched.tokens.is_empty() {
            touched
                .tasks
                .extend(touched.tokens.iter().map(|token| token.task));
        }
        if touched.tasks.len() > 1 {
            touched.tasks.sort();
            touched.tasks.dedup();
        }
        check_each!(tasks, |task| self.check_task_events(task));
        check_each!(tokens, |token| self.check_token(token));
        check_each!(reviews, |token| self.check_review_earned(token));
        check_each!(dead_letter_reviews, |id| self
            .check_dead_letter_review_earned(id));
        check_each!(tasks, |task| self.check_mismatch_ends_task(task));
        check_each!(tasks, |task| self.check_artifacts(task));
        check_each!(tasks, |task| self.check_effect_outcomes(task));
        check_each!(tasks, |task| self.check_budgets(task));
        check_each!(cache, |task| self.check_cache(task));
        check_each!(fills, |(task, found)| self.check_fill(task, found));
        check_each!(projector_done, |task| self.check_invalidated(task));
        check_each!(cache_writes, |(task, found)| self
            .check_cache_floor(task, found));
        // A task listed again is counted again but judged once: nothing
        // the check reads changes in between, so it would find the same.
        for index in 0..self.touched.projection.len() {
            let task = self.touched.projection[index];
            if self.touched.projection[..index].contains(&task) {
                checks += 1;
            } else {
                check!(self.check_projection(task));
            }
        }
        if !self.touched.projection.is_empty() {
            check!(self.check_snapshot_reports());
            // The step's record is in the trace by now.
            let rebuilt = self
                .trace
                .last()
                .is_some_and(|record| record.verb == crate::world::engine::step::Verb::Rebuild);
            if rebuilt {
                check_each!(projection, |task| self.check_rebuild_reported(task));
            }
        }
        if self.checker.rejections_seen < self.db.rejections.len() {
            check!(self.check_rejections());
        }
        check_each!(leases, |(task, replaced)| self.check_lease(task, replaced));
        check_each!(inbox_leases, |(message, replaced)| self
            .check_inbox_lease(message, replaced));
        check_each!(claims, |claim| self.check_claim(claim));
        check_each!(redriven, |letter| self.check_redrive(letter));
        check_each!(client_sends, |(request, gave_up)| self
            .check_client_send(request, gave_up));
        // After the task checks, which bring the checker's map of event
        // ids up to date with this step's appends.
        for index in 0..self.touched.appends.len() {
            let (event, answer) = &self.touched.appends[index];
            check!(self.check_append(event, answer));
        }
        check_each!(cancels, |(task, signal, acknowledged)| self.check_cancel(
            task,
            signal,
            acknowledged
        ));
        for index in 0..self.touched.replays.len() {
            let (reference, found) = &self.touched.replays[index];
            check!(self.check_replay(reference, *found));
        }
        check_each!(commits, |commit| self.check_commit(commit));
        check_each!(let_go, |let_go| self.check_let_go(let_go));
        check_each!(deliveries, |touch| self.check_delivery(&touch));
        check_each!(delivered, |(entry, count)| self
            .check_delivered(entry, count));
        check_each!(entries, |entry| self.check_entry(entry));
        // The copy of an inbox row follows every write of what it holds
        // (the worker lists the row when it registers or finalizes it), after
        // the checks: a conflicting delivery is judged against the row as
        // the last writing step left it.
        for index in 0..self.touched.inbox.len() {
            let message = self.touched.inbox[index];
            check!(self.check_inbox_final(message));
            check!(self.check_inbox_result(message));
            self.mirror_inbox(message);
        }
        self.counters.invariant_checks += checks;
        if let Some(found) = fired {
            let record = self.trace.last().expect("a step was just recorded");
            self.violation = Some(Violation {
                invariant: found.invariant,
                step: record.step,
                time_ms: record.time_ms,
                message: found.message,
                entities: found.entities,
            });
        }
    }

    fn check_created(&mut self, task: TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        let replay = row.replay_of.is_some();
        if row.input.fingerprint != row.fingerprint {
            return Err(Fired {
                invariant: "task-input-matches-fingerprint",
                message: format!(
                    "{task} was created for fingerprint {} but holds an input hashing to {}{}",
                    &hex(&row.fingerprint)[..16],
                    &hex(&row.input.fingerprint)[..16],
                    row.replay_of
                        .map_or(String::new(), |letter| format!(" (a replay of {letter})"))
                ),
                entities: vec![task.to_string(), row.key.to_string()],
            });
        }
        if let Some(letter) = row.replay_of {
            self.check_replayed_once(task, letter)?;
        }
        let row = self.db.task(task);
        mirror_in(&mut self.checker.tasks, &self.db, task);
        let key = KeyOf::new(&row.key);
        self.checker.keys.get_or_default(key).created(task);
        if !replay {
            self.checker.accepted_creates += 1;
            if self.checker.accepted_creates > self.db.quota_total {
                return Err(Fired {
                    invariant: "quota-never-oversold",
                    message: format!(
                        "{} creates accepted with a quota of {}",
                        self.checker.accepted_creates, self.db.quota_total
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        Ok(())
    }

    /// dead-letter-replayed-once: a replay creates a task only for a letter
    /// no task replays yet, and files it under that letter. The replay map
    /// only grows, one letter per replay task, so a second task for one
    /// letter shows as a map smaller than the count of replay tasks.
    fn check_replayed_once(&mut self, task: TaskId, letter: DeadLetterId) -> Result<(), Fired> {
        self.checker.replay_tasks += 1;
        let filed = self.db.replays.get(&letter).copied();
        if filed == Some(task) && self.db.replays.len() == self.checker.replay_tasks {
            return Ok(());
        }
        // Only when it fires: every other task made from the same letter.
        let others: Vec<String> = self
            .db
            .tasks
            .iter()
            .filter(|row| row.replay_of == Some(letter) && row.id != task)
            .map(|row| row.id.to_string())
            .collect();
        let filed = filed.map_or("nothing".to_string(), |t| t.to_string());
        let mut entities = vec![task.to_string(), letter.to_string()];
        entities.extend(others.iter().cloned());
        Err(Fired {
            invariant: "dead-letter-replayed-once",
            message: format!(
                "{task} was created as a replay of {letter}, which the replay map files under {filed}; \
                 {} replay task(s) for {} replayed letter(s){}",
                self.checker.replay_tasks,
                self.db.replays.len(),
                if others.is_empty() {
                    String::new()
                } else {
                    format!("; {} replayed it already", others.join(", "))
                }
            ),
            entities,
        })
    }

    /// The quota is a ledger: what it charged is what it accepted. Every
    /// charge and every refusal happens in an API step that creates a task
    /// or answers a request, so those steps are where it is judged.
    fn check_quota_ledger(&mut self) -> Result<(), Fired> {
        let charged = self.db.quota_total - self.db.quota_remaining;
        let accepted = self.checker.accepted_creates;
        if charged != accepted {
            return Err(Fired {
                invariant: "quota-exact",
                message: format!(
                    "the quota charged {charged} creates but {accepted} were accepted (quota {})",
                    self.db.quota_total
                ),
                entities: self.touched.created.iter().map(|t| t.to_string()).collect(),
            });
        }
        Ok(())
    }

    fn check_answer(
        &mut self,
        intent: crate::world::engine::ids::IntentId,
        answer: Answer,
        at: u64,
    ) -> Result<(), Fired> {
        let Some(record) = self.intents.get(intent) else {
            return Ok(());
        };
        let (key, fingerprint, first) = (record.key.clone(), record.fingerprint, record.first);
        let owed = record.malformed;
        let refused_as_malformed = matches!(
            answer,
            Answer::Refused("INVALID_IDEMPOTENCY_KEY" | "INVALID_INPUT")
        );
        if owed.is_some_and(|code| answer != Answer::Refused(code))
            || (owed.is_none() && refused_as_malformed)
        {
            return Err(Fired {
                invariant: "malformed-create-refused",
                message: format!(
                    "{intent} (key {key:?}) is owed {} but was answered {}",
                    owed.unwrap_or("a check past the key and input"),
                    describe(answer)
                ),
                entities: vec![key.to_string(), intent.to_string()],
            });
        }
        if answer == Answer::Refused("QUOTA_EXCEEDED")
            && self.checker.accepted_creates < self.db.quota_total
        {
            return Err(Fired {
                invariant: "quota-exact",
                message: format!(
                    "{intent} (key {key}) was refused QUOTA_EXCEEDED with {} of {} creates accepted",
                    self.checker.accepted_creates, self.db.quota_total
                ),
                entities: vec![key.to_string(), intent.to_string()],
            });
        }
        if let Answer::Accepted(task) = answer {
            let row = self.db.task(task);
            if row.fingerprint != fingerprint {
                return Err(Fired {
                    invariant: "key-bound-to-fingerprint",
                    message: format!(
                        "key {} answered a request with fingerprint {} using {task}, created for fingerprint {}",
                        key,
                        &hex(&fingerprint)[..16],
                        &hex(&row.fingerprint)[..16]
                    ),
                    entities: vec![key.to_string(), task.to_string(), intent.to_string()],
                });
            }
        }
        // The key's live record, read once: its fingerprint and commit time.
        let live = self
            .record(&key)
            .map(|live| (live.fingerprint, live.committed_ms));
        let reused = live.is_some_and(|(bound, _)| bound != fingerprint);
        if reused && answer != Answer::Refused("IDEMPOTENCY_KEY_REUSED_WITH_DIFFERENT_REQUEST") {
            return Err(Fired {
                invariant: "key-bound-to-fingerprint",
                message: format!(
                    "key {} is bound to another fingerprint but answered {intent} with {}",
                    key,
                    describe(answer)
                ),
                entities: vec![key.to_string(), intent.to_string()],
            });
        }
        match first {
            None => {
                let committed = live.map_or(at, |(_, committed_ms)| committed_ms);
                let intent_row = self.intents.get_mut(intent).expect("read above");
                intent_row.first = Some(crate::world::truth::intents::IntentAnswer {
                    answer,
                    deadline_ms: committed + self.config.idempotency_ttl_ms,
                });
                Ok(())
            }
            Some(first) if at < first.deadline_ms && first.answer != answer => Err(Fired {
                invariant: "one-task-per-intent",
                message: format!(
                    "{intent} (key {}) first got {} and then {}",
                    key,
                    describe(first.answer),
                    describe(answer)
                ),
                entities: vec![intent.to_string(), key.to_string()],
            }),
            Some(_) => Ok(()),
        }
    }

    /// The live idempotency record of `key`, searched once per round.
    fn record(&mut self, key: &Text) -> Option<RecordView> {
        if let Some((_, view)) = self.checker.records.iter().find(|(read, _)| read == key) {
            return *view;
        }
        let view = self.db.record(key).map(|record| RecordView {
            fingerprint: record.fingerprint,
            committed_ms: record.committed_ms,
            answer: record.answer,
        });
        self.checker.records.push((key.clone(), view));
        view
    }

    fn check_key(&mut self, key: &Text) -> Result<(), Fired> {
        let Some(record) = self.record(key) else {
            // A record that lived and is gone opens a new epoch: a task
            // created under the key from now on is a new intent's.
            let of = KeyOf::new(key);
            let Some(life) = self.checker.keys.get(&of).filter(|life| life.recorded) else {
                return Ok(());
            };
            let tasks = [life.first, life.first_other];
            self.checker.keys.remove(&of);
            for task in tasks.into_iter().flatten() {
                if let Some(why) = super::retention::unsettled(&self.db, task) {
                    return Err(Fired {
                        invariant: "retained-until-settled",
                        message: format!("the idempotency record of {key} expired while {why}"),
                        entities: vec![key.to_string(), task.to_string()],
                    });
                }
            }
            return Ok(());
        };
        let named = match record.answer {
            Answer::Accepted(task) => Some(task),
            Answer::Refused(_) => None,
        };
        let life = self.checker.keys.get_or_default(KeyOf::new(key));
        life.recorded = true;
        let other = life.other_than(named);
        if let Some(other) = other {
            return Err(Fired {
                invariant: "one-task-per-key",
                message: format!(
                    "key {key} names {} but {other} was also created under it while it lived",
                    named.map_or("a refusal".to_string(), |t| t.to_string())
                ),
                entities: vec![key.to_string(), other.to_string()],
            });
        }
        Ok(())
    }

    fn check_task_events(&mut self, task: TaskId) -> Result<(), Fired> {
        self.checker
            .sync_task(&self.db, self.config.cancel_policy, task)
    }

    fn check_token(&mut self, token: Token) -> Result<(), Fired> {
        let Some(object) = self.store.get(token) else {
            return Ok(());
        };
        if object.versions.len() > 1 {
            return Err(Fired {
                invariant: "one-artifact-per-token",
                message: format!(
                    "token {token} holds {} written versions",
                    object.versions.len()
                ),
                entities: vec![token.to_string(), token.task.to_string()],
            });
        }
        Ok(())
    }

    /// review-earned: the store could not confirm the effect under `token`,
    /// and its task went to manual review. Only a store that cannot be
    /// queried leaves an effect unconfirmable. A running task's effect is being
    /// retried (a cancel would have left it cancelling), and a retry uses a
    /// row the ledger already says verified: nothing was left to confirm.
    fn check_review_earned(&self, token: Token) -> Result<(), Fired> {
        let unearned = |why: &str| Fired {
            invariant: "review-earned",
            message: format!(
                "{} went to manual review STORE_CANNOT_CONFIRM for {token}, {why}",
                token.task
            ),
            entities: vec![token.task.to_string(), token.to_string()],
        };
        // A store that answers queries can always confirm: read it back.
        if self.config.store_supports_query {
            return Err(unearned("but the store answers queries"));
        }
        let row = self.db.task(token.task);
        let verified = row
            .effect(token)
            .is_some_and(|ledger| ledger.state == crate::world::stores::db::EffectState::Verified);
        if row.state.status == Status::Running && verified {
            return Err(unearned(
                "which its ledger says verified, while retrying its attempt",
            ));
        }
        Ok(())
    }

    /// review-earned: a dead letter goes to a human only once its task
    /// spent the re-drive budget of the letter's topic (its work's, or its
    /// events'); before that the reconciler re-drives it.
    fn check_dead_letter_review_earned(
        &self,
        id: crate::world::engine::ids::DeadLetterId,
    ) -> Result<(), Fired> {
        let Some(letter) = self.broker.dead_letter_by_id(id) else {
            return Ok(());
        };
        let Some(row) = self.db.find_task(letter.task) else {
            return Ok(());
        };
        // Counted from the task's outbox rows, as within-budgets counts
        // them, not from the reconciler's own counters: a row per re-drive
        // of work, and per event sent again (a compacted task's rows are
        // gone: nothing to count).
        if row.compacted {
            return Ok(());
        }
        let (work_redrives, event_redrives) = self.redrives_from_rows(letter.task);
        let spent = match letter.topic {
            crate::world::stores::db::Topic::TaskWork => work_redrives,
            crate::world::stores::db::Topic::TaskEvents => event_redrives,
        };
        if spent >= self.config.redrive_max {
            return Ok(());
        }
        Err(Fired {
            invariant: "review-earned",
            message: format!(
                "dead letter {id} of {} went to manual review after {spent} of its {} re-drives",
                letter.task, self.config.redrive_max
            ),
            entities: vec![letter.task.to_string(), id.to_string()],
        })
    }

    /// completed-has-verified-artifact, one-visible-artifact-per-task,
    /// no-visible-corrupt-artifact, mismatch-shows-damage.
    fn check_artifacts(&mut self, task: TaskId) -> Result<(), Fired> {
        if !self.db.task(task).state.status.is_terminal() {
            return Ok(());
        }
        let (sha, size) = self.expected_artifact(task);
        let state = &self.db.task(task).state;
        let store = &self.store;
        let completed_status = state.status == Status::Completed;
        let attempt = state.attempt as u32;
        // The checker's own reading of a good artifact, independent of the
        // worker's `artifact_is_good`, which it checks.
        let good = |token: Token, version: Option<&crate::world::stores::store::Version>| -> bool {
            version.is_some_and(|version| {
                version.bytes_sha256 == sha
                    && version.size == size
                    && version.metadata.task == task
                    && version.metadata.attempt == token.attempt
                    && version.metadata.size == size
                    && version.metadata.sha256 == sha
            })
        };
        // A task failed for a hash mismatch: the store shows the damage, a
        // version of its attempt's artifact that does not verify (hidden
        // since, as its compensation must). A good artifact failed as bad
        // would end a task that had done its work.
        if state.terminal_error_code.as_deref() == Some("ARTIFACT_HASH_MISMATCH")
            && state.status == Status::Failed
            && !self.db.task(task).compacted
        {
            let damaged = store.tokens_of(task).iter().any(|&token| {
                token.attempt == attempt
                    && token.kind == EffectKind::Artifact
                    && store
                        .get(token)
                        .is_some_and(|object| object.versions.iter().any(|v| !good(token, Some(v))))
            });
            if !damaged {
                return Err(Fired {
                    invariant: "mismatch-shows-damage",
                    message: format!(
                        "{task} failed ARTIFACT_HASH_MISMATCH at attempt {attempt}, but every version the store holds of that attempt's artifact verifies"
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        // One pass over the task's tokens, one store search each: what the
        // three checks below need of the visible ones, in token order.
        let mut visible = 0usize;
        let mut completed = None;
        let mut corrupt = None;
        let mut stray = false;
        for &token in store.tokens_of(task) {
            let Some(object) = store.get(token).filter(|o| o.visible()) else {
                continue;
            };
            visible += 1;
            let current = object.current();
            if completed.is_none() && token.attempt == attempt && token.kind == EffectKind::Artifact
            {
                completed = Some((token, current));
            }
            if corrupt.is_none() && !good(token, current) {
                corrupt = Some(token);
            }
            stray |= !(completed_status && token.attempt == attempt && token.generation == 0);
        }
        if completed_status {
            let ok = completed.is_some_and(|(token, current)| {
                good(token, current)
                    && current.is_some_and(|v| {
                        state
                            .artifact_sha256
                            .as_deref()
                            .is_some_and(|text| crate::hash::hex_is(text, &v.bytes_sha256))
                    })
            });
            if !ok {
                return Err(Fired {
                    invariant: "completed-has-verified-artifact",
                    message: format!(
                        "{task} is completed (attempt {attempt}) but its artifact is missing, hidden or does not verify"
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        if let Some(token) = corrupt {
            return Err(Fired {
                invariant: "no-visible-corrupt-artifact",
                message: format!(
                    "{task} is {} and its artifact {token} fails verification but is visible",
                    state.status.as_str()
                ),
                entities: vec![task.to_string(), token.to_string()],
            });
        }
        let allowed = usize::from(completed_status);
        if visible > allowed || stray {
            let visible: Vec<Token> = store
                .tokens_of(task)
                .iter()
                .copied()
                .filter(|token| store.get(*token).is_some_and(|o| o.visible()))
                .collect();
            return Err(Fired {
                invariant: "one-visible-artifact-per-task",
                message: format!(
                    "{task} is {} with {} visible artifact(s): {}",
                    state.status.as_str(),
                    visible.len(),
                    visible
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                entities: std::iter::once(task.to_string())
                    .chain(visible.iter().map(|t| t.to_string()))
                    .collect(),
            });
        }
        self.check_compensations(task)
    }

    /// compensation-recorded: a written artifact that was taken back
    /// (hidden) has its compensation's own ledger row, whichever actor hid
    /// it and why (a corrupt artifact, or a verified one under
    /// cancel-wins). Judged once the task is terminal, while its ledger is
    /// kept (a compacted task's ledger is gone).
    fn check_compensations(&self, task: TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        if row.compacted {
            return Ok(());
        }
        for &token in self.store.tokens_of(task) {
            let taken_back = self
                .store
                .get(token)
                .is_some_and(|object| object.hidden && !object.versions.is_empty());
            if !taken_back || token.kind != EffectKind::Artifact {
                continue;
            }
            let compensation = Token {
                kind: EffectKind::Compensation,
                ..token
            };
            if row.effect(compensation).is_none() {
                return Err(Fired {
                    invariant: "compensation-recorded",
                    message: format!(
                        "{task}'s artifact {token} was hidden, but the ledger has no compensation {compensation}"
                    ),
                    entities: vec![task.to_string(), token.to_string()],
                });
            }
        }
        // And the other way: a ledger row says an artifact was taken back
        // only where the store shows one written and hidden (a fenced
        // attempt that never wrote is failed, not compensated).
        for ledger in &row.effects {
            if ledger.token.kind != EffectKind::Artifact
                || ledger.state != crate::world::stores::db::EffectState::Compensated
            {
                continue;
            }
            let taken_back = self
                .store
                .get(ledger.token)
                .is_some_and(|object| object.hidden && !object.versions.is_empty());
            if !taken_back {
                return Err(Fired {
                    invariant: "compensation-recorded",
                    message: format!(
                        "{task}'s ledger says {} was compensated, but the store holds no written artifact of it that is hidden",
                        ledger.token
                    ),
                    entities: vec![task.to_string(), ledger.token.to_string()],
                });
            }
        }
        Ok(())
    }

    /// Whether `task` is in manual review for STORE_CANNOT_CONFIRM or
    /// EVENT_ID_PAYLOAD_CONFLICT: a human must decide, and no automatic
    /// path may act on it. Read from the review list (see
    /// `Checker::automation_stopped`), the items added since the last
    /// call first.
    pub(super) fn waits_for_a_human(&mut self, task: TaskId) -> bool {
        let items = self.db.review_items();
        for item in &items[self.checker.reviews_seen..] {
            let stops = matches!(
                item.reason,
                ReviewReason::StoreCannotConfirm | ReviewReason::EventIdPayloadConflict
            );
            if stops && let Some(reviewed) = item.task {
                self.checker.automation_stopped.insert(reviewed);
            }
        }
        self.checker.reviews_seen = items.len();
        self.checker.automation_stopped.contains(&task)
    }

    fn check_cache(&mut self, task: TaskId) -> Result<(), Fired> {
        let Some(crate::world::stores::cache::CacheEntry::View { status, version }) =
            self.cache.get(task)
        else {
            return Ok(());
        };
        let current = self.db.task(task).state.version;
        let real = self
            .checker
            .state_at(&self.db, self.config.cancel_policy, task, version)
            .map(|state| state.status);
        if version > current || real != Some(status) {
            return Err(Fired {
                invariant: "cache-never-ahead",
                message: format!(
                    "the cache shows {task} {}/v{version}, which the database never committed (it is at v{current})",
                    status.as_str()
                ),
                entities: vec![
                    task.to_string(),
                    crate::world::stores::cache::cache_key(task),
                ],
            });
        }
        Ok(())
    }

    /// cache-floor-kept: a version tombstone is the only thing that stops a
    /// read that began before a write from filling after its invalidation,
    /// so no delete lowers it and no eviction drops it; only a view or a
    /// tombstone at its version or later replaces it.
    fn check_cache_floor(
        &self,
        task: TaskId,
        found: Option<crate::world::stores::cache::CacheEntry>,
    ) -> Result<(), Fired> {
        use crate::world::stores::cache::CacheEntry;
        // The floor is the version of the entry found, a view's as much as
        // a tombstone's: a fill below either is refused.
        let Some(floor) = found.map(|entry| entry.version()) else {
            return Ok(());
        };
        let now = self.cache.get(task);
        let kept = now.is_some_and(|entry| entry.version() >= floor);
        if kept {
            return Ok(());
        }
        Err(Fired {
            invariant: "cache-floor-kept",
            message: format!(
                "the cache's floor of {task} at v{floor} became {}: a read of an older version may now fill it",
                match now {
                    Some(CacheEntry::Tombstone { version }) => format!("a tombstone of v{version}"),
                    Some(CacheEntry::View { version, .. }) => format!("a view of v{version}"),
                    None => "nothing".to_string(),
                }
            ),
            entities: vec![
                task.to_string(),
                crate::world::stores::cache::cache_key(task),
            ],
        })
    }

    /// invalidated-before-ack: the projector lets a delivery go only once
    /// the cache can no longer show its task below the model's version.
    /// Every invalidation leaves a tombstone at the model's version and a
    /// fill below a tombstone is refused, so a view older than the model
    /// at that moment means an invalidation was skipped or given up on
    /// (its delivery acked anyway, nothing left to retry it).
    fn check_invalidated(&self, task: TaskId) -> Result<(), Fired> {
        use crate::world::stores::cache::CacheEntry;
        let Some(model) = self.projector.models.get(task) else {
            return Ok(());
        };
        let modelled = model.state.version;
        match self.cache.get(task) {
            Some(CacheEntry::View { version, .. }) if version < modelled => Err(Fired {
                invariant: "invalidated-before-ack",
                message: format!(
                    "the projector let go of a delivery for {task} while the cache still shows v{version}, below the v{modelled} it projected (an invalidation skipped or abandoned)"
                ),
                entities: vec![
                    task.to_string(),
                    crate::world::stores::cache::cache_key(task),
                ],
            }),
            _ => Ok(()),
        }
    }

    /// stale-fill-refused: a fill stores no view older than the entry it
    /// found, an invalidation's tombstone or a newer view. A fill into an
    /// absent entry (never filled, or its view evicted) is not judged:
    /// a view that replaced a tombstone at its version may be evicted
    /// (DESIGN: keys may be evicted at any time), and nothing durable is
    /// left to compare with. That no tombstone itself is dropped is
    /// `cache-floor-kept`'s.
    fn check_fill(
        &self,
        task: TaskId,
        found: Option<crate::world::stores::cache::CacheEntry>,
    ) -> Result<(), Fired> {
        use crate::world::stores::cache::CacheEntry;
        let (Some(before), Some(CacheEntry::View { version, .. })) = (found, self.cache.get(task))
        else {
            return Ok(());
        };
        if version >= before.version() {
            return Ok(());
        }
        Err(Fired {
            invariant: "stale-fill-refused",
            message: format!(
                "a fill stored {task} v{version} over {}, newer (a read that began before the write landed after it)",
                match before {
                    CacheEntry::View { version, .. } => format!("a view of v{version}"),
                    CacheEntry::Tombstone { version } => format!("the tombstone of v{version}"),
                }
            ),
            entities: vec![
                task.to_string(),
                crate::world::stores::cache::cache_key(task),
            ],
        })
    }

    fn check_projection(&mut self, task: TaskId) -> Result<(), Fired> {
        let Some(model) = self.projector.models.get(task) else {
            return Ok(());
        };
        // Each event the model applied is the stored fact at its sequence:
        // an id the store holds with another payload was never applied.
        if let Some(row) = self.db.find_task(task) {
            for (index, (id, hash)) in model.applied.iter().enumerate() {
                let Some(stored) = row.events.get(index) else {
                    break;
                };
                if stored.event.event_id == *id && stored.payload_sha256 != *hash {
                    return Err(Fired {
                        invariant: "conflicting-event-never-applied",
                        message: format!(
                            "the projector applied {id} to {task} at sequence {} with payload {}, but the event store holds it with {}",
                            index + 1,
                            &hex(hash)[..16],
                            &hex(&stored.payload_sha256)[..16]
                        ),
                        entities: vec![task.to_string(), id.to_string()],
                    });
                }
            }
        }
        let model = &model.state;
        let had = self
            .checker
            .state_at(&self.db, self.config.cancel_policy, task, model.version);
        if had != Some(model) {
            return Err(Fired {
                invariant: "projection-consistent",
                message: format!(
                    "the projector's model of {task} at v{} ({}, attempt {}) is not a state the task had",
                    model.version,
                    model.status.as_str(),
                    model.attempt
                ),
                entities: vec![task.to_string()],
            });
        }
        Ok(())
    }

    fn check_delivery(
        &mut self,
        touch: &crate::world::actors::worker::DeliveryTouch,
    ) -> Result<(), Fired> {
        let message = touch.message;
        let class = if touch.act == DeliveryAct::Register {
            let class = match self.checker.inbox.get(message) {
                Some((hash, ..)) if *hash != touch.payload_sha256 => DeliveryClass::Conflicting,
                Some((_, state, result, _)) if state.is_final() => {
                    DeliveryClass::DuplicateOf(*result)
                }
                _ => DeliveryClass::Fresh,
            };
            self.checker.deliveries.insert(touch.delivery, class);
            class
        } else {
            self.checker
                .deliveries
                .get(touch.delivery)
                .unwrap_or(DeliveryClass::Fresh)
        };
        // Every act of a conflicting delivery, its register included, must
        // leave the first payload's row as the copy taken after the last
        // step that wrote it.
        if class == DeliveryClass::Conflicting {
            let before = self.checker.inbox.get(message).copied();
            let after = self
                .db
                .inbox
                .get(message)
                .map(|row| (row.payload_sha256, row.state, row.result, row.completed_ms));
            if before.is_some() && before != after {
                return Err(Fired {
                    invariant: "inbox-conflict-quarantined",
                    message: format!(
                        "a conflicting delivery of {message} changed the inbox row of the first payload"
                    ),
                    entities: vec![message.to_string()],
                });
            }
        }
        if touch.act == DeliveryAct::End {
            if self.checker.deliveries.get(touch.delivery).is_some() {
                return Err(Fired {
                    invariant: "job-ends-with-an-answer",
                    message: format!(
                        "a worker fell idle from its delivery of {message} (delivery {}) without acking, nacking, quarantining or letting it go",
                        touch.delivery
                    ),
                    entities: vec![message.to_string()],
                });
            }
            return Ok(());
        }
        if matches!(
            touch.act,
            DeliveryAct::Ack(_) | DeliveryAct::Nack | DeliveryAct::Quarantine | DeliveryAct::Drop
        ) {
            self.checker.deliveries.remove(touch.delivery);
        }
        match (class, touch.act) {
            (DeliveryClass::Conflicting, DeliveryAct::Work | DeliveryAct::Ack(_)) => Err(Fired {
                invariant: "inbox-conflict-quarantined",
                message: format!(
                    "the inbox row of {message} recorded payload #{}; a delivery with payload #{} was {} instead of quarantined",
                    self.checker
                        .inbox
                        .get(message)
                        .map_or_else(|| "?".to_string(), |(hash, ..)| hex(hash)[..8].to_string()),
                    &hex(&touch.payload_sha256)[..8],
                    if touch.act == DeliveryAct::Work {
                        "processed"
                    } else {
                        "acked as a duplicate"
                    }
                ),
                entities: vec![message.to_string()],
            }),
            (DeliveryClass::DuplicateOf(result), DeliveryAct::Ack(answer)) if answer != result => {
                Err(Fired {
                    invariant: "duplicate-acked-with-first-result",
                    message: format!(
                        "a duplicate of {message} was acked with {} instead of the recorded {}",
                        answer.map_or("nothing", |r| r.as_str()),
                        result.map_or("nothing", |r| r.as_str())
                    ),
                    entities: vec![message.to_string()],
                })
            }
            (DeliveryClass::DuplicateOf(_), DeliveryAct::Work | DeliveryAct::Nack) => Err(Fired {
                invariant: "duplicate-acked-with-first-result",
                message: format!(
                    "a duplicate of {message} (inbox row final) was processed again instead of answered"
                ),
                entities: vec![message.to_string()],
            }),
            _ => Ok(()),
        }
    }

    /// Keeps the checker's copy of an inbox row (payload hash, state,
    /// result), after every step that wrote it; a conflicting delivery
    /// must leave the first hash's row as it was.
    /// A final inbox row is the message's answer for good: the write this
    /// step made keeps its state and result.
    fn check_inbox_final(&self, message: OutboxId) -> Result<(), Fired> {
        let (Some((_, state, result, completed)), Some(row)) =
            (self.checker.inbox.get(message), self.db.inbox.get(message))
        else {
            return Ok(());
        };
        if state.is_final()
            && (row.state, row.result, row.completed_ms) != (*state, *result, *completed)
        {
            return Err(Fired {
                invariant: "inbox-final-never-rewritten",
                message: format!(
                    "the inbox row of {message} was {} (final at {} ms) and was rewritten to {} (at {} ms)",
                    state.as_str(),
                    completed.map_or_else(|| "?".to_string(), |ms| ms.to_string()),
                    row.state.as_str(),
                    row.completed_ms
                        .map_or_else(|| "?".to_string(), |ms| ms.to_string()),
                ),
                entities: vec![message.to_string()],
            });
        }
        Ok(())
    }

    fn mirror_inbox(&mut self, message: OutboxId) {
        if let Some(row) = self.db.inbox.get(message) {
            self.checker.inbox.insert(
                message,
                (row.payload_sha256, row.state, row.result, row.completed_ms),
            );
        }
    }

    fn check_delivered(
        &mut self,
        entry: crate::world::engine::ids::EntryId,
        count: u32,
    ) -> Result<(), Fired> {
        if u64::from(count) > self.config.delivery_attempts_max {
            return Err(Fired {
                invariant: "bounded-deliveries",
                message: format!(
                    "{entry} was delivered {count} times (delivery_attempts_max = {})",
                    self.config.delivery_attempts_max
                ),
                entities: vec![entry.to_string()],
            });
        }
        Ok(())
    }

    fn check_entry(&mut self, entry: crate::world::engine::ids::EntryId) -> Result<(), Fired> {
        let Some(live) = self.broker.entries.get(entry) else {
            return Ok(());
        };
        let row = self.db.find_outbox(live.message);
        let committed = row
            .is_some_and(|row| row.id == live.message && row.payload_sha256 == live.payload_sha256);
        if !committed {
            return Err(Fired {
                invariant: "no-orphan-message",
                message: format!(
                    "{entry} in {} carries message id {} with no committed outbox row of that id and payload",
                    live.topic.as_str(),
                    live.message
                ),
                entities: vec![
                    entry.to_string(),
                    live.message.to_string(),
                    live.task.to_string(),
                ],
            });
        }
        Ok(())
    }
}
