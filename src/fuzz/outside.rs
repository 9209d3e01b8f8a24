//! Events from outside producers, for the fuzz workload: copies, stale and
//! out-of-order events, another payload under a known id, forgeries and
//! events for tasks that do not exist, appended through the event store
//! (`append-event`) or handed straight to the projector (`deliver-event`).

use crate::task::{EventBody, Status, TaskEvent, TaskState, Text};
use crate::world::input::RequestKind;
use crate::world::stores::db::{Db, StoredEvent};

/// The draws one outside event is made from, taken whatever the world
/// holds so the workload stream never depends on it.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// Which of the eleven shapes below.
    pub shape: u64,
    /// Which task: an index into the task table, one or two past its end
    /// naming a task that does not exist (yet).
    pub task: u64,
    /// Which stored event, or how far ahead a gap reaches.
    pub field: u64,
    /// Makes the event's and signal's ids unique to this request.
    pub serial: u64,
}

/// An outside producer's free-text reason for a cancellation, by serial
/// (no draw of its own): plain words mostly, and the characters a payload
/// hash must escape or carry as they are (a quote, a backslash, a newline,
/// a tab, a control, non-ASCII).
const REASONS: [&str; 8] = [
    "outside producer",
    "customer said \"stop\"",
    "path C:\\exports\\q3",
    "line one\nline two",
    "outside producer",
    "tab\tseparated",
    "bell \u{7} and backspace \u{8}",
    "annulé par l'opérateur",
];

/// How many shapes `outside_event` draws among.
pub const SHAPES: u64 = 11;

/// The request an outside producer sends, given the database as it is now.
pub fn outside_event(draws: Draws, db: &Db) -> RequestKind {
    let index = draws.task % (db.tasks.len() as u64 + 2);
    let row = db.tasks.get(index as usize);
    let (task_id, events, version): (Text, &[StoredEvent], i64) = match row {
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
            reason: Text::from(REASONS[(draws.serial % REASONS.len() as u64) as usize]),
        },
    };
    let stored = (!events.is_empty())
        .then(|| TaskEvent::clone(&events[(draws.field % events.len() as u64) as usize].event));
    let last = events.last().map(|stored| TaskEvent::clone(&stored.event));
    // An event another task stored: its id is known, to another task.
    let elsewhere = || {
        db.tasks
            .get(((index + 1 + draws.field) % db.tasks.len().max(1) as u64) as usize)
            .filter(|other| other.state.task_id != task_id && !other.events.is_empty())
            .map(|other| {
                let at = (draws.field % other.events.len() as u64) as usize;
                other.events[at].event.event_id.clone()
            })
    };
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
        7 => deliver(last.unwrap_or_else(|| cancellation(version + 1))),
        // A stored fact restated under a new id at the next sequence: a
        // cancelling task's request to cancel when one is drawn, else any
        // stored fact. Two guards refuse it: the state table (no status
        // takes the same type, attempt and signal twice: attempts only
        // grow, and a request to cancel leaves nothing that takes another)
        // and, behind it, the store's semantic dedupe.
        8 => append(match restated_cancellation(db, draws) {
            Some(event) => event,
            None => match stored {
                Some(event) => restated(event, draws, version + 1),
                None => cancellation(version + 1),
            },
        }),
        // A fact the state table forbids, at the next sequence.
        9 => append(match row {
            Some(row) => TaskEvent {
                event_id: format!("outside-{}", draws.serial).into(),
                task_id,
                sequence: version + 1,
                body: forbidden(&row.state, draws.field),
            },
            None => cancellation(version + 1),
        }),
        // Another task's event id on this task's next fact: event ids are
        // unique across tasks, so this is another payload under a known id.
        10 => append(match elsewhere() {
            Some(event_id) => TaskEvent {
                event_id,
                ..cancellation(version + 1)
            },
            None => cancellation(version + 1),
        }),
        _ => unreachable!("a shape is drawn below SHAPES"),
    }
}

/// A leased task that is cancelling, drawn by `field`, and its request to
/// cancel restated under a new id at its next sequence: the restatement
/// nearest to being taken (the task still runs). Cancelling is a window of
/// a few steps: a task drawn from the whole table is almost never in it, a
/// task holding a lease often is. The lease index holds the tasks running
/// now, so the look costs what is in flight.
fn restated_cancellation(db: &Db, draws: Draws) -> Option<TaskEvent> {
    let leased = db.lease_index.len();
    if leased == 0 {
        return None;
    }
    let (_, task) = db
        .lease_index
        .iter()
        .nth((draws.field % leased as u64) as usize)?;
    let row = db.task(*task);
    if row.state.status != Status::Cancelling {
        return None;
    }
    let request = row
        .events
        .iter()
        .rev()
        .find(|stored| matches!(stored.event.body, EventBody::CancellationRequested { .. }))?;
    Some(restated(
        TaskEvent::clone(&request.event),
        draws,
        row.state.version + 1,
    ))
}

/// `event` restated by an outside producer: a new id, at `sequence`.
fn restated(event: TaskEvent, draws: Draws, sequence: i64) -> TaskEvent {
    TaskEvent {
        event_id: format!("outside-{}", draws.serial).into(),
        sequence,
        ..event
    }
}

/// A body lesson 003's state table refuses on a task in `state`, whatever
/// the cancel policy: a start of the wrong attempt or from the wrong
/// status, a completion or failure naming another attempt or unverified,
/// a retry naming the wrong next attempt, a cancel confirmation before a
/// cancellation or with effects not reconciled. The event goes at the
/// next sequence, so it meets exactly this state or is refused as old.
fn forbidden(state: &TaskState, pick: u64) -> EventBody {
    let attempt = state.attempt;
    let started = |attempt| EventBody::TaskStarted {
        attempt,
        worker_id: Text::from("outside"),
        lease_until_epoch_ms: 0,
    };
    let completed = |attempt, verified| EventBody::TaskCompleted {
        attempt,
        artifact_sha256: Text::from("outside"),
        artifact_verified: verified,
    };
    let retried = |attempt, next_attempt| EventBody::AttemptFailed {
        attempt,
        error_code: Text::from("OUTSIDE"),
        retryable: true,
        next_attempt,
    };
    let failed = |attempt| EventBody::TaskFailed {
        attempt,
        error_code: Text::from("OUTSIDE"),
    };
    let cancelled = |reconciled| EventBody::TaskCancelled {
        stopped_at_sequence: state.version,
        effects_reconciled: reconciled,
    };
    let mut choices = match state.status {
        Status::Queued => vec![
            started(attempt + 2),
            started(attempt),
            completed(attempt, true),
            retried(attempt, attempt + 1),
            failed(attempt),
            cancelled(true),
        ],
        Status::Running => vec![
            started(attempt + 1),
            completed(attempt + 1, true),
            completed(attempt - 1, true),
            completed(attempt, false),
            retried(attempt, attempt + 2),
            retried(attempt + 1, attempt + 2),
            failed(attempt + 1),
            cancelled(true),
        ],
        Status::Cancelling => vec![
            started(attempt + 1),
            completed(attempt + 1, true),
            completed(attempt, false),
            retried(attempt, attempt + 1),
            failed(attempt - 1),
            cancelled(false),
        ],
        Status::Completed | Status::Failed | Status::Cancelled => vec![
            started(attempt + 1),
            completed(attempt, true),
            failed(attempt),
            cancelled(true),
        ],
    };
    let at = (pick % choices.len() as u64) as usize;
    choices.swap_remove(at)
}
