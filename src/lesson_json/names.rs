//! Reading the lessons' names back from text: statuses, event types and
//! completion policies, as lesson 003's JSON, scenario files and the
//! command line spell them. The state machine only writes them
//! (`as_str`); only readers of text parse them.

use crate::task::{EventType, Policy, Status};

impl Status {
    pub fn parse(text: &str) -> Option<Status> {
        Status::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
    }
}

impl EventType {
    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

impl Policy {
    pub fn parse(text: &str) -> Option<Policy> {
        match text {
            "completion-wins" => Some(Policy::CompletionWins),
            "cancel-wins" => Some(Policy::CancelWins),
            _ => None,
        }
    }
}
