//! Tests of lesson 003's state machine and the tools around it: the whole
//! (status × event type) table as one reviewed snapshot, every reject reason
//! and the order of the checks, the JSON shapes (fast writers against the
//! `Value` route, the text reader against the `Value` reader), replay, and
//! `sim transition` / `sim replay-events` end to end through the binary.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use sim::hash::{hex, sha256};
use sim::lesson_json::{
    Reading, TransitionInput, event_from_json, event_to_json, parse_event_line,
    parse_transition_line, result_to_json, state_from_json, state_to_json,
};
use sim::task::json::{event_payload_sha256, state_sha256, write_event, write_result, write_state};
use sim::task::replay::{InvalidHistory, ReplayFailure, fold, replay};
use sim::task::{
    EventBody, EventType, Policy, RejectReason, Status, TaskEvent, TaskState, Text, Transition,
    initial_state, transition,
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

// ---------------------------------------------------------------------------
// 5. JSON: fast writers against the `Value` route, readers against each other
// ---------------------------------------------------------------------------

/// `well_formed`, unless adding one to the version or attempt would overflow.
fn well_formed_checked(state: &TaskState, kind: EventType) -> Option<TaskEvent> {
    (state.version < i64::MAX && state.attempt < i64::MAX).then(|| well_formed(state, kind))
}

/// splitmix64: a tiny deterministic generator, so the inputs are the same on
/// every run and every machine.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn int(&mut self) -> i64 {
        match self.below(6) {
            0 => self.below(12) as i64,
            1 => -(self.below(12) as i64),
            2 => [i64::MIN, i64::MAX, i64::MIN + 1, i64::MAX - 1][self.below(4)],
            3 => self.next() as i64,
            4 => (self.next() >> 11) as i64,
            _ => 9_007_199_254_740_991 - self.below(3) as i64,
        }
    }

    fn text(&mut self) -> Text {
        const PIECES: &[&str] = &[
            "",
            "task-1",
            "worker",
            "\"",
            "\\",
            "\u{0}",
            "\u{1f}",
            "\u{7f}",
            "\n\r\t\u{8}\u{c}",
            "é",
            "中文",
            "😀",
            "\u{2028}",
            "/",
            "\u{b}",
            " ",
            "sig-9",
        ];
        let mut out = String::new();
        for _ in 0..self.below(4) {
            out.push_str(PIECES[self.below(PIECES.len())]);
        }
        if self.chance(5) {
            // Longer than the hash sink's buffer, with escapes and without.
            let long = if self.chance(50) { "ab\"c" } else { "abcd" };
            out.push_str(&long.repeat(80));
        }
        Text::from(out)
    }

    fn option_text(&mut self) -> Option<Text> {
        if self.chance(40) {
            None
        } else {
            Some(self.text())
        }
    }

    fn state(&mut self) -> TaskState {
        TaskState {
            task_id: self.text(),
            status: Status::ALL[self.below(6)],
            version: self.int(),
            attempt: self.int(),
            worker_id: self.option_text(),
            lease_until_epoch_ms: if self.chance(40) {
                None
            } else {
                Some(self.int())
            },
            cancellation_signal_id: self.option_text(),
            artifact_sha256: self.option_text(),
            terminal_error_code: self.option_text(),
        }
    }

    fn event(&mut self) -> TaskEvent {
        let body = match EventType::ALL[self.below(6)] {
            EventType::TaskStarted => EventBody::TaskStarted {
                attempt: self.int(),
                worker_id: self.text(),
                lease_until_epoch_ms: self.int(),
            },
            EventType::CancellationRequested => EventBody::CancellationRequested {
                signal_id: self.text(),
                requester: self.text(),
                reason: self.text(),
            },
            EventType::TaskCompleted => EventBody::TaskCompleted {
                attempt: self.int(),
                artifact_sha256: self.text(),
                artifact_verified: self.chance(50),
            },
            EventType::AttemptFailed => EventBody::AttemptFailed {
                attempt: self.int(),
                error_code: self.text(),
                retryable: self.chance(50),
                next_attempt: self.int(),
            },
            EventType::TaskFailed => EventBody::TaskFailed {
                attempt: self.int(),
                error_code: self.text(),
            },
            EventType::TaskCancelled => EventBody::TaskCancelled {
                stopped_at_sequence: self.int(),
                effects_reconciled: self.chance(50),
            },
        };
        TaskEvent {
            event_id: self.text(),
            task_id: self.text(),
            sequence: self.int(),
            body,
        }
    }

    /// A state and an event that relate, so that accepted results come up.
    fn related_pair(&mut self) -> (TaskState, TaskEvent) {
        let state = self.state();
        if self.chance(30) {
            return (state, self.event());
        }
        let kind = EventType::ALL[self.below(6)];
        let event = well_formed_checked(&state, kind).unwrap_or_else(|| self.event());
        (state, event)
    }
}

#[test]
fn fast_writers_equal_the_value_route_byte_for_byte() {
    let mut generator = Gen(3);
    let mut accepted = 0;
    for _ in 0..20_000 {
        let state = generator.state();
        let event = if generator.chance(50) {
            generator.event()
        } else {
            well_formed_checked(&state, EventType::ALL[generator.below(6)])
                .unwrap_or_else(|| generator.event())
        };
        let policy = if generator.chance(50) {
            Policy::CompletionWins
        } else {
            Policy::CancelWins
        };

        let mut fast = String::new();
        write_state(&mut fast, &state);
        let slow = serde_json::to_string(&state_to_json(&state)).unwrap();
        assert_eq!(fast, slow);
        assert_eq!(state_sha256(&state), sha256(slow.as_bytes()));

        let mut fast = String::new();
        write_event(&mut fast, &event);
        let slow = serde_json::to_string(&event_to_json(&event)).unwrap();
        assert_eq!(fast, slow);
        assert_eq!(event_payload_sha256(&event), sha256(slow.as_bytes()));

        let outcome = transition(&state, &event, policy);
        accepted += usize::from(outcome.is_accepted());
        // Appending to a non-empty buffer is what the tool does.
        let mut fast = String::from("x");
        write_result(&mut fast, &state, &outcome);
        let slow = serde_json::to_string(&result_to_json(&state, &outcome)).unwrap();
        assert_eq!(&fast[1..], slow);

        // And what is written reads back as the same value.
        assert_eq!(
            state_from_json(&state_to_json(&state), Reading::Lenient),
            Ok(state.clone())
        );
        assert_eq!(
            event_from_json(&event_to_json(&event), Reading::Lenient),
            Ok(event.clone())
        );
        let mut line = String::new();
        write_event(&mut line, &event);
        assert_eq!(parse_event_line(&line, Reading::Lenient), Ok(event.clone()));
    }
    assert!(
        accepted > 1000,
        "only {accepted} accepted results were compared"
    );
}

#[test]
fn payload_hash_is_the_lessons_canonical_event_hash() {
    // Expected digests computed with Node from lesson 003's own
    // `canonicalEventHash` (JSON.stringify of the event with sorted keys).
    let lesson = |line: &str| parse_event_line(line, Reading::Lenient).unwrap();
    let cases = [
        (
            r#"{"eventId":"evt-1","taskId":"task-42","sequence":1,"type":"TaskStarted","attempt":1,"workerId":"worker-a","leaseUntilEpochMs":1000}"#,
            "ee30eca11c56ea21f940ddd548c688465cbcdfbd0047f16f2fff978b78e44f7d",
        ),
        (
            r#"{"eventId":"evt-2","taskId":"task-42","sequence":2,"type":"CancellationRequested","signalId":"sig-9","requester":"user","reason":"no longer needed"}"#,
            "14f0c99c7864cf1fb277c582fd7945c817d5a50f8d4ce41ad27d391179f4ac96",
        ),
        (
            r#"{"eventId":"evt-3","taskId":"task-42","sequence":3,"type":"TaskCompleted","attempt":1,"artifactSha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","artifactVerified":true}"#,
            "3985533e3348edc9d0cbcbb1af733b2f0935a31da90eb8d5d9e2688161134826",
        ),
        (
            r#"{"eventId":"evt-4","taskId":"task-42","sequence":4,"type":"TaskCancelled","stoppedAtSequence":3,"effectsReconciled":true}"#,
            "3db77fe098297bbe3d2527302b63d211ef2b5286bbd32d0ad8335ac34ba1c2b9",
        ),
        (
            "{\"eventId\":\"e\\\"5\\n\",\"taskId\":\"t\\u0001\",\"sequence\":-5,\"type\":\"AttemptFailed\",\"attempt\":9007199254740991,\"errorCode\":\"中文😀\u{7f}\",\"retryable\":false,\"nextAttempt\":-9007199254740991}",
            "558cb32b700512be4abf730306ca22a74e5d50d64f07fbc5a619babd2dd24ac2",
        ),
    ];
    for (line, expected) in cases {
        assert_eq!(
            hex(&event_payload_sha256(&lesson(line))),
            expected,
            "{line}"
        );
    }
}

/// The `Value` route for a whole line, as a caller holding a `Value` would
/// write it; the text route must agree with it on every input.
fn value_route(line: &str) -> Result<TransitionInput, String> {
    let value: Value = serde_json::from_str(line).map_err(|error| error.to_string())?;
    let Value::Object(map) = &value else {
        return Err("not an object".to_string());
    };
    let state = state_from_json(map.get("state").ok_or("state missing")?, Reading::Lenient)?;
    let event = event_from_json(map.get("event").ok_or("event missing")?, Reading::Lenient)?;
    let policy = match map.get("policy") {
        None => Policy::CompletionWins,
        Some(Value::String(name)) => Policy::parse(name).ok_or("bad policy")?,
        Some(_) => return Err("bad policy".to_string()),
    };
    Ok(TransitionInput {
        state,
        event,
        policy,
    })
}

fn line_value(state: &TaskState, event: &TaskEvent) -> Value {
    json!({ "state": state_to_json(state), "event": event_to_json(event) })
}

/// A value of another JSON type than the field's, or a number that is not
/// an i64.
fn odd_value(generator: &mut Gen) -> Value {
    let odd: [Value; 12] = [
        Value::Null,
        json!(true),
        json!(false),
        json!("7"),
        json!(7),
        json!(-7),
        json!(1.5),
        json!(3.0),
        json!(u64::MAX),
        json!([1, [2]]),
        json!({"a": {"b": null}}),
        json!("queued"),
    ];
    odd[generator.below(odd.len())].clone()
}

#[test]
fn text_reader_agrees_with_the_value_reader() {
    let mut generator = Gen(11);
    let mut errors = BTreeSet::new();
    for round in 0..20_000 {
        let (state, event) = generator.related_pair();
        let mut value = line_value(&state, &event);
        // Damage the line in one of several ways, or not at all.
        match round % 6 {
            0 => {}
            1 | 2 => {
                let part = if generator.chance(50) {
                    "state"
                } else {
                    "event"
                };
                let object = value[part].as_object_mut().unwrap();
                let keys: Vec<String> = object.keys().cloned().collect();
                let key = &keys[generator.below(keys.len())];
                if generator.chance(30) {
                    object.remove(key);
                } else {
                    object.insert(key.clone(), odd_value(&mut generator));
                }
            }
            3 => {
                let part = ["state", "event", "policy", "other"][generator.below(4)];
                value[part] = odd_value(&mut generator);
            }
            4 => {
                value["policy"] =
                    json!(["completion-wins", "cancel-wins", "x"][generator.below(3)]);
                value["event"]["extra"] = odd_value(&mut generator);
            }
            _ => {
                let name = ["type", "status"][generator.below(2)];
                let part = if name == "type" { "event" } else { "state" };
                value[part][name] =
                    json!(["TaskPaused", "paused", "queued", "TaskStarted"][generator.below(4)]);
            }
        }
        let line = value.to_string();
        let fast = parse_transition_line(&line, Reading::Lenient);
        let slow = value_route(&line);
        match (&fast, &slow) {
            (Ok(fast), Ok(slow)) => assert_eq!(fast, slow, "{line}"),
            (Err(fast), Err(slow)) => {
                // Field-level messages are shared; the top-level wording differs.
                if fast.starts_with("state.") || fast.starts_with("event.") {
                    assert_eq!(fast, slow, "{line}");
                }
                errors.insert(fast.split(':').next().unwrap_or_default().to_string());
            }
            _ => panic!("routes disagree on {line}: {fast:?} vs {slow:?}"),
        }
        // Cutting the line anywhere leaves text that both parsers refuse,
        // unless what is left is still one whole value.
        let cut = generator.below(line.len());
        if line.is_char_boundary(cut) {
            let head = &line[..cut];
            assert_eq!(
                parse_transition_line(head, Reading::Lenient).is_ok(),
                value_route(head).is_ok(),
                "{head}"
            );
        }
    }
    assert!(errors.len() > 20, "too few kinds of error: {errors:?}");
}

#[test]
fn text_reader_accepts_exactly_the_json_serde_json_accepts() {
    let good = parse_transition_line(
        &line_value(&running(), &event_at("task-1", 4, completed(2, true))).to_string(),
        Reading::Lenient,
    );
    assert!(good.is_ok());
    let base = line_value(&running(), &event_at("task-1", 4, completed(2, true))).to_string();
    let inner = &base[1..base.len() - 1];
    let deep = |n: usize| format!("{{\"x\":{}{}, {inner}}}", "[".repeat(n), "]".repeat(n));
    let samples = [
        deep(126),
        deep(127),
        format!(" \t\r\n{base} \r\n"),
        format!("{{\"x\":\"\\ud83d\\ude00 \\u00e9 \\/\", {inner}}}"),
        format!("{{\"x\":\"\\ud83d\", {inner}}}"),
        format!("{{\"x\":\"\\ude00\", {inner}}}"),
        format!("{{\"x\":\"\\u00g0\", {inner}}}"),
        format!("{{\"x\":\"\\x\", {inner}}}"),
        format!("{{\"x\":\"a\tb\", {inner}}}"),
        format!("{{\"x\":01, {inner}}}"),
        format!("{{\"x\":1., {inner}}}"),
        format!("{{\"x\":.5, {inner}}}"),
        format!("{{\"x\":1e, {inner}}}"),
        format!("{{\"x\":-, {inner}}}"),
        format!("{{\"x\":+1, {inner}}}"),
        format!("{{\"x\":-0.0e-0, {inner}}}"),
        format!("{{\"x\":[1,], {inner}}}"),
        format!("{{\"x\":{{\"a\":1,}}, {inner}}}"),
        format!("{{\"x\":tru, {inner}}}"),
        format!("{{\"x\":nulll, {inner}}}"),
        format!("{{\"x\":NaN, {inner}}}"),
        format!("{{{inner},}}"),
        format!("{{{inner}}} x"),
        format!("{{{inner}}}{{}}"),
        format!("{{{inner}"),
        format!("{{'x':1, {inner}}}"),
        format!("{{\"x\" 1, {inner}}}"),
        format!("{{\"x\":1 \"y\":2, {inner}}}"),
        format!("{{\"x\":[1 2], {inner}}}"),
        format!("{{\"x\":\"unterminated, {inner}}}"),
        format!("{{\"x\":\"\u{a0}\", {inner}}}"),
        format!("\u{a0}{base}"),
        "{\"x\":1}".to_string(),
        "".to_string(),
        "[]".to_string(),
    ];
    for sample in &samples {
        assert_eq!(
            parse_transition_line(sample, Reading::Lenient).is_ok()
                || parse_transition_line(sample, Reading::Lenient)
                    .is_err_and(|e| !e.starts_with("invalid JSON")),
            serde_json::from_str::<Value>(sample).is_ok(),
            "{sample}"
        );
    }
    // serde_json takes 127 nested containers: the line's object and 126 arrays.
    assert!(parse_transition_line(&deep(126), Reading::Lenient).is_ok());
    assert!(serde_json::from_str::<Value>(&deep(126)).is_ok());
    assert!(
        parse_transition_line(&deep(127), Reading::Lenient)
            .is_err_and(|error| error.starts_with("invalid JSON")
                && error.contains("recursion limit exceeded"))
    );
    assert!(serde_json::from_str::<Value>(&deep(127)).is_err());
}

#[test]
fn numbers_are_integers_by_value_and_exact() {
    let line = |version: &str| {
        let state = r#""taskId":"t","status":"queued","attempt":0,"workerId":null,"leaseUntilEpochMs":null,"cancellationSignalId":null,"artifactSha256":null,"terminalErrorCode":null"#;
        let event = r#""eventId":"e","taskId":"t","sequence":1,"type":"TaskCancelled","stoppedAtSequence":0,"effectsReconciled":true"#;
        parse_transition_line(
            &format!("{{\"state\":{{{state},\"version\":{version}}},\"event\":{{{event}}}}}"),
            Reading::Lenient,
        )
        .map(|input| input.state.version)
    };
    assert_eq!(line("3"), Ok(3));
    assert_eq!(line("3.0"), Ok(3));
    assert_eq!(line("30e-1"), Ok(3));
    assert_eq!(line("0.3e1"), Ok(3));
    assert_eq!(line("-0"), Ok(0));
    assert_eq!(line("-0.0"), Ok(0));
    assert_eq!(line("1E3"), Ok(1000));
    assert_eq!(line("9223372036854775807"), Ok(i64::MAX));
    assert_eq!(line("-9223372036854775808"), Ok(i64::MIN));
    // Without serde_json's `float_roundtrip`, this reads as 1037508080942616.1.
    assert_eq!(line("1037508080942616.000"), Ok(1_037_508_080_942_616));
    assert_eq!(line("907281768288800e-1"), Ok(90_728_176_828_880));
    assert_eq!(
        line("1.5"),
        Err("state.version: expected an integer, got non-integral number 1.5".to_string())
    );
    assert_eq!(
        line("9223372036854775808"),
        Err("state.version: expected an integer, got 9223372036854775808, outside the 64-bit integer range".to_string())
    );
    assert_eq!(
        line("-9223372036854775809"),
        // Read as the float it rounds to: its digits are not kept.
        Err("state.version: expected an integer, got -9.223372036854776e18, outside the 64-bit integer range".to_string())
    );
    assert_eq!(
        line("1e19"),
        Err(
            "state.version: expected an integer, got 1e19, outside the 64-bit integer range"
                .to_string()
        )
    );
    // serde_json refuses a number no f64 holds, as a syntax error.
    assert!(line("1e400").is_err_and(|error| error.contains("number out of range")));
    assert_eq!(
        line("\"3\""),
        Err("state.version: expected an integer, got string".to_string())
    );
    assert_eq!(
        line("null"),
        Err("state.version: expected an integer, got null".to_string())
    );
}

#[test]
fn booleans_false_parse_and_are_decided_by_the_rules() {
    let event = parse_event_line(
        r#"{"eventId":"e","taskId":"task-1","sequence":4,"type":"TaskCompleted","attempt":2,"artifactSha256":"h","artifactVerified":false}"#,
    Reading::Lenient,)
    .unwrap();
    assert_eq!(
        transition(&running(), &event, Policy::CompletionWins),
        Transition::Rejected {
            reason: RejectReason::ArtifactNotVerified
        }
    );
    let event = parse_event_line(
        r#"{"eventId":"e","taskId":"task-1","sequence":4,"type":"AttemptFailed","attempt":2,"errorCode":"E","retryable":false,"nextAttempt":3}"#,
    Reading::Lenient,)
    .unwrap();
    // The lesson's code does not look at `retryable` (DESIGN §9).
    assert!(transition(&running(), &event, Policy::CompletionWins).is_accepted());
    let event = parse_event_line(
        r#"{"eventId":"e","taskId":"task-1","sequence":4,"type":"CancellationRequested","signalId":"s","requester":"robot","reason":""}"#,
    Reading::Lenient,)
    .unwrap();
    assert!(matches!(
        event.body,
        EventBody::CancellationRequested { ref requester, .. } if &**requester == "robot"
    ));
}

#[test]
fn fields_are_checked_in_order_with_named_messages() {
    let state = state_to_json(&running());
    let event = event_to_json(&event_at("task-1", 4, started(3)));
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut both = |edit: &dyn Fn(&mut Value, &mut Value), message: &'static str| {
        let (mut state, mut event) = (state.clone(), event.clone());
        edit(&mut state, &mut event);
        cases.push((json!({"state": state, "event": event}), message));
    };
    both(
        &|s, _| drop(s.as_object_mut().unwrap().remove("workerId")),
        "state.workerId: missing, expected a string or null",
    );
    both(
        &|s, _| s["taskId"] = json!(1),
        "state.taskId: expected a string, got number",
    );
    both(
        &|s, _| s["leaseUntilEpochMs"] = json!("soon"),
        "state.leaseUntilEpochMs: expected an integer or null, got string",
    );
    both(
        &|s, _| s["status"] = json!("paused"),
        "state.status: expected one of queued, running, cancelling, completed, failed, cancelled, got \"paused\"",
    );
    both(
        &|s, _| s["status"] = json!(null),
        "state.status: expected a string, got null",
    );
    both(
        &|s, _| s["terminalErrorCode"] = json!(false),
        "state.terminalErrorCode: expected a string or null, got boolean",
    );
    // The state's first problem wins over the event's, and earlier fields over later.
    both(
        &|s, e| {
            s["attempt"] = json!([]);
            e["type"] = json!("x");
        },
        "state.attempt: expected an integer, got array",
    );
    both(
        &|s, _| {
            s["version"] = json!({});
            s["attempt"] = json!([]);
        },
        "state.version: expected an integer, got object",
    );
    both(
        &|_, e| e["type"] = json!("TaskPaused"),
        "event.type: expected one of TaskStarted, CancellationRequested, TaskCompleted, AttemptFailed, TaskFailed, TaskCancelled, got \"TaskPaused\"",
    );
    both(
        &|_, e| e["attempt"] = json!("1"),
        "event.attempt: expected an integer, got string",
    );
    both(
        &|_, e| drop(e.as_object_mut().unwrap().remove("leaseUntilEpochMs")),
        "event.leaseUntilEpochMs: missing, expected an integer",
    );
    both(
        &|_, e| e["workerId"] = json!(null),
        "event.workerId: expected a string, got null",
    );
    both(
        &|_, e| {
            e["sequence"] = json!(true);
            e["attempt"] = json!("1");
        },
        "event.sequence: expected an integer, got boolean",
    );
    both(
        &|_, e| drop(e.as_object_mut().unwrap().remove("eventId")),
        "event.eventId: missing, expected a string",
    );
    both(
        &|_, e| {
            e["type"] = json!("TaskCompleted");
        },
        "event.artifactSha256: missing, expected a string",
    );
    both(
        &|_, e| {
            e["type"] = json!("TaskCancelled");
            e["stoppedAtSequence"] = json!(1);
            e["effectsReconciled"] = json!("yes");
        },
        "event.effectsReconciled: expected a boolean, got string",
    );
    both(
        &|_, e| {
            e["type"] = json!("AttemptFailed");
            e["errorCode"] = json!("E");
            e["retryable"] = json!(1);
        },
        "event.retryable: expected a boolean, got number",
    );
    // Another type's fields, of any type, are ignored.
    both(
        &|_, e| {
            e["retryable"] = json!("no");
            e["nextAttempt"] = json!(1.5);
        },
        "",
    );
    for (line, message) in cases {
        let line = line.to_string();
        let fast = parse_transition_line(&line, Reading::Lenient).map(drop);
        if message.is_empty() {
            assert_eq!(fast, Ok(()), "{line}");
        } else {
            assert_eq!(fast, Err(message.to_string()), "{line}");
        }
        assert_eq!(value_route(&line).map(drop), fast, "{line}");
    }
    let bad_policy = json!({"state": state, "event": event, "policy": "first-wins"}).to_string();
    assert_eq!(
        parse_transition_line(&bad_policy, Reading::Lenient).map(drop),
        Err(
            "policy: expected \"completion-wins\" or \"cancel-wins\", got \"first-wins\""
                .to_string()
        )
    );
    let null_policy = json!({"state": state, "event": event, "policy": null}).to_string();
    assert_eq!(
        parse_transition_line(&null_policy, Reading::Lenient).map(drop),
        Err("policy: expected \"completion-wins\" or \"cancel-wins\", got null".to_string())
    );
    let cancel_wins = json!({"state": state, "event": event, "policy": "cancel-wins"}).to_string();
    assert_eq!(
        parse_transition_line(&cancel_wins, Reading::Lenient).map(|input| input.policy),
        Ok(Policy::CancelWins)
    );
    // A repeated key keeps its last value, as JSON.parse does.
    let repeated = format!(
        "{{\"state\":1,\"policy\":\"x\",\"event\":{event},\"state\":{state},\"policy\":\"cancel-wins\"}}"
    );
    assert_eq!(
        parse_transition_line(&repeated, Reading::Lenient).map(|input| input.policy),
        Ok(Policy::CancelWins)
    );
    assert_eq!(
        state_from_json(&json!([]), Reading::Lenient),
        Err("state: expected an object, got array".to_string())
    );
    assert_eq!(
        event_from_json(&json!("e"), Reading::Lenient),
        Err("event: expected an object, got string".to_string())
    );
}

// ---------------------------------------------------------------------------
// Replay (library)
// ---------------------------------------------------------------------------

/// Lesson 003 §5: started, cancellation requested, completed (winning the
/// race), then a late TaskCancelled.
fn lesson_history() -> Vec<TaskEvent> {
    let at = |sequence, body| TaskEvent {
        event_id: text(&format!("evt-{sequence}")),
        task_id: text("task-42"),
        sequence,
        body,
    };
    vec![
        at(1, started(1)),
        at(
            2,
            EventBody::CancellationRequested {
                signal_id: text("sig-9"),
                requester: text("user"),
                reason: text("no longer needed"),
            },
        ),
        at(3, completed(1, true)),
        at(
            4,
            EventBody::TaskCancelled {
                stopped_at_sequence: 3,
                effects_reconciled: true,
            },
        ),
    ]
}

#[test]
fn replay_folds_in_sequence_order_and_stops_at_the_first_reject() {
    let history = lesson_history();
    let state = replay(text("task-42"), &history[..3], Policy::CompletionWins).unwrap();
    assert_eq!(state.status, Status::Completed);
    assert_eq!(state.version, 3);
    assert_eq!(state.attempt, 1);
    assert_eq!(state.cancellation_signal_id.as_deref(), Some("sig-9"));

    // Given out of order, the same result.
    let shuffled = vec![history[2].clone(), history[0].clone(), history[1].clone()];
    assert_eq!(
        replay(text("task-42"), &shuffled, Policy::CompletionWins),
        Ok(state.clone())
    );

    let invalid = replay(text("task-42"), &history, Policy::CompletionWins).unwrap_err();
    assert_eq!(
        invalid,
        InvalidHistory {
            event_id: text("evt-4"),
            sequence: 4,
            reason: ReplayFailure::Rejected(RejectReason::TerminalState),
            state_before: state.clone(),
        }
    );
    assert_eq!(invalid.reason.as_str(), "TERMINAL_STATE");

    // Under cancel-wins the same history stops at the completion.
    let invalid = replay(text("task-42"), &history, Policy::CancelWins).unwrap_err();
    assert_eq!(invalid.event_id, text("evt-3"));
    assert_eq!(invalid.reason.as_str(), "CANCELLATION_PENDING");
    assert_eq!(invalid.state_before.status, Status::Cancelling);

    // A gap is not skipped.
    let gapped = vec![history[0].clone(), history[2].clone()];
    let invalid = replay(text("task-42"), &gapped, Policy::CompletionWins).unwrap_err();
    assert_eq!(
        invalid.reason,
        ReplayFailure::Rejected(RejectReason::SequenceGap)
    );
    assert_eq!(invalid.state_before.version, 1);
}

#[test]
fn replay_skips_a_repeated_event_and_stops_at_a_conflicting_one() {
    let history = lesson_history();
    let clean = replay(text("task-42"), &history[..3], Policy::CompletionWins).unwrap();

    let mut repeated = history[..3].to_vec();
    repeated.insert(1, history[0].clone());
    repeated.push(history[1].clone());
    assert_eq!(
        replay(text("task-42"), &repeated, Policy::CompletionWins),
        Ok(clean)
    );

    // Same id, another payload: the lesson skips it, we stop.
    let mut conflicting = history[..3].to_vec();
    let mut changed = history[0].clone();
    changed.body = EventBody::TaskStarted {
        attempt: 1,
        worker_id: text("worker-z"),
        lease_until_epoch_ms: 1000,
    };
    conflicting.push(changed);
    let invalid = replay(text("task-42"), &conflicting, Policy::CompletionWins).unwrap_err();
    assert_eq!(invalid.reason, ReplayFailure::EventIdPayloadConflict);
    assert_eq!(invalid.reason.as_str(), "EVENT_ID_PAYLOAD_CONFLICT");
    assert_eq!(invalid.event_id, text("evt-1"));
    // Both evt-1s sort to sequence 1; the second one is the conflict, met
    // right after the first was applied.
    assert_eq!(invalid.state_before.version, 1);

    // A new id at a used sequence is a history conflict, not a duplicate.
    let mut reused = history[..2].to_vec();
    let mut other = history[1].clone();
    other.event_id = text("evt-other");
    reused.push(other);
    let invalid = replay(text("task-42"), &reused, Policy::CompletionWins).unwrap_err();
    assert_eq!(
        invalid.reason,
        ReplayFailure::Rejected(RejectReason::DuplicateOrOldSequence)
    );
}

#[test]
fn fold_continues_from_a_snapshot() {
    let history = lesson_history();
    let snapshot = replay(text("task-42"), &history[..2], Policy::CompletionWins).unwrap();
    assert_eq!(
        fold(snapshot, &history[2..3], Policy::CompletionWins),
        replay(text("task-42"), &history[..3], Policy::CompletionWins)
    );
    assert_eq!(
        replay(text("task-42"), &[], Policy::CompletionWins),
        Ok(initial_state(text("task-42")))
    );
}

// ---------------------------------------------------------------------------
// 3. `sim transition` through the binary
// ---------------------------------------------------------------------------

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn sim(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = crate::common::sim_command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sim binary starts");
    let mut input = child.stdin.take().expect("stdin is piped");
    let bytes = stdin.to_vec();
    // Written from a thread so a large output cannot block a large input.
    let writer = std::thread::spawn(move || input.write_all(&bytes));
    let output = child.wait_with_output().expect("sim finishes");
    writer.join().unwrap().unwrap();
    Run {
        code: output.status.code().expect("sim exits with a code"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("transition-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn expected_result(line: &str) -> String {
    let input = parse_transition_line(line, Reading::Lenient).unwrap();
    let mut out = String::new();
    write_result(
        &mut out,
        &input.state,
        &transition(&input.state, &input.event, input.policy),
    );
    out
}

fn error_line(message: &str, line: usize) -> String {
    json!({"error": message, "line": line}).to_string()
}

#[test]
fn sim_transition_good_lines_exit_zero() {
    let start = line_value(
        &initial_state(text("task-1")),
        &event_at("task-1", 1, started(1)),
    )
    .to_string();
    let race = json!({
        "state": state_to_json(&with_status(Status::Cancelling)),
        "event": event_to_json(&event_at("task-1", 4, completed(2, true))),
        "policy": "cancel-wins",
    })
    .to_string();
    let race_default = line_value(
        &with_status(Status::Cancelling),
        &event_at("task-1", 4, completed(2, true)),
    )
    .to_string();
    let input = format!("{start}\n{race}\r\n{race_default}");
    let run = sim(&["transition"], input.as_bytes());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        r#"{"accepted":true,"evidence":{"completionWonCancellationRace":false,"eventId":"evt-1","nextStatus":"running","previousStatus":"queued"},"next":{"artifactSha256":null,"attempt":1,"cancellationSignalId":null,"leaseUntilEpochMs":9000,"status":"running","taskId":"task-1","terminalErrorCode":null,"version":1,"workerId":"worker-b"}}"#
    );
    assert_eq!(
        lines[1],
        r#"{"accepted":false,"current":{"artifactSha256":null,"attempt":2,"cancellationSignalId":null,"leaseUntilEpochMs":5000,"status":"cancelling","taskId":"task-1","terminalErrorCode":null,"version":3,"workerId":"worker-a"},"reason":"CANCELLATION_PENDING"}"#
    );
    assert_eq!(lines[2], expected_result(&race_default));
    assert!(lines[2].contains(r#""completionWonCancellationRace":true"#));
    assert_eq!(lines.len(), 3);
    assert!(run.stdout.ends_with('\n'));

    // The same from a file.
    let path = temp_file("good.jsonl", input.as_bytes());
    let from_file = sim(&["transition", path.to_str().unwrap()], b"");
    assert_eq!(from_file.code, 0);
    assert_eq!(from_file.stdout, run.stdout);
}

#[test]
fn sim_transition_error_lines_keep_going_and_exit_two() {
    let good = line_value(&running(), &event_at("task-1", 4, completed(2, true)));
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut value = good.clone();
        edit(&mut value);
        value.to_string()
    };
    let mut input: Vec<u8> = Vec::new();
    let mut expected: Vec<String> = Vec::new();
    let mut push = |line: &[u8], output: Option<String>| {
        input.extend_from_slice(line);
        input.push(b'\n');
        if let Some(output) = output {
            expected.push(output);
        }
    };
    let good_line = good.to_string();
    push(good_line.as_bytes(), Some(expected_result(&good_line))); // 1
    push(
        b"{\"state\": nope}",
        Some(error_line("invalid JSON at column 12: expected ident", 2)),
    ); // 2
    push(b"", None); // 3
    push(b"   \t ", None); // 4
    let missing = with(&|v| drop(v["state"].as_object_mut().unwrap().remove("workerId")));
    push(
        missing.as_bytes(),
        Some(error_line(
            "state.workerId: missing, expected a string or null",
            5,
        )),
    );
    let wrong_type = with(&|v| v["event"]["attempt"] = json!("2"));
    push(
        wrong_type.as_bytes(),
        Some(error_line(
            "event.attempt: expected an integer, got string",
            6,
        )),
    );
    let status = with(&|v| v["state"]["status"] = json!("paused"));
    push(
        status.as_bytes(),
        Some(error_line(
            "state.status: expected one of queued, running, cancelling, completed, failed, cancelled, got \"paused\"",
            7,
        )),
    );
    let kind = with(&|v| v["event"]["type"] = json!("TaskPaused"));
    push(
        kind.as_bytes(),
        Some(error_line(
            "event.type: expected one of TaskStarted, CancellationRequested, TaskCompleted, AttemptFailed, TaskFailed, TaskCancelled, got \"TaskPaused\"",
            8,
        )),
    );
    let policy = with(&|v| v["policy"] = json!("first-wins"));
    push(
        policy.as_bytes(),
        Some(error_line(
            "policy: expected \"completion-wins\" or \"cancel-wins\", got \"first-wins\"",
            9,
        )),
    );
    let fraction = with(&|v| v["event"]["sequence"] = json!(4.5));
    push(
        fraction.as_bytes(),
        Some(error_line(
            "event.sequence: expected an integer, got 4.5: an integer is written without a fraction or an exponent, within 64 bits (--lenient reads integral numbers in any notation)",
            10,
        )),
    );
    // 4.0 is not an integer literal: refused unless --lenient.
    let integral = good_line.replace(r#""sequence":4"#, r#""sequence":4.0"#);
    assert_ne!(integral, good_line);
    push(
        integral.as_bytes(),
        Some(error_line(
            "event.sequence: expected an integer, got 4.0: an integer is written without a fraction or an exponent, within 64 bits (--lenient reads integral numbers in any notation)",
            11,
        )),
    ); // 11
    push(
        b"[1,2]",
        Some(error_line(
            "expected an object with \"state\" and \"event\", got array",
            12,
        )),
    );
    push(
        b"{\"event\":{}}",
        Some(error_line("state: missing, expected an object", 13)),
    );
    push(
        b"{\"state\":{},\"event\":{}}",
        Some(error_line("state.taskId: missing, expected a string", 14)),
    );
    let mut not_utf8 = good_line.clone().into_bytes();
    not_utf8[20] = 0xff;
    push(&not_utf8, Some(error_line("invalid UTF-8 at byte 21", 15)));
    push(b"\r", None); // 16
    push(good_line.as_bytes(), Some(expected_result(&good_line))); // 17
    let run = sim(&["transition"], &input);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert_eq!(run.stdout, expected.join("\n") + "\n");

    // Only good lines and blank ones: exit 0, blank lines print nothing.
    let run = sim(&["transition"], format!("\n{good_line}\n\n  \n").as_bytes());
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, expected_result(&good_line) + "\n");
    let run = sim(&["transition"], b"");
    assert_eq!((run.code, run.stdout.as_str()), (0, ""));

    // A byte-order mark before the first line is not part of the JSON.
    let run = sim(&["transition"], format!("\u{feff}{good_line}").as_bytes());
    assert_eq!(
        (run.code, run.stdout),
        (0, expected_result(&good_line) + "\n")
    );
}

#[test]
fn sim_transition_unreadable_input_names_the_file() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-file.jsonl");
    let run = sim(&["transition", missing.to_str().unwrap()], b"");
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains("no-such-file.jsonl"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1);

    let dir = env!("CARGO_TARGET_TMPDIR");
    let run = sim(&["transition", dir], b"");
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(dir) && run.stderr.contains("directory"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------
// 4. `sim replay-events` through the binary
// ---------------------------------------------------------------------------

fn history_lines(events: &[TaskEvent]) -> String {
    events
        .iter()
        .map(|event| event_to_json(event).to_string() + "\n")
        .collect()
}

#[test]
fn sim_replay_events_prints_the_state_of_a_valid_history() {
    let history = lesson_history();
    // Out of order, with a blank line and a repeated event.
    let events = [
        history[1].clone(),
        history[0].clone(),
        history[2].clone(),
        history[0].clone(),
    ];
    let file = temp_file(
        "valid.jsonl",
        (history_lines(&events[..2]) + "\n" + &history_lines(&events[2..])).as_bytes(),
    );
    let run = sim(&["replay-events", file.to_str().unwrap()], b"");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "{\"artifactSha256\":\"art\",\"attempt\":1,\"cancellationSignalId\":\"sig-9\",\
         \"leaseUntilEpochMs\":null,\"status\":\"completed\",\"taskId\":\"task-42\",\
         \"terminalErrorCode\":null,\"version\":3,\"workerId\":null}\n"
    );
}

#[test]
fn sim_replay_events_reports_an_invalid_history_with_exit_one() {
    let history = lesson_history();
    let file = temp_file("late-cancel.jsonl", history_lines(&history).as_bytes());
    let run = sim(&["replay-events", file.to_str().unwrap()], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    let state_before = replay(text("task-42"), &history[..3], Policy::CompletionWins).unwrap();
    let mut state_json = String::new();
    write_state(&mut state_json, &state_before);
    assert_eq!(
        run.stdout,
        format!(
            "{{\"invalid\":{{\"eventId\":\"evt-4\",\"line\":4,\"reason\":\"TERMINAL_STATE\",\"sequence\":4}},\"stateBefore\":{state_json}}}\n"
        )
    );

    let run = sim(
        &[
            "replay-events",
            file.to_str().unwrap(),
            "--policy",
            "cancel-wins",
        ],
        b"",
    );
    assert_eq!(run.code, 1);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["invalid"]["reason"], "CANCELLATION_PENDING");
    assert_eq!(report["invalid"]["eventId"], "evt-3");
    assert_eq!(report["stateBefore"]["status"], "cancelling");

    // The same id with another payload stops the replay.
    let mut changed = history[1].clone();
    changed.body = EventBody::CancellationRequested {
        signal_id: text("sig-10"),
        requester: text("user"),
        reason: text("no longer needed"),
    };
    let events = [
        history[0].clone(),
        history[1].clone(),
        changed,
        history[2].clone(),
    ];
    let file = temp_file("conflict.jsonl", history_lines(&events).as_bytes());
    let run = sim(&["replay-events", file.to_str().unwrap()], b"");
    assert_eq!(run.code, 1);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        report["invalid"],
        json!({"eventId": "evt-2", "line": 3, "reason": "EVENT_ID_PAYLOAD_CONFLICT", "sequence": 2})
    );
    assert_eq!(report["stateBefore"]["version"], 2);
}

#[test]
fn sim_replay_events_refuses_a_malformed_file_with_exit_two() {
    let history = lesson_history();
    let bad_line = history_lines(&history[..1]) + "{\"eventId\":\"evt-2\"}\n";
    let cases = [
        (
            "bad-line.jsonl",
            bad_line.into_bytes(),
            ":2:1: event.taskId: missing, expected a string",
        ),
        (
            "not-json.jsonl",
            b"{\"eventId\":\n".to_vec(),
            ":1:11: invalid JSON",
        ),
        ("empty.jsonl", b"\n  \n".to_vec(), ": no events"),
        (
            "array.jsonl",
            b"[]\n".to_vec(),
            ":1:1: event: expected an object, got array",
        ),
    ];
    for (name, bytes, expected) in cases {
        let file = temp_file(name, &bytes);
        let run = sim(&["replay-events", file.to_str().unwrap()], b"");
        assert_eq!(run.code, 2, "{name}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{name}");
        assert!(
            run.stderr
                .contains(&format!("{}{expected}", file.display())),
            "{name}: {}",
            run.stderr
        );
    }
    let run = sim(&["replay-events", "/no/such/history.jsonl"], b"");
    assert_eq!((run.code, run.stdout.as_str()), (2, ""));
    assert!(run.stderr.contains("/no/such/history.jsonl"));
}

/// The default reading takes exactly the lesson's shapes; `--lenient` is
/// the older reading that let these through.
#[test]
fn strict_reading_refuses_what_lenient_takes() {
    let good = line_value(&running(), &event_at("task-1", 4, completed(2, true)));
    let variant = |edit: &dyn Fn(&mut Value)| {
        let mut value = good.clone();
        edit(&mut value);
        value.to_string()
    };
    let cases: Vec<(String, &str)> = vec![
        (
            variant(&|v| v["state"]["version"] = json!(3.0)),
            "state.version: expected an integer, got 3.0: an integer is written without a fraction or an exponent",
        ),
        (
            good.to_string()
                .replace(r#""version":3"#, r#""version":3e0"#),
            "state.version: expected an integer, got 3.0",
        ),
        (
            variant(&|v| v["state"]["attempt"] = json!(-1)),
            "state.attempt: expected an integer of 0 or more, got -1",
        ),
        (
            variant(&|v| v["event"]["sequence"] = json!(-4)),
            "event.sequence: expected an integer of 0 or more, got -4",
        ),
        (
            variant(&|v| v["state"]["owner"] = json!("me")),
            "state.owner: unknown field; a state has taskId, status, version",
        ),
        (
            variant(&|v| v["event"]["workerId"] = json!("worker-b")),
            "event.workerId: not a field of TaskCompleted",
        ),
        (
            variant(&|v| v["event"]["zz"] = json!(1)),
            "event.zz: unknown field; TaskCompleted has eventId, taskId, sequence, type, attempt, artifactSha256, artifactVerified",
        ),
        (
            variant(&|v| v["comment"] = json!("hi")),
            "comment: unknown key; a line has state, event and an optional policy",
        ),
    ];
    let lenient = parse_transition_line(&good.to_string(), Reading::Lenient).unwrap();
    for (line, expected) in &cases {
        let strict = parse_transition_line(line, Reading::Strict);
        assert!(
            strict
                .as_ref()
                .is_err_and(|error| error.starts_with(expected)),
            "{line}: {strict:?}"
        );
        let taken = parse_transition_line(line, Reading::Lenient);
        assert!(taken.is_ok(), "{line}: {taken:?}");
        if !line.contains('-') {
            assert_eq!(taken.unwrap(), lenient, "{line}");
        }
        // The value route reads alike.
        let value: Value = serde_json::from_str(line).unwrap();
        if let Some(error) = state_from_json(&value["state"], Reading::Strict)
            .err()
            .or_else(|| event_from_json(&value["event"], Reading::Strict).err())
        {
            assert!(error.starts_with(expected), "{line}: {error}");
        }
    }
    // The well-typed line itself is taken by both.
    assert_eq!(
        parse_transition_line(&good.to_string(), Reading::Strict),
        Ok(lenient)
    );
    // And the command line: the default refuses, --lenient takes.
    let input = format!("{}\n", cases[0].0);
    let strict = sim(&["transition"], input.as_bytes());
    assert_eq!(strict.code, 2, "{}", strict.stdout);
    let lenient = sim(&["transition", "--lenient"], input.as_bytes());
    assert_eq!(lenient.code, 0, "{}", lenient.stdout);
}
