//! What the pipeline told a caller, judged against the durable state after
//! the step: `append-answered-truly` (the append API's answer to an outside
//! producer), `cancel-acknowledged-durable` (a cancel an API acknowledged),
//! `inbox-result-truthful` (the result an inbox row records for every later
//! duplicate), `commit-respects-live-lease` (the lease row an
//! attempt-ending commit saw) and `replay-follows-its-reference` (the dead
//! letter an operator's replay took). Each is read by the checker's
//! own rule, by comparing whole events, not through the store's payload
//! hash or semantic-key helpers, which are what it checks.

use crate::task::{EventBody, EventType, Status, TaskEvent, Text};
use crate::world::engine::ids::{DeadLetterId, OutboxId, SignalId, TaskId};
use crate::world::input::DeadLetterRef;
use crate::world::stores::broker::DeadLetter;
use crate::world::stores::db::{EffectKind, EffectState, Topic};
use crate::world::stores::db::{Payload, ProcessResult, StoredEvent};
use crate::world::stores::store::Observed;
use crate::world::{Commit, LetGo, World};

use super::{Fired, head_of};

impl World {
    /// The stored event with `id`, in whichever task holds it: the task
    /// its id names, or the owner the checker's map of ids that do not
    /// name their task records.
    fn held_event(&self, id: &Text) -> Option<&StoredEvent> {
        let find = |task: TaskId| {
            self.db.find_task(task).and_then(|row| {
                row.events
                    .iter()
                    .find(|stored| stored.event.event_id == *id)
            })
        };
        let (head, colon) = head_of(id);
        let named = if colon { TaskId::parse(head) } else { None };
        named
            .and_then(find)
            .or_else(|| self.checker.event_ids.get(id).copied().and_then(find))
    }

    /// An outside append answered `answer`: a duplicate only of the same
    /// event, a conflict only with another event under its id, committed
    /// only when it is now stored, any refusal only of an id nobody holds,
    /// and a semantic-key conflict only with a stored fact of the same
    /// type, attempt and (for a cancellation) signal.
    pub(super) fn check_append(&self, event: &TaskEvent, answer: &str) -> Result<(), Fired> {
        self.check_append_answer(event, answer)?;
        // And every refusal is recorded (the database keeps the first
        // REJECTIONS_KEPT; past them it only counts).
        let room = self.db.rejections.len() < crate::world::stores::db::REJECTIONS_KEPT;
        if !refused(answer) || !room {
            return Ok(());
        }
        // Rejections are kept in step order: only this step's are looked
        // at.
        let recorded = self
            .db
            .rejections
            .iter()
            .rev()
            .take_while(|rejection| rejection.step == self.steps)
            .find(|rejection| rejection.event_id == event.event_id);
        let Some(rejection) = recorded else {
            return Err(Fired {
                invariant: "rejection-names-its-reason",
                message: format!(
                    "append of {} was refused {answer} and no refusal was recorded",
                    event.event_id
                ),
                entities: vec![event.task_id.to_string(), event.event_id.to_string()],
            });
        };
        // The refusal names the event by its payload hash. Refused events
        // carry values no stored event has (an attempt of 0, a completion
        // of another attempt), so the second encoder rehashes each of
        // them too: an emitter wrong only on those would pass the stored
        // events' rehash.
        let json = crate::hash::canonical_json(&crate::lesson_json::event_to_json(event));
        if crate::hash::sha256(json.as_bytes()) != rejection.payload_sha256 {
            return Err(Fired {
                invariant: "payload-hash-canonical",
                message: format!(
                    "the refusal of {} records payloadSha256 {}, but its canonical JSON {json} hashes otherwise",
                    event.event_id,
                    crate::hash::hex(&rejection.payload_sha256)
                ),
                entities: vec![event.task_id.to_string(), event.event_id.to_string()],
            });
        }
        Ok(())
    }

    fn check_append_answer(&self, event: &TaskEvent, answer: &str) -> Result<(), Fired> {
        let fired = |why: String| Fired {
            invariant: "append-answered-truly",
            message: format!("append of {} answered {answer}, but {why}", event.event_id),
            entities: vec![event.task_id.to_string(), event.event_id.to_string()],
        };
        if refused(answer) && !super::vocabulary::is_lesson_refusal(answer) {
            return Err(Fired {
                invariant: "rejection-names-its-reason",
                message: format!(
                    "append of {} was refused {answer:?}, a code no lesson defines",
                    event.event_id
                ),
                entities: vec![event.task_id.to_string(), event.event_id.to_string()],
            });
        }
        let task = TaskId::parse(&event.task_id).filter(|task| self.db.find_task(*task).is_some());
        let Some(task) = task else {
            return match answer {
                "TASK_NOT_FOUND" => Ok(()),
                _ => Err(fired(format!("no task {} exists", event.task_id))),
            };
        };
        let held = self.held_event(&event.event_id);
        let same = held.is_some_and(|stored| *stored.event == *event);
        match answer {
            "TASK_NOT_FOUND" => Err(fired(format!("{task} exists"))),
            "committed" | "duplicate" if !same => Err(fired(match held {
                Some(_) => "the store holds another event under that id".into(),
                None => "the store does not hold it".into(),
            })),
            "committed" | "duplicate" => Ok(()),
            "EVENT_ID_PAYLOAD_CONFLICT" if held.is_none() || same => Err(fired(match held {
                Some(_) => "the store holds the same event".into(),
                None => "no stored event has that id".into(),
            })),
            "EVENT_ID_PAYLOAD_CONFLICT" => Ok(()),
            _ if held.is_some() => Err(fired(
                "its id is stored: a duplicate or a conflict, not a refusal".into(),
            )),
            "SEMANTIC_KEY_CONFLICT" if !self.semantic_key_held(task, event) => Err(fired(format!(
                "{task} holds no fact of that type, attempt and signal"
            ))),
            _ => Ok(()),
        }
    }

    fn semantic_key_held(&self, task: TaskId, event: &TaskEvent) -> bool {
        let row = self.db.task(task);
        let attempt = attempt_named(&event.body).unwrap_or(row.state.attempt);
        let kind = event.event_type();
        row.events.iter().any(|stored| {
            stored.event.event_type() == kind
                && stored.attempt == attempt
                && signal(&stored.event.body) == signal(&event.body)
        })
    }

    /// A cancel's answer agrees with the task's events: one acknowledged
    /// left a cancellation request with the request's signal (its first
    /// commit, or the one a retry of it found), and one refused left none
    /// (a retry of a cancel that was recorded is acknowledged again, not
    /// refused because the task moved on since).
    pub(super) fn check_cancel(
        &self,
        task: TaskId,
        signal_id: SignalId,
        acknowledged: bool,
    ) -> Result<(), Fired> {
        let wanted = signal_id.to_string();
        let held = self.db.find_task(task).is_some_and(|row| {
            row.events
                .iter()
                .any(|stored| signal(&stored.event.body) == Some(&*wanted))
        });
        if held == acknowledged {
            return Ok(());
        }
        let message = if acknowledged {
            format!(
                "a cancel of {task} with {wanted} was acknowledged, but {task} holds no cancellation request with that signal"
            )
        } else {
            format!(
                "a cancel of {task} with {wanted} was refused, but {task} holds its cancellation request"
            )
        };
        Err(Fired {
            invariant: "cancel-acknowledged-durable",
            message,
            entities: vec![task.to_string(), wanted],
        })
    }
}

impl World {
    /// A worker or a fence ends an attempt only while no one else holds
    /// the task's lease (lesson 003's fencing): a holder that paused or was
    /// slow past its lease, which another then took, must not complete,
    /// fail or cancel the attempt under it. A lease that merely ran out,
    /// untaken, does not stop its holder, as it would not stop a taker.
    /// A completion names the transform of the task's own input: what the
    /// worker wrote, verified and committed is what the client asked for.
    /// Worked out here from the input, not read from the world's cached
    /// expectation, which the worker's verification also reads.
    fn check_transform(&self, task: crate::world::engine::ids::TaskId) -> Result<(), Fired> {
        let row = self.db.task(task);
        let sha = transform_sha256(task, &row.input.canonical);
        let named = row.state.artifact_sha256.as_deref();
        if named.is_some_and(|text| crate::hash::hex_is(text, &sha)) {
            return Ok(());
        }
        Err(Fired {
            invariant: "completed-has-verified-artifact",
            message: format!(
                "{task} completed with artifact {} but its input transforms to {}",
                named.unwrap_or("none"),
                crate::hash::hex(&sha)
            ),
            entities: vec![task.to_string()],
        })
    }

    /// A start a worker commits names that worker and the lease it holds:
    /// readers of the event (a projection, an operator) see who runs the
    /// attempt and until when. The worker's name is worked out here from
    /// its id, as `worker-N`.
    fn check_started(&self, commit: Commit) -> Result<(), Fired> {
        let row = self.db.task(commit.task);
        let lease = row.lease.filter(|lease| lease.holder == commit.actor);
        let worker_ok =
            row.state.worker_id.as_deref().is_some_and(|id| {
                super::numbered(id, "worker-", u64::from(commit.actor.index) + 1)
            });
        let lease_ok = lease.is_some_and(|lease| {
            row.state.lease_until_epoch_ms == Some(lease.until_ms as i64)
                && i64::from(lease.attempt) == row.state.attempt
        });
        if worker_ok && lease_ok {
            return Ok(());
        }
        Err(Fired {
            invariant: "start-names-its-holder",
            message: format!(
                "{} started attempt {} of {} as {:?} with a lease until {:?}, but holds {}",
                commit.actor,
                row.state.attempt,
                commit.task,
                row.state.worker_id.as_deref(),
                row.state.lease_until_epoch_ms,
                lease.map_or("no lease".to_string(), |lease| format!(
                    "the lease of attempt {} until {} ms",
                    lease.attempt, lease.until_ms
                ))
            ),
            entities: vec![commit.task.to_string()],
        })
    }

    pub(super) fn check_commit(&self, commit: Commit) -> Result<(), Fired> {
        if commit.kind == EventType::TaskCompleted {
            self.check_transform(commit.task)?;
        }
        if commit.kind == EventType::TaskStarted
            && commit.actor.kind == crate::world::engine::ids::ActorKind::Worker
        {
            self.check_started(commit)?;
        }
        let ends_attempt = matches!(
            commit.kind,
            EventType::TaskCompleted
                | EventType::AttemptFailed
                | EventType::TaskFailed
                | EventType::TaskCancelled
        );
        let Some(lease) = commit.lease.filter(|_| ends_attempt) else {
            return Ok(());
        };
        let theirs = (lease.holder, lease.incarnation) != (commit.actor, commit.incarnation);
        if !theirs || lease.until_ms <= self.now {
            return Ok(());
        }
        let why = format!(
            "the lease {} (incarnation {}) holds until {} ms",
            lease.holder, lease.incarnation, lease.until_ms
        );
        Err(Fired {
            invariant: "commit-respects-live-lease",
            message: format!(
                "{} (incarnation {}) committed {} for attempt {} of {} at {} ms under {why}",
                commit.actor,
                commit.incarnation,
                commit.kind.as_str(),
                commit.attempt,
                commit.task,
                self.now
            ),
            entities: vec![commit.task.to_string()],
        })
    }
}

impl World {
    /// An inbox row that turns final records what became of its message's
    /// task, as the task stands: `completed` for the attempt the task
    /// completed with, `failed` for a failed task, `cancelled` for a
    /// cancelled one (whichever attempt the message carried), and
    /// `superseded` only when the task is not cancelled and neither
    /// settled nor still runs the message's attempt. A duplicate delivery
    /// is answered with
    /// this record for ever, so a wrong one misinforms every later copy.
    /// Judged before the checker's copy of the row is updated, once.
    pub(super) fn check_inbox_result(&self, message: OutboxId) -> Result<(), Fired> {
        let Some(row) = self.db.inbox.get(message) else {
            return Ok(());
        };
        let was_final = self
            .checker
            .inbox
            .get(message)
            .is_some_and(|(_, state, ..)| state.is_final());
        let (Some(result), false) = (row.result, was_final) else {
            return Ok(());
        };
        if !row.state.is_final() {
            return Ok(());
        }
        let Some(Payload::Work { task, attempt, .. }) =
            self.db.find_outbox(message).map(|outbox| &outbox.payload)
        else {
            return Ok(());
        };
        let Some(state) = self.db.find_task(*task).map(|row| &row.state) else {
            return Ok(());
        };
        let ours = state.attempt == i64::from(*attempt);
        let true_to_task = match result {
            ProcessResult::Completed { attempt: named, .. } => {
                state.status == Status::Completed && state.attempt == i64::from(named)
            }
            ProcessResult::Failed { .. } => state.status == Status::Failed,
            ProcessResult::Cancelled { .. } => state.status == Status::Cancelled,
            // A cancelled task's messages are answered `cancelled`,
            // whichever attempt they carried.
            // Nor is the message's own attempt superseded while the task
            // still runs it: that attempt is live, its work not done.
            ProcessResult::Superseded { .. } => {
                state.status != Status::Cancelled
                    && !(ours
                        && matches!(
                            state.status,
                            Status::Completed
                                | Status::Failed
                                | Status::Running
                                | Status::Cancelling
                        ))
            }
        };
        if true_to_task {
            return Ok(());
        }
        Err(Fired {
            invariant: "inbox-result-truthful",
            message: format!(
                "the inbox row of {message} (attempt {attempt} of {task}) recorded {} while {task} is {} at attempt {}",
                result.as_str(),
                state.status.as_str(),
                state.attempt
            ),
            entities: vec![message.to_string(), task.to_string()],
        })
    }
}

impl World {
    /// A worker gave up an attempt for a reason durable state shows:
    /// `lease-lost` when the task's lease is not its own live lease for
    /// that attempt; `fenced` when its own attempt's artifact effect is
    /// fenced, compensated or failed, or the object under its token was
    /// hidden or deleted; `not-verified` when no artifact effect of its
    /// attempt is verified. A worker that gives up for no reason leaves
    /// its task to re-drives and, at last, to a review nothing earned.
    pub(super) fn check_let_go(&self, let_go: LetGo) -> Result<(), Fired> {
        let LetGo {
            task,
            attempt,
            token,
            actor,
            incarnation,
            why,
        } = let_go;
        let fired = |saw: String| Fired {
            invariant: "let-go-for-a-reason",
            message: format!("{actor} let go of {task}'s attempt {attempt} as {why}, but {saw}"),
            entities: vec![task.to_string()],
        };
        let Some(row) = self.db.find_task(task) else {
            return Ok(());
        };
        // The attempt's own artifact rows, whatever token the worker held.
        let own = || {
            row.effects.iter().filter(|ledger| {
                ledger.token.kind == EffectKind::Artifact && ledger.token.attempt == attempt
            })
        };
        let lease_mine = || {
            row.lease.is_some_and(|lease| {
                (lease.holder, lease.incarnation, lease.attempt) == (actor, incarnation, attempt)
                    && lease.until_ms >= self.now
            })
        };
        let fenced = || {
            own().any(|ledger| {
                ledger.fenced_by.is_some()
                    || matches!(ledger.state, EffectState::Compensated | EffectState::Failed)
            }) || (token.attempt == attempt
                && matches!(
                    self.store.observe(token),
                    Observed::Tombstone | Observed::Present { hidden: true, .. }
                ))
        };
        match why {
            "lease-lost" if lease_mine() => Err(fired("it holds the task's lease, live".into())),
            "fenced" if !fenced() => Err(fired(
                "no artifact effect of that attempt is fenced and its object is neither hidden nor deleted"
                    .into(),
            )),
            "not-verified" if own().any(|ledger| ledger.state == EffectState::Verified) => {
                Err(fired("its artifact effect is verified".into()))
            }
            _ => Ok(()),
        }
    }
}

impl World {
    /// `replay-follows-its-reference`: the operator's replay took the dead
    /// letter its reference names, read by the checker's own rule: the
    /// letter with that id, the first of that message, or the first of that
    /// task's work; and found none only when no letter matches.
    pub(super) fn check_replay(
        &self,
        reference: &DeadLetterRef,
        found: Option<DeadLetterId>,
    ) -> Result<(), Fired> {
        let named = |letter: &&DeadLetter| match reference {
            DeadLetterRef::Id(id) => letter.id == *id,
            DeadLetterRef::Message(message) => letter.message == *message,
            DeadLetterRef::Task(task) => letter.task == *task && letter.topic == Topic::TaskWork,
        };
        let owed = self
            .broker
            .dead_letters
            .iter()
            .find(named)
            .map(|letter| letter.id);
        if found == owed {
            return Ok(());
        }
        let (asked, entity) = match reference {
            DeadLetterRef::Id(id) => (format!("dead letter {id}"), id.to_string()),
            DeadLetterRef::Message(message) => {
                (format!("the dead letter of {message}"), message.to_string())
            }
            DeadLetterRef::Task(task) => {
                (format!("the work dead letter of {task}"), task.to_string())
            }
        };
        let name =
            |letter: Option<DeadLetterId>| letter.map_or("none".to_string(), |id| id.to_string());
        Err(Fired {
            invariant: "replay-follows-its-reference",
            message: format!(
                "the operator asked to replay {asked}; the world took {}, where the letters name {}",
                name(found),
                name(owed)
            ),
            entities: vec![entity],
        })
    }
}

/// The attempt an event's body names, if it names one: written again here,
/// as `EventBody::attempt` is code under test.
pub(super) fn attempt_named(body: &EventBody) -> Option<i64> {
    match body {
        EventBody::TaskStarted { attempt, .. }
        | EventBody::TaskCompleted { attempt, .. }
        | EventBody::AttemptFailed { attempt, .. }
        | EventBody::TaskFailed { attempt, .. } => Some(*attempt),
        EventBody::CancellationRequested { .. } | EventBody::TaskCancelled { .. } => None,
    }
}

/// A cancellation request's signal id.
pub(super) fn signal(body: &EventBody) -> Option<&str> {
    match body {
        EventBody::CancellationRequested { signal_id, .. } => Some(signal_id),
        _ => None,
    }
}

/// The SHA-256 of what lesson 000's transform writes for `task`: the
/// canonical JSON of the normalized input, the schema version and the task
/// id (keys sorted), and a newline. The checker's own statement of it,
/// apart from the worker's `artifact_for`, so that a worker computing the
/// wrong bytes, consistently, is still caught.
fn transform_sha256(
    task: crate::world::engine::ids::TaskId,
    canonical_input: &str,
) -> crate::hash::Sha {
    let mut digits = [0u8; 20];
    let id = crate::task::json::decimal(&mut digits, u64::from(task.0));
    crate::hash::sha256_of_parts(&[
        b"{\"normalized\":",
        canonical_input.as_bytes(),
        b",\"schemaVersion\":1,\"taskId\":\"task-",
        id.as_bytes(),
        b"\"}\n",
    ])
}

/// Whether the append API's answer refuses the event (anything but taking
/// it, a copy of one stored, or no such task).
fn refused(answer: &str) -> bool {
    !matches!(answer, "committed" | "duplicate" | "TASK_NOT_FOUND")
}
