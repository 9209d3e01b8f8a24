//! The API calls in flight, by call id, with a count of the calls holding
//! each task, so that compaction asks whether a call holds a task with a
//! lookup instead of a walk over every call in flight; and a second count,
//! by the invariant checker's own reading of a call, for its check of the
//! same compaction.

use std::collections::BTreeMap;

use super::{ApiPhase, Call};
use crate::invariants::checker::call_about::call_about;
use crate::world::engine::ids::{CallId, TaskId};
use crate::world::engine::table::IdTable;

/// Every write goes through here, so `holding` always counts what
/// `Call::task_held` says of the calls in `table`, and `about` what the
/// checker's `call_about` says of them.
///
/// A swarm world whose APIs fall behind (paused, slowed, outnumbered by
/// clients) holds a hundred calls and more, and tens of thousands when its
/// only API thaws after a long pause (fuzz seed 29 of `--steps 100000`:
/// up to 40,970). Each compaction walked all of them, twice: the guard's
/// walk was 2.8% of a swarm campaign's samples, and the checker's, 8.2
/// million calls read over seed 29's 13,049 compactions, 36 of 680 perf
/// samples of that seed.
#[derive(Clone, Debug, Default)]
pub struct Calls {
    table: IdTable<CallId, Call>,
    /// Calls holding each task: none is listed at zero.
    holding: BTreeMap<TaskId, u32>,
    /// Calls about each task by the checker's reading (`call_about`), kept
    /// apart from `holding` so that a slip in `Call::task_held` changes
    /// what the reconciler's guard sees and not what its check sees. Both
    /// counts rest on the write paths below: one that bypassed them would
    /// blind guard and check alike (`uncount` panics on most such slips).
    /// Kept with invariants off too: one more map write per call made or
    /// ended.
    about: BTreeMap<TaskId, u32>,
}

/// The calls alone: `holding` and `about` are derived from them, so two
/// worlds with the same calls are one state of the model checker, as
/// before the counts.
impl std::hash::Hash for Calls {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.table.hash(state);
    }
}

impl Calls {
    pub fn get(&self, id: CallId) -> Option<&Call> {
        self.table.get(id)
    }

    /// Adds call `id`, a fresh id (`World::next_call_id` counts them).
    pub fn insert(&mut self, id: CallId, call: Call) {
        debug_assert!(self.table.get(id).is_none(), "{id} is already in flight");
        count(&mut self.holding, call.task_held());
        count(&mut self.about, call_about(&call));
        self.table.insert(id, call);
    }

    /// Moves call `id` to `phase` (what it holds may change with it).
    pub fn set_phase(&mut self, id: CallId, phase: ApiPhase) {
        let call = self.table.get_mut(id).expect("call exists");
        let before = (call.task_held(), call_about(call));
        call.phase = phase;
        let after = (call.task_held(), call_about(call));
        if before.0 != after.0 {
            uncount(&mut self.holding, before.0);
            count(&mut self.holding, after.0);
        }
        if before.1 != after.1 {
            uncount(&mut self.about, before.1);
            count(&mut self.about, after.1);
        }
    }

    pub fn remove(&mut self, id: CallId) -> Option<Call> {
        let call = self.table.remove(id)?;
        self.forget(&call);
        Some(call)
    }

    /// Removes the calls `take` says yes to and returns them, in id order.
    pub fn remove_where(&mut self, take: impl FnMut(&Call) -> bool) -> Vec<Call> {
        let taken = self.table.remove_where(take);
        for call in &taken {
            self.forget(call);
        }
        taken
    }

    fn forget(&mut self, call: &Call) {
        uncount(&mut self.holding, call.task_held());
        uncount(&mut self.about, call_about(call));
    }

    /// Whether a call in flight holds `task` (`Call::task_held`).
    pub fn hold_task(&self, task: TaskId) -> bool {
        self.holding.contains_key(&task)
    }

    /// Whether a call in flight is about `task` by the checker's reading
    /// (`call_about`).
    pub fn about_task(&self, task: TaskId) -> bool {
        self.about.contains_key(&task)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The calls and their ids, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (CallId, &Call)> {
        self.table.iter()
    }

    /// What is wrong with the calls table's own bookkeeping, if anything
    /// (`IdTable::bookkeeping_failure`).
    pub fn bookkeeping_failure(&self) -> Option<String> {
        self.table.bookkeeping_failure()
    }

    /// The calls in id order.
    pub fn values(&self) -> impl Iterator<Item = &Call> {
        self.table.values()
    }
}

fn count(counts: &mut BTreeMap<TaskId, u32>, task: Option<TaskId>) {
    if let Some(task) = task {
        *counts.entry(task).or_insert(0) += 1;
    }
}

fn uncount(counts: &mut BTreeMap<TaskId, u32>, task: Option<TaskId>) {
    let Some(task) = task else {
        return;
    };
    let count = counts.get_mut(&task).expect("a call's task is counted");
    *count -= 1;
    if *count == 0 {
        counts.remove(&task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::actors::client::ClientOp;
    use crate::world::engine::ids::RequestId;
    use crate::world::input::Target;

    fn call(op: ClientOp, phase: ApiPhase) -> Call {
        Call {
            request: RequestId(1),
            op: op.into(),
            intent: None,
            api: 0,
            incarnation: 1,
            phase,
        }
    }

    fn read_by_key() -> ClientOp {
        ClientOp::Read {
            target: Target::Key(crate::task::Text::from("key-000001")),
        }
    }

    /// Both counts follow every write, checked against walks of the calls.
    fn agrees(calls: &Calls, tasks: &[TaskId]) {
        for task in tasks {
            let walked = calls.values().any(|call| call.task_held() == Some(*task));
            assert_eq!(calls.hold_task(*task), walked, "{task}");
            let walked = calls.values().any(|call| call_about(call) == Some(*task));
            assert_eq!(calls.about_task(*task), walked, "{task}");
        }
    }

    #[test]
    fn counts_the_tasks_calls_hold_through_every_write() {
        let (one, two) = (TaskId(1), TaskId(2));
        let tasks = [one, two];
        let mut calls = Calls::default();
        calls.insert(CallId(1), call(read_by_key(), ApiPhase::Arrive));
        calls.insert(
            CallId(2),
            call(
                ClientOp::Cancel {
                    target: Target::Task(one),
                },
                ApiPhase::Arrive,
            ),
        );
        agrees(&calls, &tasks);
        assert!(calls.hold_task(one) && !calls.hold_task(two));
        // A read that found its key naming task two holds it until it
        // answers.
        calls.set_phase(CallId(1), ApiPhase::ReadDb { task: two });
        agrees(&calls, &tasks);
        assert!(calls.hold_task(two));
        calls.set_phase(
            CallId(1),
            ApiPhase::Respond(super::super::Response::Status(None)),
        );
        agrees(&calls, &tasks);
        assert!(!calls.hold_task(two));
        // Two calls on one task: the count, not a flag.
        calls.insert(
            CallId(3),
            call(read_by_key(), ApiPhase::ReadDb { task: one }),
        );
        calls.remove(CallId(2));
        agrees(&calls, &tasks);
        assert!(calls.hold_task(one));
        let taken = calls.remove_where(|call| call.request == RequestId(1));
        assert_eq!(taken.len(), 2);
        agrees(&calls, &tasks);
        assert!(calls.is_empty() && calls.holding.is_empty() && calls.about.is_empty());
    }
}
