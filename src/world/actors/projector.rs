//! The projector (lesson 003 §7, lesson 000 §10 step 10): consumes
//! `task-events` at least once, possibly out of order, and keeps a read
//! model of each task by applying the same transition. A duplicate is known
//! by its event id; a gap is refetched from the event store, never skipped;
//! an old sequence with an unseen id is a history conflict, reported, never
//! applied. After a crash it rebuilds a task lazily from its latest verified
//! snapshot, later events and the state row. It owns cache invalidation.

use std::sync::Arc;

use crate::hash::Sha;
use crate::task::{TaskEvent, TaskState, Text};
use crate::world::engine::cow::CowTable;
use crate::world::engine::ids::TaskId;
use crate::world::engine::life::Life;
use crate::world::engine::table::IdTable;
use crate::world::stores::broker::Delivery;
use crate::world::stores::db::Payload;

mod steps;

/// The projector's view of one task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Model {
    pub state: TaskState,
    /// (event id, payload hash) of the event applied at each sequence.
    pub applied: Vec<(Text, Sha)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProjectorPhase {
    Idle,
    Refetch,
    Invalidate { task: TaskId, version: i64 },
    Ack,
}

#[derive(Clone, Debug, Hash)]
pub struct Projector {
    pub life: Life,
    pub phase: ProjectorPhase,
    pub current: Option<Delivery>,
    pub models: CowTable<IdTable<TaskId, Model>>,
    /// Deliveries handed over: (arrival, order, delivery).
    pub mailbox: CowTable<Vec<(u64, u64, Delivery)>>,
    next_order: u64,
    /// The highest task id that existed when it last restarted: it may have
    /// known those tasks and forgotten them.
    pub watermark: u32,
}

impl Projector {
    /// Lets copies share this part's `CowTable`s until one of them writes
    /// them (`World::share`).
    pub fn share(&mut self) {
        self.models.share();
        self.mailbox.share();
    }

    pub fn new() -> Projector {
        Projector {
            life: Life::new(),
            phase: ProjectorPhase::Idle,
            current: None,
            models: CowTable::default(),
            mailbox: CowTable::default(),
            next_order: 0,
            watermark: 0,
        }
    }

    pub fn wipe(&mut self) {
        self.phase = ProjectorPhase::Idle;
        self.current = None;
        self.models.clear();
        self.mailbox.clear();
    }
}

impl Default for Projector {
    fn default() -> Projector {
        Projector::new()
    }
}

/// How a delivered event stands against the event store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stored {
    /// The store holds this id with this payload at its sequence.
    Same,
    /// The store holds this id with another payload.
    AnotherPayload,
    /// The store does not hold this id for the task: forged, or from
    /// another task's history.
    Absent,
}

/// What applying one event to a model gave.
enum Applied {
    Fresh,
    Duplicate,
    Conflict(&'static str),
    Gap,
}

/// The delivered event, shared (a reference count, not a copy of its text).
fn event_of(delivery: &Delivery) -> Arc<TaskEvent> {
    match &delivery.payload {
        Payload::Event(event) => Arc::clone(event),
        Payload::Work { .. } => unreachable!("the projector only consumes task-events"),
    }
}
