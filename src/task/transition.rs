//! The pure task state machine of lesson 003: statuses, events, reject
//! reasons and `transition`. No RNG, no clock, no I/O: the same inputs give
//! the same answer everywhere, so scenarios, fuzz, replay and the
//! `sim transition` tool all share this one function.

use std::sync::Arc;

/// Shared immutable text. Task ids, worker ids and hashes are created once and
/// shared by the state row, the events, snapshots and read models, so a state
/// clone costs reference-count bumps, not allocations. Counted atomically:
/// `sim check --jobs` moves worlds between threads.
pub type Text = Arc<str>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Queued,
    Running,
    Cancelling,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Queued,
        Status::Running,
        Status::Cancelling,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Cancelling => "cancelling",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        match self {
            Status::Queued | Status::Running | Status::Cancelling => false,
            Status::Completed | Status::Failed | Status::Cancelled => true,
        }
    }
}

/// The lesson's `TaskState`, field for field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskState {
    pub task_id: Text,
    pub status: Status,
    pub version: i64,
    pub attempt: i64,
    pub worker_id: Option<Text>,
    pub lease_until_epoch_ms: Option<i64>,
    pub cancellation_signal_id: Option<Text>,
    pub artifact_sha256: Option<Text>,
    pub terminal_error_code: Option<Text>,
}

pub fn initial_state(task_id: Text) -> TaskState {
    TaskState {
        task_id,
        status: Status::Queued,
        version: 0,
        attempt: 0,
        worker_id: None,
        lease_until_epoch_ms: None,
        cancellation_signal_id: None,
        artifact_sha256: None,
        terminal_error_code: None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventType {
    TaskStarted,
    CancellationRequested,
    TaskCompleted,
    AttemptFailed,
    TaskFailed,
    TaskCancelled,
}

impl EventType {
    pub const ALL: [EventType; 6] = [
        EventType::TaskStarted,
        EventType::CancellationRequested,
        EventType::TaskCompleted,
        EventType::AttemptFailed,
        EventType::TaskFailed,
        EventType::TaskCancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::TaskStarted => "TaskStarted",
            EventType::CancellationRequested => "CancellationRequested",
            EventType::TaskCompleted => "TaskCompleted",
            EventType::AttemptFailed => "AttemptFailed",
            EventType::TaskFailed => "TaskFailed",
            EventType::TaskCancelled => "TaskCancelled",
        }
    }
}

/// The lesson's `TaskEvent`: a committed fact at one sequence of one task.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskEvent {
    pub event_id: Text,
    pub task_id: Text,
    pub sequence: i64,
    pub body: EventBody,
}

impl TaskEvent {
    /// The same event id, task and sequence with one field of the body
    /// altered, as a buggy or hostile hop (or producer) would: another
    /// payload under a known id.
    pub fn altered(&self) -> TaskEvent {
        let mut altered = self.clone();
        let mark = |text: &mut Text| *text = format!("{text}~").into();
        match &mut altered.body {
            EventBody::TaskStarted {
                lease_until_epoch_ms,
                ..
            } => *lease_until_epoch_ms += 1,
            EventBody::CancellationRequested { reason, .. } => mark(reason),
            EventBody::TaskCompleted {
                artifact_sha256, ..
            } => mark(artifact_sha256),
            EventBody::AttemptFailed { error_code, .. }
            | EventBody::TaskFailed { error_code, .. } => mark(error_code),
            EventBody::TaskCancelled {
                stopped_at_sequence,
                ..
            } => *stopped_at_sequence += 1,
        }
        // A tamper that leaves the payload as it was would test nothing
        // and report a fault that never happened: a bug in sim, reported
        // with the seed like any panic.
        assert!(
            altered.body != self.body,
            "a tamper left event {} unchanged",
            self.event_id
        );
        altered
    }
}

/// The per-type fields. `artifact_verified`, `retryable` and
/// `effects_reconciled` are literal `true` in the lesson's types, but a
/// producer can still send `false`; the transition decides by the lesson's
/// rules instead of refusing to parse.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventBody {
    TaskStarted {
        attempt: i64,
        worker_id: Text,
        lease_until_epoch_ms: i64,
    },
    CancellationRequested {
        signal_id: Text,
        requester: Text,
        reason: Text,
    },
    TaskCompleted {
        attempt: i64,
        artifact_sha256: Text,
        artifact_verified: bool,
    },
    AttemptFailed {
        attempt: i64,
        error_code: Text,
        retryable: bool,
        next_attempt: i64,
    },
    TaskFailed {
        attempt: i64,
        error_code: Text,
    },
    TaskCancelled {
        stopped_at_sequence: i64,
        effects_reconciled: bool,
    },
}

impl EventBody {
    pub fn event_type(&self) -> EventType {
        match self {
            EventBody::TaskStarted { .. } => EventType::TaskStarted,
            EventBody::CancellationRequested { .. } => EventType::CancellationRequested,
            EventBody::TaskCompleted { .. } => EventType::TaskCompleted,
            EventBody::AttemptFailed { .. } => EventType::AttemptFailed,
            EventBody::TaskFailed { .. } => EventType::TaskFailed,
            EventBody::TaskCancelled { .. } => EventType::TaskCancelled,
        }
    }

    /// The attempt the event speaks for, where it names one.
    pub fn attempt(&self) -> Option<i64> {
        match self {
            EventBody::TaskStarted { attempt, .. }
            | EventBody::TaskCompleted { attempt, .. }
            | EventBody::AttemptFailed { attempt, .. }
            | EventBody::TaskFailed { attempt, .. } => Some(*attempt),
            EventBody::CancellationRequested { .. } | EventBody::TaskCancelled { .. } => None,
        }
    }
}

impl TaskEvent {
    pub fn event_type(&self) -> EventType {
        self.body.event_type()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RejectReason {
    TaskIdMismatch,
    DuplicateOrOldSequence,
    SequenceGap,
    TerminalState,
    IllegalTransition,
    AttemptMismatch,
    InvalidNextAttempt,
    ArtifactNotVerified,
    EffectsNotReconciled,
    /// Only under `Policy::CancelWins`.
    CancellationPending,
}

impl RejectReason {
    pub const ALL: [RejectReason; 10] = [
        RejectReason::TaskIdMismatch,
        RejectReason::DuplicateOrOldSequence,
        RejectReason::SequenceGap,
        RejectReason::TerminalState,
        RejectReason::IllegalTransition,
        RejectReason::AttemptMismatch,
        RejectReason::InvalidNextAttempt,
        RejectReason::ArtifactNotVerified,
        RejectReason::EffectsNotReconciled,
        RejectReason::CancellationPending,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::TaskIdMismatch => "TASK_ID_MISMATCH",
            RejectReason::DuplicateOrOldSequence => "DUPLICATE_OR_OLD_SEQUENCE",
            RejectReason::SequenceGap => "SEQUENCE_GAP",
            RejectReason::TerminalState => "TERMINAL_STATE",
            RejectReason::IllegalTransition => "ILLEGAL_TRANSITION",
            RejectReason::AttemptMismatch => "ATTEMPT_MISMATCH",
            RejectReason::InvalidNextAttempt => "INVALID_NEXT_ATTEMPT",
            RejectReason::ArtifactNotVerified => "ARTIFACT_NOT_VERIFIED",
            RejectReason::EffectsNotReconciled => "EFFECTS_NOT_RECONCILED",
            RejectReason::CancellationPending => "CANCELLATION_PENDING",
        }
    }
}

/// Who wins when a verified completion meets a pending cancellation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Policy {
    /// The lesson's choice: a verified completion of the current attempt is
    /// accepted and the evidence records that it won the race.
    #[default]
    CompletionWins,
    /// The completion is refused with `CANCELLATION_PENDING`; the artifact is
    /// compensated and the task ends `cancelled`.
    CancelWins,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::CompletionWins => "completion-wins",
            Policy::CancelWins => "cancel-wins",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Evidence {
    pub previous_status: Status,
    pub next_status: Status,
    pub event_id: Text,
    pub completion_won_cancellation_race: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Transition {
    Accepted {
        next: TaskState,
        evidence: Evidence,
    },
    /// The state is unchanged; the caller still holds it as `current`.
    Rejected {
        reason: RejectReason,
    },
}

impl Transition {
    pub fn is_accepted(&self) -> bool {
        matches!(self, Transition::Accepted { .. })
    }
}

/// The state machine. Checks run in the lesson's order: task id, old or
/// duplicate sequence, gap, terminal status, then the rules of the event.
pub fn transition(current: &TaskState, event: &TaskEvent, policy: Policy) -> Transition {
    use RejectReason::*;
    let reject = |reason| Transition::Rejected { reason };
    if event.task_id != current.task_id {
        return reject(TaskIdMismatch);
    }
    if event.sequence <= current.version {
        return reject(DuplicateOrOldSequence);
    }
    // `checked_add` keeps an `i64::MAX` version from panicking; no sequence
    // can follow it, so the event is a gap.
    if Some(event.sequence) != current.version.checked_add(1) {
        return reject(SequenceGap);
    }
    if current.status.is_terminal() {
        return reject(TerminalState);
    }

    let mut next = current.clone();
    next.version = event.sequence;
    let mut completion_won_cancellation_race = false;
    match &event.body {
        EventBody::TaskStarted {
            attempt,
            worker_id,
            lease_until_epoch_ms,
        } => {
            if current.status != Status::Queued {
                return reject(IllegalTransition);
            }
            if Some(*attempt) != current.attempt.checked_add(1) {
                return reject(AttemptMismatch);
            }
            next.status = Status::Running;
            next.attempt = *attempt;
            next.worker_id = Some(worker_id.clone());
            next.lease_until_epoch_ms = Some(*lease_until_epoch_ms);
            next.cancellation_signal_id = None;
        }
        EventBody::CancellationRequested { signal_id, .. } => match current.status {
            Status::Queued => {
                next.status = Status::Cancelled;
                next.cancellation_signal_id = Some(signal_id.clone());
                next.worker_id = None;
                next.lease_until_epoch_ms = None;
            }
            Status::Running => {
                next.status = Status::Cancelling;
                next.cancellation_signal_id = Some(signal_id.clone());
            }
            Status::Cancelling | Status::Completed | Status::Failed | Status::Cancelled => {
                return reject(IllegalTransition);
            }
        },
        EventBody::TaskCompleted {
            attempt,
            artifact_sha256,
            artifact_verified,
        } => {
            if current.status != Status::Running && current.status != Status::Cancelling {
                return reject(IllegalTransition);
            }
            if *attempt != current.attempt {
                return reject(AttemptMismatch);
            }
            if !artifact_verified {
                return reject(ArtifactNotVerified);
            }
            if current.status == Status::Cancelling && policy == Policy::CancelWins {
                return reject(CancellationPending);
            }
            completion_won_cancellation_race = current.status == Status::Cancelling;
            next.status = Status::Completed;
            next.artifact_sha256 = Some(artifact_sha256.clone());
            next.worker_id = None;
            next.lease_until_epoch_ms = None;
        }
        // The lesson's code does not look at `retryable`; DESIGN §9 keeps that.
        EventBody::AttemptFailed {
            attempt,
            next_attempt,
            ..
        } => {
            if current.status != Status::Running {
                return reject(IllegalTransition);
            }
            if *attempt != current.attempt {
                return reject(AttemptMismatch);
            }
            if Some(*next_attempt) != current.attempt.checked_add(1) {
                return reject(InvalidNextAttempt);
            }
            next.status = Status::Queued;
            next.worker_id = None;
            next.lease_until_epoch_ms = None;
            next.terminal_error_code = None;
        }
        // The lesson's code accepts `TaskFailed` on a cancelling task too.
        EventBody::TaskFailed {
            attempt,
            error_code,
        } => {
            if current.status != Status::Running && current.status != Status::Cancelling {
                return reject(IllegalTransition);
            }
            if *attempt != current.attempt {
                return reject(AttemptMismatch);
            }
            next.status = Status::Failed;
            next.worker_id = None;
            next.lease_until_epoch_ms = None;
            next.terminal_error_code = Some(error_code.clone());
        }
        EventBody::TaskCancelled {
            effects_reconciled, ..
        } => {
            if current.status != Status::Cancelling {
                return reject(IllegalTransition);
            }
            if !effects_reconciled {
                return reject(EffectsNotReconciled);
            }
            next.status = Status::Cancelled;
            next.worker_id = None;
            next.lease_until_epoch_ms = None;
        }
    }
    Transition::Accepted {
        evidence: Evidence {
            previous_status: current.status,
            next_status: next.status,
            event_id: event.event_id.clone(),
            completion_won_cancellation_race,
        },
        next,
    }
}
