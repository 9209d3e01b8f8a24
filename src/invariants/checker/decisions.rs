//! Decisions an actor takes on what it read, judged against what it read:
//! a client's sends of one request against `client_attempts_max`
//! (`within-budgets`), the reconciler's re-drives against the letter's
//! error code (`redrive-only-transient`), and a worker's resume or
//! cancellation of a delivered attempt against the task's status
//! (`delivery-acts-on-status`). Each asks what durable state or trace
//! shows the guard was skipped; none reads the counter or flag the
//! protocol keeps for the same decision.

use crate::task::Status;
use crate::world::World;
use crate::world::engine::ids::{ActorKind, RequestId};
use crate::world::engine::step::Verb;

use super::Fired;

/// Error codes whose cause may pass by itself: delivery attempts spent,
/// the store out, a lease another holds.
/// Written here apart from the broker's own list, so that a wrong list
/// there shows.
const TRANSIENT_CODES: [&str; 3] = [
    "DELIVERY_ATTEMPTS_EXHAUSTED",
    "STORE_UNAVAILABLE",
    "LEASE_HELD",
];

impl World {
    /// Counts each send of a request the step made and judges a client's
    /// giving up; the count is the checker's own, from the sends it saw.
    pub(super) fn check_client_send(
        &mut self,
        request: RequestId,
        gave_up: bool,
    ) -> Result<(), Fired> {
        let max = self.config.client_attempts_max;
        let fired = |message: String| Fired {
            invariant: "within-budgets",
            message,
            entities: vec![request.to_string()],
        };
        if gave_up {
            let made = self.checker.client_sends.remove(request).unwrap_or(0);
            if u64::from(made) < max {
                return Err(fired(format!(
                    "a client gave up on {request} after {made} sends (client_attempts_max = {max})"
                )));
            }
            return Ok(());
        }
        let sends = self.checker.client_sends.get_or_insert_with(request, || 0);
        *sends += 1;
        let made = *sends;
        if u64::from(made) > max {
            return Err(fired(format!(
                "a client sent {request} {made} times (client_attempts_max = {max})"
            )));
        }
        Ok(())
    }

    /// A re-drive of a dead letter whose cause does not pass by itself
    /// (poison: the input needs a newer handler) re-delivers the same
    /// failure; only a human's replay, after a fix, may send it again.
    pub(super) fn check_redrive(
        &self,
        letter: crate::world::engine::ids::DeadLetterId,
    ) -> Result<(), Fired> {
        let Some(letter) = self.broker.dead_letter_by_id(letter) else {
            return Err(Fired {
                invariant: "redrive-only-transient",
                message: format!("the reconciler re-drove {letter}, which is not a dead letter"),
                entities: vec![letter.to_string()],
            });
        };
        if TRANSIENT_CODES.contains(&letter.error_code) {
            return self.check_redriven_work(letter);
        }
        Err(Fired {
            invariant: "redrive-only-transient",
            message: format!(
                "the reconciler re-drove {} of {} ({}), dead-lettered {}: not a cause that passes by itself",
                letter.id, letter.task, letter.message, letter.error_code
            ),
            entities: vec![letter.task.to_string(), letter.message.to_string()],
        })
    }

    /// A re-drive sends the dead-lettered work again: the row it writes
    /// (its task's newest) asks for the attempt the letter's message did.
    /// Another attempt names work no holder will find (a later one) or
    /// that already ended (an earlier one), and the task waits for good.
    fn check_redriven_work(
        &self,
        letter: &crate::world::stores::broker::DeadLetter,
    ) -> Result<(), Fired> {
        use crate::world::stores::db::Payload;
        let Payload::Work {
            attempt: lettered, ..
        } = letter.payload
        else {
            return Ok(());
        };
        let written = self
            .db
            .find_task(letter.task)
            .and_then(|row| row.outbox_rows.last())
            .and_then(|id| self.db.find_outbox(*id))
            .map(|row| match row.payload {
                Payload::Work { attempt, .. } => Some(attempt),
                Payload::Event(_) => None,
            });
        if written == Some(Some(lettered)) {
            return Ok(());
        }
        Err(Fired {
            invariant: "redrive-only-transient",
            message: format!(
                "the reconciler re-drove {} of {} (attempt {lettered}) but its newest outbox row is {}",
                letter.id,
                letter.task,
                match written {
                    Some(Some(attempt)) => format!("work for attempt {attempt}"),
                    Some(None) => "an event, not work".to_string(),
                    None => "missing".to_string(),
                }
            ),
            entities: vec![letter.task.to_string(), letter.message.to_string()],
        })
    }

    /// Judges a worker's decision on a delivery (its inbox step or a
    /// reload): it resumes an attempt only while the task runs it, and
    /// fences it for cancellation only while the task is cancelling it.
    /// The decision is taken in the step's own transaction, which changes
    /// no status, so the status after the step is the one it read.
    pub(super) fn judge_delivery_decision(&self) -> Option<Result<(), Fired>> {
        let record = self.trace.last()?;
        if record.actor.kind != ActorKind::Worker
            || !matches!(record.verb, Verb::Register | Verb::Reload)
        {
            return None;
        }
        let wanted = match record.outcome {
            "resume" => Status::Running,
            "cancelling" => Status::Cancelling,
            _ => return None,
        };
        let task = record.task?;
        let state = &self.db.find_task(task)?.state;
        if state.status == wanted && state.attempt == i64::from(record.attempt) {
            return Some(Ok(()));
        }
        Some(Err(Fired {
            invariant: "delivery-acts-on-status",
            message: format!(
                "{} took {task}'s attempt {} as {} at step {}, but the task is {} at attempt {}",
                record.actor,
                record.attempt,
                record.outcome,
                record.step,
                state.status.as_str(),
                state.attempt
            ),
            entities: vec![task.to_string()],
        }))
    }
}
