//! `effect-outcome-final`: once the effect ledger settles an effect
//! (verified, compensation required, compensated, failed) the row only
//! moves on to a later outcome, never back to an open state or across to
//! another outcome. Lesson 000's worker and reconciler verify or record
//! an unknown outcome only on rows still open (`unknown`, `started`); a
//! writer that skips that guard (a stale worker verifying or recording an
//! unknown outcome over a row a fence or a compensation already settled)
//! leaves exactly this in the ledger. (A fence's resolution and a
//! mismatch's failure write settled rows too, under the task's lease:
//! only to a later outcome.) The checker keeps its own copy of each
//! settled row's state. And a row a fence claimed (`fenced_by`) is the fence's to settle: a
//! worker that verifies or fails it after the claim is the stale holder
//! the fence was sent to stop.

use crate::world::World;
use crate::world::engine::ids::{ActorKind, TaskId};
use crate::world::stores::db::EffectState;

use super::{Fired, Mirror, mirror_in};

/// Whether a settled row may go from `settled` to `now`. A verified
/// artifact is compensated when cancel-wins hides it; a row that needs
/// its compensation gets it, or fails; a row failed without an artifact
/// (a fence that found none) is compensated when a stale writer's
/// artifact turns up and is hidden. Nothing settled reopens.
fn may_follow(settled: EffectState, now: EffectState) -> bool {
    use EffectState::{Compensated, CompensationRequired, Failed, Verified};
    settled == now
        || matches!(
            (settled, now),
            (Verified | CompensationRequired | Failed, Compensated)
                | (CompensationRequired, Failed)
        )
}

impl World {
    /// Compares each ledger row of `task` with the checker's copy of its
    /// settled state, then records the rows settled now.
    pub(super) fn check_effect_outcomes(&mut self, task: TaskId) -> Result<(), Fired> {
        // The step's record is in the trace by now. Only workers and the
        // reconciler (fences run on both) write ledger rows: the API's and
        // the projector's many steps on a task leave its rows as the last
        // check saw them.
        let Some(actor) = self.trace.last().map(|record| record.actor) else {
            return Ok(());
        };
        if !matches!(actor.kind, ActorKind::Worker | ActorKind::Reconciler) {
            return Ok(());
        }
        let Some(row) = self.db.find_task(task) else {
            return Ok(());
        };
        if row.compacted || row.effects.is_empty() {
            return Ok(());
        }
        // A worker runs fences too (`worker.fence`): only a worker other
        // than the claim's holder is the stale one.
        let worker = (actor.kind == ActorKind::Worker).then_some(actor);
        let Mirror::Live(mirror) = mirror_in(&mut self.checker.tasks, &self.db, task) else {
            return Ok(());
        };
        for ledger in &row.effects {
            if ledger.state.is_open() {
                if let Some((_, settled)) = mirror.settled.iter().find(|(t, _)| *t == ledger.token)
                {
                    return Err(reopened(task, ledger.token, *settled, ledger.state));
                }
                continue;
            }
            let copy = mirror.settled.iter().find(|(t, _)| *t == ledger.token);
            if let (Some(writer), Some(fence)) = (worker, ledger.fenced_by)
                && writer != fence
                && copy.is_none_or(|(_, settled)| *settled != ledger.state)
            {
                return Err(Fired {
                    invariant: "effect-outcome-final",
                    message: format!(
                        "{writer} settled the ledger row of {} {} while {fence} had claimed it",
                        ledger.token,
                        ledger.state.as_str(),
                    ),
                    entities: vec![task.to_string(), ledger.token.to_string()],
                });
            }
            match mirror.settled.iter_mut().find(|(t, _)| *t == ledger.token) {
                Some((_, settled)) if may_follow(*settled, ledger.state) => {
                    *settled = ledger.state;
                }
                Some((_, settled)) => {
                    return Err(reopened(task, ledger.token, *settled, ledger.state));
                }
                None => mirror.settled.push((ledger.token, ledger.state)),
            }
        }
        Ok(())
    }
}

fn reopened(
    task: TaskId,
    token: crate::world::stores::db::Token,
    settled: EffectState,
    now: EffectState,
) -> Fired {
    Fired {
        invariant: "effect-outcome-final",
        message: format!(
            "the ledger row of {token} was settled {} and is now {}",
            settled.as_str(),
            now.as_str()
        ),
        entities: vec![task.to_string(), token.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::may_follow;
    use crate::world::stores::db::EffectState::{
        self, Compensated, CompensationRequired, Completed, Failed, Planned, Started, Unknown,
        Verified,
    };

    const OPEN: [EffectState; 4] = [Planned, Started, Unknown, Completed];

    #[test]
    fn a_settled_row_moves_only_to_a_later_outcome() {
        for settled in [Verified, CompensationRequired, Compensated, Failed] {
            assert!(may_follow(settled, settled), "{settled:?} stays");
            for open in OPEN {
                assert!(!may_follow(settled, open), "{settled:?} never reopens");
            }
        }
        // Cancel-wins hides a verified artifact; a required compensation
        // is done or fails; an artifact found after its row failed is
        // hidden.
        for settled in [Verified, CompensationRequired, Failed] {
            assert!(may_follow(settled, Compensated));
        }
        assert!(may_follow(CompensationRequired, Failed));
        // Nothing goes back to verified, or from compensated anywhere.
        for settled in [CompensationRequired, Compensated, Failed] {
            assert!(!may_follow(settled, Verified));
        }
        for now in [Verified, CompensationRequired, Failed] {
            assert!(!may_follow(Compensated, now));
        }
        assert!(!may_follow(Verified, CompensationRequired));
        assert!(!may_follow(Verified, Failed));
        assert!(!may_follow(Failed, CompensationRequired));
    }
}
