//! `converges`, judged once at quiescence: what is still unsettled after
//! the faults stopped and the system drained.

use crate::world::World;
use crate::world::stores::db::Answer;

use crate::world::actors::worker::POISON_CODE;

impl World {
    /// `converges`, judged at quiescence: what did not converge, if anything.
    pub fn convergence_failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for row in &self.db.tasks {
            let reviewed = self.db.in_review(row.id);
            if !row.state.status.is_terminal() && !reviewed {
                failures.push(format!(
                    "{} is {} and not in manual review",
                    row.id,
                    row.state.status.as_str()
                ));
            }
            if !reviewed {
                for ledger in &row.effects {
                    if matches!(
                        ledger.state,
                        crate::world::stores::db::EffectState::Unknown
                            | crate::world::stores::db::EffectState::Started
                    ) {
                        failures.push(format!(
                            "effect {} is {}",
                            ledger.token,
                            ledger.state.as_str()
                        ));
                    }
                }
            }
        }
        for row in self.db.outbox_rows() {
            if row.published_ms.is_none() {
                failures.push(format!("{} is not published", row.id));
            }
        }
        // Every request ends: answered, given up after its budget, or lost
        // with the client that made it. A request still pending once the
        // run is quiet has no wake left that could end it.
        for (request, outgoing) in self.outgoing.iter() {
            failures.push(format!(
                "{request} of client-{} is still pending after {} sends",
                outgoing.client + 1,
                outgoing.sends
            ));
        }
        // Every API call ends too: answered (its last step takes it out),
        // or forgotten with the API that crashed under it. One still held
        // once the run is quiet has no wake left to step it: volatile state
        // the API keeps, and any intent it carries, for good.
        for (call, held) in self.calls.iter() {
            failures.push(format!(
                "{call} ({}) is still in flight at api-{}",
                held.request,
                held.api + 1
            ));
        }
        // And with them the ground truth's hold on their intents: an intent
        // still counted as carried once nothing carries it would be kept,
        // and bind later creates, for the rest of the run.
        for (intent, row) in self.intents.iter() {
            if row.carried > 0 {
                failures.push(format!(
                    "{intent} ({}) is still carried {} time(s) with nothing in flight",
                    row.key, row.carried
                ));
            }
        }
        for entry in self.broker.entries.values() {
            failures.push(format!(
                "{} ({}, {}) is still in {}",
                entry.id,
                entry.message,
                entry.task,
                entry.topic.as_str()
            ));
        }
        // A poison message is dead-lettered once, however many copies of it
        // met its final inbox row: each letter can be replayed, and two
        // would replay the same work twice.
        let mut poison_paid = std::collections::BTreeSet::new();
        for letter in &self.broker.dead_letters {
            if letter.error_code.is_empty() || letter.attempts == 0 {
                failures.push(format!("{} lost its error code or attempts", letter.id));
            }
            if letter.error_code == POISON_CODE && !poison_paid.insert(letter.message) {
                failures.push(format!(
                    "{} was dead-lettered again for {POISON_CODE} ({})",
                    letter.message, letter.id
                ));
            }
        }
        // Lesson 000 §13.5: a poison failure's message reaches the dead-letter
        // queue, whatever crashed in between; a dead letter never made is
        // loss, with nothing to inspect or replay. (Any dead letter of the
        // task counts: one dead-lettered by the broker for its delivery
        // attempts, before the owed copy was paid, still carries the
        // message, though under a transient code.)
        let poisoned: std::collections::BTreeSet<_> = self
            .broker
            .dead_letters
            .iter()
            .map(|letter| letter.task)
            .collect();
        for row in &self.db.tasks {
            if row.state.status == crate::task::Status::Failed
                && row.state.terminal_error_code.as_deref() == Some(POISON_CODE)
                && !poisoned.contains(&row.id)
            {
                failures.push(format!(
                    "{} failed with {POISON_CODE} and its message never reached the dead-letter queue",
                    row.id
                ));
            }
        }
        failures.extend(self.retention_failures());
        failures.extend(self.table_failures());
        // An operator's replay of a dead letter makes a task (lesson 000
        // §13.5: inspection and replay are what make a dead-letter queue
        // more than delayed loss).
        for id in &self.replays_owed {
            if !self.db.replays.contains_key(id) {
                failures.push(format!(
                    "{id} was replayed by the operator but no task replays it"
                ));
            }
        }
        // A task in manual review for a dead letter (an event of it that
        // never reached the projector within its deliveries and re-drives)
        // may keep a read model or cached view behind it: the review owns
        // what that message left undone, as it owns the task.
        let dead_lettered = |task| {
            self.db
                .reviewed(task, crate::world::stores::db::ReviewReason::DeadLettered)
        };
        for (task, model) in self.projector.models.iter() {
            let state = &self.db.task(task).state;
            if model.state != *state && !dead_lettered(task) {
                failures.push(format!(
                    "the projector's model of {task} is {}/v{} but the task is {}/v{}",
                    model.state.status.as_str(),
                    model.state.version,
                    state.status.as_str(),
                    state.version
                ));
            }
        }
        for (task, entry) in self.cache.entries.iter() {
            if let crate::world::stores::cache::CacheEntry::View { status, version } = entry {
                let state = &self.db.task(task).state;
                let behind = state.version != *version || state.status != *status;
                if behind && !dead_lettered(task) {
                    failures.push(format!(
                        "the cache shows {task} {}/v{version} but it is {}/v{}",
                        status.as_str(),
                        state.status.as_str(),
                        state.version
                    ));
                }
            }
        }
        failures
    }

    /// Retention happens (lesson 000 §3.3: a record lives for its TTL, then
    /// goes, and the task's history with it): at quiescence no record is
    /// kept past the reconcile tick at which it was due (unless the
    /// reconciler's housekeeping wake is due now: a reconciler that
    /// restarts as the run goes quiet resumes its retention at that wake,
    /// which never keeps a run alive; fuzz seed 7584), and a task that is
    /// settled (by the checker's own rule) and whose record expired was
    /// compacted, leaving none of its outbox or inbox rows behind. A
    /// settled task under review keeps its rows for the human who settles
    /// it. Without this, a reconciler that never looks at its
    /// retention index, or a compaction deferred for ever, let memory grow
    /// with the work done and nothing reported it. Nor is a record left
    /// parked (`TaskRow::retention_parked`) once its task has ended: the
    /// terminal event files it again, and nothing else would.
    fn retention_failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let period = self.config.reconcile_every_ms;
        if let Some((due, key)) = self.db.retention_index.first()
            && due + period < self.now
            && self.housekeeping_due().is_none_or(|wake| wake > self.now)
        {
            failures.push(format!(
                "the idempotency record of {key} was due to expire at {due} ms and is still kept at {} ms",
                self.now
            ));
        }
        // Every record is on its way out: filed in the retention index,
        // parked on its task while the task works, or kept for the human
        // reviewing its task. One that is none of these is looked at by
        // nothing again: its key stays bound past its TTL (a create of the
        // same key and input is answered as a retry for ever) and its task
        // is never compacted.
        let filed: std::collections::BTreeSet<&crate::task::Text> =
            self.db.retention_index.iter().map(|(_, key)| key).collect();
        let stranded: Vec<String> = self
            .db
            .records()
            .filter(|record| !filed.contains(&record.key))
            .filter(|record| match record.answer {
                Answer::Accepted(task) => {
                    let row = self.db.task(task);
                    let parked = row.retention_parked && !row.state.status.is_terminal();
                    !parked && !self.db.in_review(task)
                }
                Answer::Refused(_) => true,
            })
            .map(|record| format!("{} (committed at {} ms)", record.key, record.committed_ms))
            .collect();
        if !stranded.is_empty() {
            failures.push(format!(
                "the idempotency record of {} is in no retention index, parked on no working task and kept for no review: it never expires",
                first_few(&stranded)
            ));
        }
        // A record parked until its task ends is filed again by the task's
        // terminal event; one still parked once the task has ended is
        // looked at by nothing again, and keeps its key and its task for
        // the rest of the run.
        for row in self.db.tasks.iter() {
            if row.retention_parked && row.state.status.is_terminal() {
                failures.push(format!(
                    "{} is {} and its idempotency record is still parked until it ends",
                    row.id,
                    row.state.status.as_str()
                ));
            }
        }
        let kept: Vec<String> = self
            .db
            .tasks
            .iter()
            .filter(|row| !row.compacted && !self.db.in_review(row.id))
            .filter(|row| {
                let recorded = self
                    .db
                    .record(&row.key)
                    .is_some_and(|record| record.answer == Answer::Accepted(row.id));
                !recorded && super::retention::unsettled(&self.db, row.id).is_none()
            })
            .map(|row| row.id.to_string())
            .collect();
        // One line, however many: a compaction that never happens leaves
        // every task of a long run behind.
        if !kept.is_empty() {
            failures.push(format!(
                "{} settled, its idempotency record expired, but never compacted",
                first_few(&kept)
            ));
        }
        // Compaction drops what it compacts: no outbox row of a compacted
        // task is kept, nor an inbox row of a message the checker forgot
        // with it (its copy of the inbox follows every row a worker
        // writes, so a row it has no copy of was left behind).
        let outbox_left = self
            .db
            .outbox_rows()
            .filter(|row| self.db.task(row.task).compacted)
            .count();
        let inbox_left = self
            .db
            .inbox
            .iter()
            .filter(|(message, _)| self.checker.inbox.get(*message).is_none())
            .count();
        for (left, what) in [(outbox_left, "outbox"), (inbox_left, "inbox")] {
            if left > 0 {
                failures.push(format!(
                    "{left} {what} row(s) of compacted tasks are still kept"
                ));
            }
        }
        failures
    }

    /// The world's tables keep their own books: each holds the rows it
    /// counts, and one whose window has no row left holds no slot
    /// (`IdTable::bookkeeping_failure`). A table that kept the slots its
    /// removals emptied would grow with the work done, not with the work
    /// in flight; one whose count drifted from its rows, or whose rows a
    /// walk missed, would blind every check that walks it.
    fn table_failures(&self) -> Vec<String> {
        let parts = [
            self.db.table_failures(),
            self.broker.table_failures(),
            self.store.table_failures(),
            self.checker.table_failures(),
        ];
        let world = [
            ("requests in flight", self.outgoing.bookkeeping_failure()),
            ("API calls", self.calls.bookkeeping_failure()),
            ("intents", self.intents.bookkeeping_failure()),
            ("cache", self.cache.entries.bookkeeping_failure()),
            ("read models", self.projector.models.bookkeeping_failure()),
        ];
        parts
            .into_iter()
            .flatten()
            .chain(world)
            .filter_map(|(table, failure)| Some(format!("the {table} table {}", failure?)))
            .collect()
    }
}

/// The first three of `items`, and how many more: one line however many
/// a run leaves behind.
fn first_few(items: &[String]) -> String {
    const NAMED: usize = 3;
    let named = items[..items.len().min(NAMED)].join(", ");
    match items.len().saturating_sub(NAMED) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}
