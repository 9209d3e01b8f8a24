//! `sim transition` and `sim replay-events`: the state machine as a tool.

use std::path::Path;

use crate::task::Policy;

pub fn run_transition(_file: Option<&Path>) -> u8 {
    unimplemented!("filled in by the transition tool change")
}

pub fn run_replay_events(_file: &Path, _policy: Policy) -> u8 {
    unimplemented!("filled in by the transition tool change")
}
