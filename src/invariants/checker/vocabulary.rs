//! `rejection-names-its-reason`: every event the store or the projector
//! refuses is recorded, and every refused outside append answered, under a
//! code the lessons define, and `TERMINAL_STATE` only for a task that is
//! terminal. Clients, producers and operators match on these words, so a
//! misspelt or blank code is a broken contract. A conflict (a history or
//! a payload) is never claimed for a copy of an event the store holds as
//! it is, and `CANCELLATION_PENDING` only under cancel-wins for a task
//! someone asked to cancel. The codes are the checker's own list, spelt
//! as the lessons spell them, not read from the enum whose text it checks.
//! Here too `own-commands-legal`: a worker's or a fence's own event is
//! refused only with `CANCELLATION_PENDING`.

use crate::task::Policy;
use crate::world::World;
use crate::world::engine::ids::{ActorKind, TaskId};

use super::Fired;

/// Lesson 003's reasons `transition` gives for refusing an event.
const STATE_MACHINE_REASONS: [&str; 10] = [
    "TASK_ID_MISMATCH",
    "DUPLICATE_OR_OLD_SEQUENCE",
    "SEQUENCE_GAP",
    "TERMINAL_STATE",
    "ILLEGAL_TRANSITION",
    "ATTEMPT_MISMATCH",
    "INVALID_NEXT_ATTEMPT",
    "ARTIFACT_NOT_VERIFIED",
    "EFFECTS_NOT_RECONCILED",
    "CANCELLATION_PENDING",
];

/// The store's and the projector's refusals before the state machine: an
/// id held with another payload, a fact already stored under another id, a
/// history that does not fold, an event the store does not hold.
const STORE_REASONS: [&str; 4] = [
    "EVENT_ID_PAYLOAD_CONFLICT",
    "SEMANTIC_KEY_CONFLICT",
    "HISTORY_CONFLICT",
    "EVENT_NOT_IN_STORE",
];

/// Whether `code` is a refusal of an event the lessons define.
pub(super) fn is_lesson_refusal(code: &str) -> bool {
    STATE_MACHINE_REASONS.contains(&code) || STORE_REASONS.contains(&code)
}

impl World {
    /// Judges the rejections recorded since the last step (the database
    /// keeps the first `REJECTIONS_KEPT`; later ones are counted only).
    pub(super) fn check_rejections(&mut self) -> Result<(), Fired> {
        while self.checker.rejections_seen < self.db.rejections.len() {
            let index = self.checker.rejections_seen;
            self.checker.rejections_seen += 1;
            let rejection = &self.db.rejections[index];
            let (task, reason) = (rejection.task, rejection.reason);
            let fired = |why: String| Fired {
                invariant: "rejection-names-its-reason",
                message: format!(
                    "{} {} of {task} was rejected {reason:?}, {why}",
                    rejection.event_type, rejection.event_id
                ),
                entities: vec![task.to_string(), rejection.event_id.to_string()],
            };
            if !is_lesson_refusal(reason) {
                return Err(fired("a code no lesson defines".into()));
            }
            if reason == "TERMINAL_STATE" && !self.terminal_or_gone(task) {
                return Err(fired("but the task is not terminal".into()));
            }
            let holder = matches!(
                rejection.actor.kind,
                ActorKind::Worker | ActorKind::Reconciler
            );
            if holder && reason != "CANCELLATION_PENDING" {
                return Err(Fired {
                    invariant: "own-commands-legal",
                    message: format!(
                        "{} proposed {} {} for {task} in its own transaction and the store refused it {reason}",
                        rejection.actor, rejection.event_type, rejection.event_id
                    ),
                    entities: vec![task.to_string(), rejection.event_id.to_string()],
                });
            }
            if reason == "CANCELLATION_PENDING" {
                if self.config.cancel_policy != Policy::CancelWins {
                    return Err(fired(
                        "but only cancel-wins lets a pending cancellation refuse an event".into(),
                    ));
                }
                if !self.cancel_requested_or_gone(task) {
                    return Err(fired("but nobody asked to cancel the task".into()));
                }
            }
            if matches!(reason, "HISTORY_CONFLICT" | "EVENT_ID_PAYLOAD_CONFLICT")
                && self.stores_as_is(task, &rejection.event_id, rejection.payload_sha256)
            {
                return Err(fired(
                    "but the event store holds that very event: a copy of the history conflicts with nothing".into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether the event store holds the event `id` of `task` with this
    /// very payload (a compacted task's events are gone: not known).
    fn stores_as_is(&self, task: TaskId, id: &str, payload_sha256: crate::hash::Sha) -> bool {
        self.db.find_task(task).is_some_and(|row| {
            row.events.iter().any(|stored| {
                &*stored.event.event_id == id && stored.payload_sha256 == payload_sha256
            })
        })
    }

    /// Whether a cancellation of `task` was requested (its state names the
    /// request's signal), or the task is compacted.
    fn cancel_requested_or_gone(&self, task: TaskId) -> bool {
        self.db
            .find_task(task)
            .is_none_or(|row| row.compacted || row.state.cancellation_signal_id.is_some())
    }

    /// A task once terminal stays so (`terminal-never-reopens`); a
    /// compacted one was terminal when it went.
    fn terminal_or_gone(&self, task: TaskId) -> bool {
        self.db
            .find_task(task)
            .is_none_or(|row| row.state.status.is_terminal())
    }
}
