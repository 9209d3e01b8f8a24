//! `lease-never-taken-live` and `lease-bounded` for the inbox's
//! processing leases (the task's attempt leases are judged in
//! `checks.rs`): a row's lease passes to another holder only once it ran
//! out, and no lease runs longer than its term from the step that wrote it.

use crate::world::World;
use crate::world::engine::ids::OutboxId;
use crate::world::stores::db::InboxLease;

use super::Fired;

impl World {
    pub(super) fn check_inbox_lease(
        &self,
        message: OutboxId,
        replaced: Option<InboxLease>,
    ) -> Result<(), Fired> {
        let Some(lease) = self.db.inbox.get(message).and_then(|row| row.lease) else {
            return Ok(());
        };
        let InboxLease {
            holder,
            incarnation,
            until_ms: until,
        } = lease;
        let term = self.config.inbox_lease_ms;
        if until > self.now + term {
            return Err(Fired {
                invariant: "lease-bounded",
                message: format!(
                    "{holder} holds the inbox row of {message} until {until} ms, granted at {} ms for more than inbox_lease_ms = {term}",
                    self.now
                ),
                entities: vec![message.to_string()],
            });
        }
        let Some(old) = replaced.filter(|old| old.held_by_other(self.now, holder, incarnation))
        else {
            return Ok(());
        };
        let (old_holder, old_incarnation, old_until) = (old.holder, old.incarnation, old.until_ms);
        Err(Fired {
            invariant: "lease-never-taken-live",
            message: format!(
                "the inbox row of {message}, held by {old_holder} (incarnation {old_incarnation}) until {old_until} ms, went to {holder} (incarnation {incarnation}) at {} ms",
                self.now
            ),
            entities: vec![message.to_string()],
        })
    }
}
