//! Tests of lesson 003's pure state machine: the whole (status × event
//! type) table under both policies as one reviewed snapshot, and every
//! reject reason with the order of the checks.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use sim::task::{
    EventBody, EventType, Policy, RejectReason, Status, TaskEvent, TaskState, Text, Transition,
    transition,
};

// ---------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------

fn text(value: &str) -> Text {
    Text::from(value)
}

/// A state with every optional field set, so the table shows exactly which
/// fields each transition sets, clears or keeps.
fn table_state(status: Status) -> TaskState {
    TaskState {
        task_id: text("task-1"),
        status,
        version: 4,
        attempt: 2,
        worker_id: Some(text("worker-a")),
        lease_until_epoch_ms: Some(5000),
        cancellation_signal_id: Some(text("sig-old")),
        artifact_sha256: Some(text("art-old")),
        terminal_error_code: Some(text("E_OLD")),
    }
}

fn event_at(task_id: &str, sequence: i64, body: EventBody) -> TaskEvent {
    TaskEvent {
        event_id: text(&format!("evt-{sequence}")),
        task_id: text(task_id),
        sequence,
        body,
    }
}

/// The event of `kind` that the lesson's rules expect next for `current`:
/// sequence = version + 1, matching attempts, verified and reconciled.
fn well_formed(current: &TaskState, kind: EventType) -> TaskEvent {
    let attempt = current.attempt;
    let body = match kind {
        EventType::TaskStarted => EventBody::TaskStarted {
            attempt: attempt + 1,
            worker_id: text("worker-b"),
            lease_until_epoch_ms: 9000,
        },
        EventType::CancellationRequested => EventBody::CancellationRequested {
            signal_id: text("sig-new"),
            requester: text("user"),
            reason: text("no longer needed"),
        },
        EventType::TaskCompleted => EventBody::TaskCompleted {
            attempt,
            artifact_sha256: text("art-new"),
            artifact_verified: true,
        },
        EventType::AttemptFailed => EventBody::AttemptFailed {
            attempt,
            error_code: text("E_RETRY"),
            retryable: true,
            next_attempt: attempt + 1,
        },
        EventType::TaskFailed => EventBody::TaskFailed {
            attempt,
            error_code: text("E_FATAL"),
        },
        EventType::TaskCancelled => EventBody::TaskCancelled {
            stopped_at_sequence: current.version,
            effects_reconciled: true,
        },
    };
    event_at(&current.task_id, current.version + 1, body)
}

/// Variants of a well-formed event that break exactly one of its type's own
/// rules (plus `retryable: false`, which the lesson's code ignores).
fn variants(current: &TaskState, event: &TaskEvent) -> Vec<(&'static str, TaskEvent)> {
    let attempt = current.attempt;
    let with = |body: EventBody| TaskEvent {
        body,
        ..event.clone()
    };
    match &event.body {
        EventBody::TaskStarted {
            worker_id,
            lease_until_epoch_ms,
            ..
        } => vec![
            (
                "attempt = current",
                with(EventBody::TaskStarted {
                    attempt,
                    worker_id: worker_id.clone(),
                    lease_until_epoch_ms: *lease_until_epoch_ms,
                }),
            ),
            (
                "attempt = current + 2",
                with(EventBody::TaskStarted {
                    attempt: attempt + 2,
                    worker_id: worker_id.clone(),
                    lease_until_epoch_ms: *lease_until_epoch_ms,
                }),
            ),
        ],
        EventBody::CancellationRequested { .. } => Vec::new(),
        EventBody::TaskCompleted {
            artifact_sha256, ..
        } => vec![
            (
                "attempt = current + 1",
                with(EventBody::TaskCompleted {
                    attempt: attempt + 1,
                    artifact_sha256: artifact_sha256.clone(),
                    artifact_verified: true,
                }),
            ),
            (
                "artifactVerified = false",
                with(EventBody::TaskCompleted {
                    attempt,
                    artifact_sha256: artifact_sha256.clone(),
                    artifact_verified: false,
                }),
            ),
        ],
        EventBody::AttemptFailed { error_code, .. } => vec![
            (
                "attempt = current - 1",
                with(EventBody::AttemptFailed {
                    attempt: attempt - 1,
                    error_code: error_code.clone(),
                    retryable: true,
                    next_attempt: attempt + 1,
                }),
            ),
            (
                "nextAttempt = current",
                with(EventBody::AttemptFailed {
                    attempt,
                    error_code: error_code.clone(),
                    retryable: true,
                    next_attempt: attempt,
                }),
            ),
            (
                "retryable = false",
                with(EventBody::AttemptFailed {
                    attempt,
                    error_code: error_code.clone(),
                    retryable: false,
                    next_attempt: attempt + 1,
                }),
            ),
        ],
        EventBody::TaskFailed { error_code, .. } => vec![(
            "attempt = current + 1",
            with(EventBody::TaskFailed {
                attempt: attempt + 1,
                error_code: error_code.clone(),
            }),
        )],
        EventBody::TaskCancelled {
            stopped_at_sequence,
            ..
        } => vec![(
            "effectsReconciled = false",
            with(EventBody::TaskCancelled {
                stopped_at_sequence: *stopped_at_sequence,
                effects_reconciled: false,
            }),
        )],
    }
}

/// What must hold for every outcome, whatever the pair.
fn check_outcome(current: &TaskState, event: &TaskEvent, outcome: &Transition) {
    let Transition::Accepted { next, evidence } = outcome else {
        return;
    };
    assert_eq!(next.version, current.version + 1);
    assert_eq!(next.version, event.sequence);
    assert_eq!(next.task_id, current.task_id);
    assert!(!current.status.is_terminal());
    assert_eq!(evidence.previous_status, current.status);
    assert_eq!(evidence.next_status, next.status);
    assert_eq!(evidence.event_id, event.event_id);
    assert_eq!(
        evidence.completion_won_cancellation_race,
        current.status == Status::Cancelling && next.status == Status::Completed
    );
}

fn show(value: &Option<Text>) -> String {
    value.as_deref().map_or("null".to_string(), str::to_string)
}

fn render_outcome(outcome: &Transition) -> String {
    match outcome {
        Transition::Rejected { reason } => format!("REJECTED {}", reason.as_str()),
        Transition::Accepted { next, evidence } => format!(
            "{} v{} a{} worker={} lease={} signal={} artifact={} error={}{}",
            next.status.as_str(),
            next.version,
            next.attempt,
            show(&next.worker_id),
            next.lease_until_epoch_ms
                .map_or("null".to_string(), |lease| lease.to_string()),
            show(&next.cancellation_signal_id),
            show(&next.artifact_sha256),
            show(&next.terminal_error_code),
            if evidence.completion_won_cancellation_race {
                " RACE-WON-BY-COMPLETION"
            } else {
                ""
            },
        ),
    }
}

// ---------------------------------------------------------------------------
// 1. The whole table, one snapshot
// ---------------------------------------------------------------------------

#[test]
fn transition_table_over_every_status_and_event_type() {
    let mut table = String::new();
    writeln!(
        table,
        "Every status x event type under both policies. From state: task-1 v4 a2 \
         worker=worker-a lease=5000 signal=sig-old artifact=art-old error=E_OLD.\n\
         Well-formed event: sequence 5, attempt 3 for TaskStarted, else 2 \
         (nextAttempt 3), verified, reconciled, retryable. Variants follow each \
         pair the lesson accepts."
    )
    .unwrap();
    let mut rows = 0;
    for policy in [Policy::CompletionWins, Policy::CancelWins] {
        writeln!(table, "\n## {}", policy.as_str()).unwrap();
        for status in Status::ALL {
            for kind in EventType::ALL {
                let current = table_state(status);
                let event = well_formed(&current, kind);
                let mut cases = vec![("well-formed", event.clone())];
                if transition(&current, &event, Policy::CompletionWins).is_accepted() {
                    cases.extend(variants(&current, &event));
                }
                for (label, event) in cases {
                    let outcome = transition(&current, &event, policy);
                    check_outcome(&current, &event, &outcome);
                    writeln!(
                        table,
                        "{:<10} + {:<21} {:<25} -> {}",
                        status.as_str(),
                        kind.as_str(),
                        label,
                        render_outcome(&outcome)
                    )
                    .unwrap();
                    rows += 1;
                }
            }
        }
    }
    // 36 pairs, and 12 variants of the 9 pairs the lesson accepts, under
    // each policy.
    assert_eq!(rows, 2 * (36 + 12));
    insta::with_settings!({snapshot_path => "../snapshots", prepend_module_to_snapshot => false}, {
        insta::assert_snapshot!("transition_table", table);
    });
}

// ---------------------------------------------------------------------------
// 2. Every reject reason, and which check wins
// ---------------------------------------------------------------------------

fn running() -> TaskState {
    TaskState {
        task_id: text("task-1"),
        status: Status::Running,
        version: 3,
        attempt: 2,
        worker_id: Some(text("worker-a")),
        lease_until_epoch_ms: Some(5000),
        cancellation_signal_id: None,
        artifact_sha256: None,
        terminal_error_code: None,
    }
}

fn with_status(status: Status) -> TaskState {
    TaskState {
        status,
        ..running()
    }
}

fn started(attempt: i64) -> EventBody {
    EventBody::TaskStarted {
        attempt,
        worker_id: text("worker-b"),
        lease_until_epoch_ms: 9000,
    }
}

fn completed(attempt: i64, verified: bool) -> EventBody {
    EventBody::TaskCompleted {
        attempt,
        artifact_sha256: text("art"),
        artifact_verified: verified,
    }
}

fn attempt_failed(attempt: i64, next_attempt: i64) -> EventBody {
    EventBody::AttemptFailed {
        attempt,
        error_code: text("E_RETRY"),
        retryable: true,
        next_attempt,
    }
}

fn task_failed(attempt: i64) -> EventBody {
    EventBody::TaskFailed {
        attempt,
        error_code: text("E_FATAL"),
    }
}

fn cancelled(reconciled: bool) -> EventBody {
    EventBody::TaskCancelled {
        stopped_at_sequence: 3,
        effects_reconciled: reconciled,
    }
}

fn cancel_requested() -> EventBody {
    EventBody::CancellationRequested {
        signal_id: text("sig-1"),
        requester: text("system"),
        reason: text("operator"),
    }
}

#[test]
fn every_reject_reason_in_the_lessons_check_order() {
    use RejectReason::*;
    use Status::*;
    let cw = Policy::CompletionWins;
    let kw = Policy::CancelWins;
    // (what the case shows, state, event, policy, expected reason)
    let cases: Vec<(&str, TaskState, TaskEvent, Policy, RejectReason)> = vec![
        (
            "wrong task",
            running(),
            event_at("task-2", 4, completed(2, true)),
            cw,
            TaskIdMismatch,
        ),
        (
            "task id before a gap",
            running(),
            event_at("task-2", 9, completed(2, true)),
            cw,
            TaskIdMismatch,
        ),
        (
            "task id before an old sequence",
            running(),
            event_at("task-2", 1, completed(2, true)),
            cw,
            TaskIdMismatch,
        ),
        (
            "task id before terminal",
            with_status(Completed),
            event_at("task-2", 4, cancelled(true)),
            cw,
            TaskIdMismatch,
        ),
        (
            "duplicate sequence",
            running(),
            event_at("task-1", 3, completed(2, true)),
            cw,
            DuplicateOrOldSequence,
        ),
        (
            "old sequence",
            running(),
            event_at("task-1", 1, completed(2, true)),
            cw,
            DuplicateOrOldSequence,
        ),
        (
            "old sequence before terminal",
            with_status(Failed),
            event_at("task-1", 2, cancelled(true)),
            cw,
            DuplicateOrOldSequence,
        ),
        (
            "gap",
            running(),
            event_at("task-1", 5, completed(2, true)),
            cw,
            SequenceGap,
        ),
        (
            "gap before terminal",
            with_status(Cancelled),
            event_at("task-1", 6, cancelled(true)),
            cw,
            SequenceGap,
        ),
        (
            "completed is terminal",
            with_status(Completed),
            event_at("task-1", 4, started(3)),
            cw,
            TerminalState,
        ),
        (
            "failed is terminal",
            with_status(Failed),
            event_at("task-1", 4, task_failed(2)),
            cw,
            TerminalState,
        ),
        (
            "cancelled is terminal",
            with_status(Cancelled),
            event_at("task-1", 4, cancel_requested()),
            cw,
            TerminalState,
        ),
        (
            "terminal before illegal (lesson §5 E4)",
            with_status(Completed),
            event_at("task-1", 4, cancelled(true)),
            cw,
            TerminalState,
        ),
        (
            "started twice",
            running(),
            event_at("task-1", 4, started(3)),
            cw,
            IllegalTransition,
        ),
        (
            "illegal before attempt",
            running(),
            event_at("task-1", 4, started(7)),
            cw,
            IllegalTransition,
        ),
        (
            "complete a queued task",
            with_status(Queued),
            event_at("task-1", 4, completed(2, false)),
            cw,
            IllegalTransition,
        ),
        (
            "retry a cancelling task",
            with_status(Cancelling),
            event_at("task-1", 4, attempt_failed(9, 9)),
            cw,
            IllegalTransition,
        ),
        (
            "cancel twice",
            with_status(Cancelling),
            event_at("task-1", 4, cancel_requested()),
            cw,
            IllegalTransition,
        ),
        (
            "cancelled without a request",
            running(),
            event_at("task-1", 4, cancelled(false)),
            cw,
            IllegalTransition,
        ),
        (
            "fail a queued task",
            with_status(Queued),
            event_at("task-1", 4, task_failed(2)),
            cw,
            IllegalTransition,
        ),
        (
            "start the same attempt",
            with_status(Queued),
            event_at("task-1", 4, started(2)),
            cw,
            AttemptMismatch,
        ),
        (
            "complete another attempt",
            running(),
            event_at("task-1", 4, completed(1, true)),
            cw,
            AttemptMismatch,
        ),
        (
            "attempt before verification",
            running(),
            event_at("task-1", 4, completed(3, false)),
            cw,
            AttemptMismatch,
        ),
        (
            "attempt before next attempt",
            running(),
            event_at("task-1", 4, attempt_failed(1, 1)),
            cw,
            AttemptMismatch,
        ),
        (
            "fail another attempt",
            with_status(Cancelling),
            event_at("task-1", 4, task_failed(3)),
            cw,
            AttemptMismatch,
        ),
        (
            "attempt before cancellation pending",
            with_status(Cancelling),
            event_at("task-1", 4, completed(1, true)),
            kw,
            AttemptMismatch,
        ),
        (
            "next attempt skips one",
            running(),
            event_at("task-1", 4, attempt_failed(2, 4)),
            cw,
            InvalidNextAttempt,
        ),
        (
            "next attempt repeats",
            running(),
            event_at("task-1", 4, attempt_failed(2, 2)),
            cw,
            InvalidNextAttempt,
        ),
        (
            "unverified artifact",
            running(),
            event_at("task-1", 4, completed(2, false)),
            cw,
            ArtifactNotVerified,
        ),
        (
            "unverified while cancelling",
            with_status(Cancelling),
            event_at("task-1", 4, completed(2, false)),
            cw,
            ArtifactNotVerified,
        ),
        (
            "verification before cancellation pending",
            with_status(Cancelling),
            event_at("task-1", 4, completed(2, false)),
            kw,
            ArtifactNotVerified,
        ),
        (
            "effects not reconciled",
            with_status(Cancelling),
            event_at("task-1", 4, cancelled(false)),
            cw,
            EffectsNotReconciled,
        ),
        (
            "cancel-wins refuses the completion",
            with_status(Cancelling),
            event_at("task-1", 4, completed(2, true)),
            kw,
            CancellationPending,
        ),
    ];
    let mut seen = BTreeSet::new();
    for (what, state, event, policy, expected) in &cases {
        let outcome = transition(state, event, *policy);
        assert_eq!(
            outcome,
            Transition::Rejected { reason: *expected },
            "{what}"
        );
        seen.insert(*expected);
    }
    assert_eq!(seen, RejectReason::ALL.into_iter().collect::<BTreeSet<_>>());
}

#[test]
fn cancellation_pending_only_under_cancel_wins() {
    let current = with_status(Status::Cancelling);
    let event = event_at("task-1", 4, completed(2, true));
    match transition(&current, &event, Policy::CompletionWins) {
        Transition::Accepted { next, evidence } => {
            assert_eq!(next.status, Status::Completed);
            assert!(evidence.completion_won_cancellation_race);
        }
        other => panic!("completion-wins must accept: {other:?}"),
    }
    // No pair or variant of the table ever yields it under completion-wins.
    for status in Status::ALL {
        for kind in EventType::ALL {
            let current = table_state(status);
            let event = well_formed(&current, kind);
            let mut events = variants(&current, &event);
            events.push(("well-formed", event));
            for (_, event) in events {
                assert_ne!(
                    transition(&current, &event, Policy::CompletionWins),
                    Transition::Rejected {
                        reason: RejectReason::CancellationPending
                    }
                );
            }
        }
    }
}

#[test]
fn extreme_integers_are_decided_without_overflow() {
    let mut state = running();
    state.version = i64::MAX;
    let event = event_at("task-1", i64::MAX, completed(2, true));
    assert_eq!(
        transition(&state, &event, Policy::CompletionWins),
        Transition::Rejected {
            reason: RejectReason::DuplicateOrOldSequence
        }
    );
    let mut queued = with_status(Status::Queued);
    queued.attempt = i64::MAX;
    let event = event_at("task-1", 4, started(i64::MIN));
    assert_eq!(
        transition(&queued, &event, Policy::CompletionWins),
        Transition::Rejected {
            reason: RejectReason::AttemptMismatch
        }
    );
    let mut running_max = running();
    running_max.attempt = i64::MAX;
    let event = event_at("task-1", 4, attempt_failed(i64::MAX, i64::MIN));
    assert_eq!(
        transition(&running_max, &event, Policy::CompletionWins),
        Transition::Rejected {
            reason: RejectReason::InvalidNextAttempt
        }
    );
    let mut low = running();
    low.version = i64::MIN;
    let event = event_at("task-1", i64::MIN + 1, completed(2, true));
    assert!(transition(&low, &event, Policy::CompletionWins).is_accepted());
}
