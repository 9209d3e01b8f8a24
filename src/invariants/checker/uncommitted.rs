//! `uncommitted-writes-nothing`: a step whose transaction crashed before
//! its commit leaves the durable stores as they were. A write made before
//! the crash check (a dead letter marked handled, a row inserted, a quota
//! charged) is one the transaction never made, and nothing would ever
//! undo it. The reconciler marking a dead letter seen before its review
//! committed was such a slip, found once by fuzz
//! (`scenarios/regressions/reconciler-crash-before-review.toml`), and a
//! bug planted by hand the same way in its re-drive left the task queued
//! for good: only a drain that never converged showed either, in one seed
//! of 2,000 for the re-drive.

use crate::faults::{FaultKind, Site};
use crate::world::World;

use super::Fired;

/// What a transaction adds or removes in the durable stores, by count:
/// rows and lists only grow or shrink through commits. Counts, not
/// contents, so taking it costs ten loads a step; a write in place (a
/// status, a version) is left to the invariants that read rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Footprint([u64; NAMES.len()]);

/// Before the first step: no count is ever this.
impl Default for Footprint {
    fn default() -> Footprint {
        Footprint([u64::MAX; NAMES.len()])
    }
}

/// What each count of a `Footprint` counts, in its order.
const NAMES: [&str; 10] = [
    "tasks",
    "outbox rows written",
    "inbox rows",
    "quota remaining",
    "review items",
    "rejections",
    "snapshot reports",
    "replays",
    "dead letters",
    "dead letters the reconciler has not looked at",
];

impl Footprint {
    fn of(world: &World) -> Footprint {
        let db = &world.db;
        Footprint([
            db.tasks.len() as u64,
            u64::from(db.outbox_written()),
            db.inbox.len() as u64,
            db.quota_remaining,
            db.manual_review.len() as u64,
            db.rejections_total,
            db.snapshot_reports.len() as u64,
            db.replays.len() as u64,
            world.broker.dead_letters.len() as u64,
            world.broker.unseen_dead_letters.len() as u64,
        ])
    }

    /// The counts that differ, as `name before -> after`.
    fn changes(&self, after: &Footprint) -> String {
        NAMES
            .iter()
            .zip(self.0.iter().zip(&after.0))
            .filter(|(_, (before, after))| before != after)
            .map(|(name, (before, after))| format!("{name} {before} -> {after}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl World {
    /// Takes the stores' footprint after this step and, when the step's
    /// transaction crashed before its commit, holds it to the one before
    /// (in a run where one may). `None` when there was nothing to judge.
    pub(super) fn judge_uncommitted(&mut self) -> Option<Result<(), Fired>> {
        // Taking and keeping it cost about 110 instructions a step
        // (cachegrind, a swarm seed): not paid where no transaction can
        // crash before its commit.
        if !self.faults.may_crash_before_commit() {
            return None;
        }
        let after = Footprint::of(self);
        let before = std::mem::replace(&mut self.checker.footprint, after);
        let record = self.trace.last()?;
        if record.fault != Some((Site::DbCommit, FaultKind::CrashBeforeCommit))
            || before == after
            || before == Footprint::default()
        {
            return None;
        }
        Some(Err(Fired {
            invariant: "uncommitted-writes-nothing",
            message: format!(
                "{} crashed before committing its {} at step {}, and the stores changed: {}",
                record.actor,
                record.action(),
                record.step,
                before.changes(&after)
            ),
            entities: record
                .task
                .map(|task| task.to_string())
                .into_iter()
                .collect(),
        }))
    }
}
