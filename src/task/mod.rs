//! The task lifecycle of lesson 003: the pure state machine, its JSON shapes,
//! and replay of an event history.

pub mod json;
pub mod replay;
pub mod transition;

pub use transition::{
    EventBody, EventType, Evidence, Policy, RejectReason, Status, TaskEvent, TaskState, Text,
    Transition, initial_state, transition,
};
