//! `snapshot-report-truthful`: the projector reports a snapshot (and sends
//! its task to manual review) only for the damage the snapshot shows, under
//! the reason that names it, and a damaged snapshot's state never hashes
//! like the true one; and a rebuild reports every snapshot it passes over
//! because its hash does not check. Judged against the checker's own
//! history of the task (the state it had at the snapshot's version), not
//! against the fold the projector ran.

use crate::task::json::state_sha256;
use crate::world::World;
use crate::world::engine::ids::TaskId;
use crate::world::stores::db::SnapshotReport;

use super::Fired;

impl World {
    /// Judges the snapshot reports written since the last step.
    pub(super) fn check_snapshot_reports(&mut self) -> Result<(), Fired> {
        while self.checker.snapshot_reports_seen < self.db.snapshot_reports.len() {
            let report = self.db.snapshot_reports[self.checker.snapshot_reports_seen].clone();
            self.checker.snapshot_reports_seen += 1;
            self.checker
                .reported_snapshots
                .insert((report.task, report.through_sequence));
            self.check_snapshot_report(&report)?;
        }
        Ok(())
    }

    /// A rebuild of `task` walks its snapshots from the newest and starts
    /// from the first whose stored hash is its state's, for that task and
    /// version: every one it passed over before that was reported.
    pub(super) fn check_rebuild_reported(&self, task: TaskId) -> Result<(), Fired> {
        let Some(row) = self.db.find_task(task) else {
            return Ok(());
        };
        for snapshot in row.snapshots.iter().rev() {
            let sound = state_sha256(&snapshot.state) == snapshot.state_sha256
                && snapshot.state.task_id == row.state.task_id
                && snapshot.state.version == snapshot.through_sequence;
            if sound {
                break;
            }
            let reported = self
                .checker
                .reported_snapshots
                .contains(&(task, snapshot.through_sequence));
            if !reported {
                return Err(Fired {
                    invariant: "snapshot-report-truthful",
                    message: format!(
                        "{task} was rebuilt past its snapshot at v{}, whose hash does not check, and nobody reported it",
                        snapshot.through_sequence
                    ),
                    entities: vec![task.to_string()],
                });
            }
        }
        Ok(())
    }

    fn check_snapshot_report(&mut self, report: &SnapshotReport) -> Result<(), Fired> {
        let SnapshotReport {
            task,
            through_sequence: through,
            reason,
            ..
        } = *report;
        let fired = |why: String| Fired {
            invariant: "snapshot-report-truthful",
            message: format!("{task}'s snapshot at v{through} was reported {reason}, but {why}"),
            entities: vec![task.to_string()],
        };
        let policy = self.config.cancel_policy;
        let Some(snapshot) = self
            .db
            .task(task)
            .snapshots
            .iter()
            .find(|snapshot| snapshot.through_sequence == through)
            .cloned()
        else {
            return Err(fired("the task has no snapshot at that version".into()));
        };
        // A history that does not check is another invariant's to report.
        let Some(truth) = self
            .checker
            .state_at(&self.db, policy, task, through)
            .cloned()
        else {
            return Ok(());
        };
        let damaged = snapshot.state != truth;
        let hash_of_state = state_sha256(&snapshot.state);
        if damaged && hash_of_state == state_sha256(&truth) {
            return Err(fired(format!(
                "its damaged state (attempt {}, {}) hashes like the true one (attempt {}, {})",
                snapshot.state.attempt,
                snapshot.state.status.as_str(),
                truth.attempt,
                truth.status.as_str()
            )));
        }
        // What the hash check must find: the stored hash is its state's,
        // and the state names the task and the version it was taken at.
        let hash_sound = snapshot.state_sha256 == hash_of_state
            && snapshot.state.task_id == truth.task_id
            && snapshot.state.version == through;
        match reason {
            "SNAPSHOT_HASH_MISMATCH" if hash_sound => Err(fired(
                "its stored hash is its state's and the state names its task and version".into(),
            )),
            "SNAPSHOT_MISMATCH" if !hash_sound => Err(fired(
                "its stored hash is not its state's: that is SNAPSHOT_HASH_MISMATCH".into(),
            )),
            "SNAPSHOT_MISMATCH" if !damaged => Err(fired(format!(
                "its state is the task's at v{through}: folding the later events from it gives the state row"
            ))),
            "SNAPSHOT_HASH_MISMATCH" | "SNAPSHOT_MISMATCH" => Ok(()),
            other => Err(fired(format!("{other} is no reason the projector gives"))),
        }
    }
}
