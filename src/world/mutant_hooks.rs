//! Code that runs only with a named mutant on, for the actors and stores
//! whose planted bug is a line or two: the guard that switches each on stays
//! in the protocol's code, the wrong behaviour lives here. Kept out of
//! cargo-mutants' scope with the actors' own `mutant_hooks.rs` (a mutant of
//! a planted bug is not a bug of the protocol; README, Mutation testing).

use crate::task::{EventType, Status, TaskEvent, TaskState, Transition, transition};
use crate::world::World;
use crate::world::actors::publisher::FRESH_MESSAGE_BASE;
use crate::world::engine::ids::OutboxId;

impl World {
    /// `new-message-id-on-republish`: a republished row goes out under an
    /// id of its own.
    pub(in crate::world) fn fresh_message_id(&self) -> OutboxId {
        OutboxId(FRESH_MESSAGE_BASE + self.broker.published as u32)
    }

    /// `no-terminal-guard`: an event a terminal task refused is applied as
    /// if the task were live, in the status the event needs.
    pub(in crate::world) fn apply_past_terminal(
        &self,
        state: &TaskState,
        event: &TaskEvent,
    ) -> Transition {
        let mut live = state.clone();
        live.status = match event.event_type() {
            EventType::TaskStarted => Status::Queued,
            EventType::TaskCancelled => Status::Cancelling,
            _ => Status::Running,
        };
        transition(&live, event, self.config.cancel_policy)
    }

    /// `skip-sequence-gaps`: the projector applies an event past a gap as
    /// if the gap were not there.
    pub(in crate::world) fn apply_over_gap(
        &mut self,
        mut state: TaskState,
        event: &TaskEvent,
    ) -> Transition {
        state.version = event.sequence - 1;
        self.run_transition(&state, event)
    }
}
