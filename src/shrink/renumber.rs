//! Task ids follow a smaller world: the database numbers tasks in the
//! order they are created, so a candidate that drops other keys' creates
//! gives the failing key's task another id, and a request that named the
//! task by id (a cancel or read by task, an outside producer's event, an
//! event id derived from the task's) would name another task or none.

use std::collections::BTreeMap;

use crate::scenario::{RequestKind, Scenario, Target};
use crate::task::Text;
use crate::world::engine::ids::TaskId;

/// Each key's tasks in creation order (ids are handed out in that order),
/// from (task, key) pairs: a run's task rows, or a story's.
pub(super) fn tasks_by_key(
    tasks: impl Iterator<Item = (TaskId, Text)>,
) -> BTreeMap<Text, Vec<TaskId>> {
    let mut by_key: BTreeMap<Text, Vec<TaskId>> = BTreeMap::new();
    for (task, key) in tasks {
        by_key.entry(key).or_default().push(task);
    }
    for tasks in by_key.values_mut() {
        tasks.sort();
    }
    by_key
}

/// The old id of every task that has a new one: the nth task of a key in
/// `before` is the nth task of the same key in `after`.
pub(super) fn moves(
    before: &BTreeMap<Text, Vec<TaskId>>,
    after: &BTreeMap<Text, Vec<TaskId>>,
) -> BTreeMap<TaskId, TaskId> {
    let mut moved = BTreeMap::new();
    for (key, old) in before {
        let Some(new) = after.get(key) else { continue };
        for (old, new) in old.iter().zip(new) {
            if old != new {
                moved.insert(*old, *new);
            }
        }
    }
    moved
}

/// `text` with a task id it is, or begins with (`task-9:TaskStarted:1`,
/// the id of an event the task's own actors wrote), moved.
fn moved_text(text: &Text, moved: &BTreeMap<TaskId, TaskId>) -> Option<Text> {
    let (id, rest) = match text.find(':') {
        Some(at) => text.split_at(at),
        None => (&text[..], ""),
    };
    let new = moved.get(&TaskId::parse(id)?)?;
    Some(format!("{new}{rest}").into())
}

/// Rewrites every task id the requests name by `moved`; says whether
/// anything changed.
pub(super) fn rename_tasks(scenario: &mut Scenario, moved: &BTreeMap<TaskId, TaskId>) -> bool {
    let mut changed = false;
    for request in &mut scenario.requests {
        match &mut request.kind {
            RequestKind::Cancel {
                target: Target::Task(task),
            }
            | RequestKind::ReadStatus {
                target: Target::Task(task),
            } => {
                if let Some(new) = moved.get(task) {
                    *task = *new;
                    changed = true;
                }
            }
            RequestKind::AppendEvent { event } | RequestKind::DeliverEvent { event } => {
                if let Some(new) = moved_text(&event.task_id, moved) {
                    event.task_id = new;
                    changed = true;
                }
                if let Some(new) = moved_text(&event.event_id, moved) {
                    event.event_id = new;
                    changed = true;
                }
            }
            _ => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(n: u32) -> TaskId {
        TaskId::parse(&format!("task-{n}")).unwrap()
    }

    #[test]
    fn the_nth_task_of_a_key_keeps_its_place_and_event_ids_follow_it() {
        let before = BTreeMap::from([
            (Text::from("a"), vec![task(1), task(3)]),
            (Text::from("b"), vec![task(2)]),
        ]);
        let after = BTreeMap::from([(Text::from("a"), vec![task(1), task(2)])]);
        let moved = moves(&before, &after);
        assert_eq!(moved, BTreeMap::from([(task(3), task(2))]));
        assert_eq!(
            moved_text(&Text::from("task-3:TaskStarted:1"), &moved).as_deref(),
            Some("task-2:TaskStarted:1")
        );
        assert_eq!(
            moved_text(&Text::from("task-3"), &moved).as_deref(),
            Some("task-2")
        );
        // Ids that did not move, and text that is no task id, stay.
        assert_eq!(moved_text(&Text::from("task-1"), &moved), None);
        assert_eq!(moved_text(&Text::from("outside-3"), &moved), None);
        assert_eq!(moved_text(&Text::from("task-30"), &moved), None);
    }
}
