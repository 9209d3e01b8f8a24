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
        // Fences run on workers (`worker.fence`) and on the reconciler, and
        // each claim names its fencer: a row settled by anyone other than
        // the last claim's fencer was settled by a stale one (a fence
        // whose claim another took over, even once that one's lease ran
        // out too).
        let Mirror::Live(mirror) = mirror_in(&mut self.checker.tasks, &self.db, task) else {
            return Ok(());
        };
        for ledger in &row.effects {
            let (token, now) = (ledger.token, ledger.state);
            let at = mirror.settled.iter().position(|(t, _)| *t == token);
            let copy = at.map(|at| mirror.settled[at].1);
            if let Some(fence) = ledger.fenced_by
                && actor != fence
                && !now.is_open()
                && copy != Some(now)
            {
                return Err(Fired {
                    invariant: "effect-outcome-final",
                    message: format!(
                        "{actor} settled the ledger row of {token} {} while {fence} had claimed it",
                        now.as_str(),
                    ),
                    entities: vec![task.to_string(), token.to_string()],
                });
            }
            // A settled row that reopened is one no settled state may be
            // followed by; an open row not yet settled has nothing to keep.
            match at {
                Some(at) => {
                    let settled = mirror.settled[at].1;
                    if !may_follow(settled, now) {
                        return Err(reopened(task, token, settled, now));
                    }
                    mirror.settled[at].1 = now;
                }
                None if !now.is_open() => mirror.settled.push((token, now)),
                None => {}
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
