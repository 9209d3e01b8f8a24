//! Events from outside producers, for the fuzz workload: copies, stale and
//! out-of-order events, another payload under a known id, forgeries and
//! events for tasks that do not exist, appended through the event store
//! (`append-event`) or handed straight to the projector (`deliver-event`).

use crate::task::{EventBody, TaskEvent, Text};
use crate::world::input::RequestKind;
use crate::world::stores::db::{Db, StoredEvent};

/// The draws one outside event is made from, taken whatever the world
/// holds so the workload stream never depends on it.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// Which of the eight shapes below.
    pub shape: u64,
    /// Which task: an index into the task table, one or two past its end
    /// naming a task that does not exist (yet).
    pub task: u64,
    /// Which stored event, or how far ahead a gap reaches.
    pub field: u64,
    /// Makes the event's and signal's ids unique to this request.
    pub serial: u64,
}

/// How many shapes `outside_event` draws among.
pub const SHAPES: u64 = 8;

/// The request an outside producer sends, given the database as it is now.
pub fn outside_event(draws: Draws, db: &Db) -> RequestKind {
    let index = draws.task % (db.tasks.len() as u64 + 2);
    let (task_id, events, version): (Text, &[StoredEvent], i64) = match db.tasks.get(index as usize)
    {
        Some(row) => (row.state.task_id.clone(), &row.events, row.state.version),
        None => (format!("task-{}", index + 1).into(), &[], 0),
    };
    let cancellation = |sequence: i64| TaskEvent {
        event_id: format!("outside-{}", draws.serial).into(),
        task_id: task_id.clone(),
        sequence,
        body: EventBody::CancellationRequested {
            signal_id: format!("outside-signal-{}", draws.serial).into(),
            requester: Text::from("outside"),
            reason: Text::from("outside producer"),
        },
    };
    let stored = (!events.is_empty())
        .then(|| TaskEvent::clone(&events[(draws.field % events.len() as u64) as usize].event));
    let last = events.last().map(|stored| TaskEvent::clone(&stored.event));
    let append = |event| RequestKind::AppendEvent { event };
    let deliver = |event| RequestKind::DeliverEvent { event };
    match draws.shape % SHAPES {
        // The next fact in line: a cancellation from outside the API.
        0 => append(cancellation(version + 1)),
        // A copy of a stored event: the same id (a duplicate) or a new id
        // at an old sequence (stale).
        1 => append(match stored {
            Some(event) if draws.field.is_multiple_of(2) => event,
            Some(event) => TaskEvent {
                event_id: format!("outside-{}", draws.serial).into(),
                ..event
            },
            None => cancellation(version + 1),
        }),
        // A known id with another payload.
        2 => append(stored.map_or_else(|| cancellation(version + 1), |event| event.altered())),
        // Out of order: a sequence beyond the next.
        3 => append(cancellation(version + 2 + (draws.field % 3) as i64)),
        // A copy of a stored event to the projector, in order or not.
        4 => deliver(stored.unwrap_or_else(|| cancellation(1))),
        // A known id with another payload, to the projector.
        5 => deliver(stored.map_or_else(|| cancellation(1), |event| event.altered())),
        // A forgery: the next sequence, which no producer committed.
        6 => deliver(cancellation(version + 1)),
        // The latest stored event again (a late duplicate).
        _ => deliver(last.unwrap_or_else(|| cancellation(version + 1))),
    }
}
