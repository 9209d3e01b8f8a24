//! `poison-judged-by-its-handler`: the worker's transform classifies an
//! input against the handler version it runs under (lesson 003: an input
//! the current handler rejects is poison; one it accepts is worked). The
//! checker takes the version from the world at the step the transform ran
//! (a start that committed, or a delivery's inbox step or a reload that
//! resumed its attempt) and judges the two steps only a transform leads
//! to: `fail-poison` must see an input that needs a newer handler, `plan`
//! one that does not.
//! The version is noted at the transform, not read at the later step: an
//! operator may bump the handler between the two, and the transform was
//! right for the version it saw.

use crate::world::World;
use crate::world::engine::ids::{ActorKind, TaskId};
use crate::world::engine::step::Verb;

use super::Fired;

impl World {
    /// Notes the handler version of a transform the step ran, or judges a
    /// step that acted on one. `None` when the step was neither.
    pub(super) fn judge_transform(&mut self) -> Option<Result<(), Fired>> {
        let record = self.trace.last()?;
        if record.actor.kind != ActorKind::Worker {
            return None;
        }
        let ran_transform = (record.verb == Verb::Start && record.outcome == "committed")
            || record.outcome == "resume";
        if ran_transform {
            self.checker
                .transforms
                .insert(record.actor, self.handler_version);
            return None;
        }
        if matches!(record.verb, Verb::Register | Verb::Crash) {
            // A new delivery (whose inbox step did not resume), or none:
            // what a transform before it saw judges nothing after it.
            self.checker.transforms.remove(&record.actor);
            return None;
        }
        let poison = match record.verb {
            Verb::FailPoison => true,
            Verb::Plan => false,
            _ => return None,
        };
        let (actor, task, step) = (record.actor, record.task?, record.step);
        let needed = self.db.find_task(task)?.input.handler_needed;
        let Some(&version) = self.checker.transforms.get(&actor) else {
            return Some(Err(fired(
                format!(
                    "{actor} ran {} for {task} at step {step} with no transform in its delivery",
                    record.verb.as_str()
                ),
                task,
            )));
        };
        if poison == (needed > version) {
            return Some(Ok(()));
        }
        let (did, because) = if poison {
            ("failed as poison", "does not need a newer handler")
        } else {
            ("planned its effect", "needs a newer handler")
        };
        Some(Err(fired(
            format!(
                "{actor} {did} {task} at step {step}, whose input {because}: it needs handler version {needed}, the transform ran under {version}"
            ),
            task,
        )))
    }
}

fn fired(message: String, task: TaskId) -> Fired {
    Fired {
        invariant: "poison-judged-by-its-handler",
        message,
        entities: vec![task.to_string()],
    }
}
