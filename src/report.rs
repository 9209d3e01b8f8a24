//! Human reports: the run summary, coverage figures, and the violation
//! report with everything needed to understand and reproduce a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::faults::{FaultKind, Site};
use crate::hash::hex;
use crate::invariants::Violation;
use crate::simulate::Outcome;
use crate::task::{EventType, RejectReason, Status};
use crate::trace::Record;
use crate::world::World;

/// The races lesson 003 §11 asks coverage of.
pub const RACES: [&str; 5] = [
    "cancel × complete",
    "cancel × attempt failure",
    "reconciler × worker",
    "two workers starting one task",
    "two publishers on one outbox row",
];

/// "Sometimes" targets: things a campaign with teeth must reach.
pub const SOMETIMES: [&str; 12] = [
    "duplicate-absorbed-by-inbox",
    "completion-won-cancellation-race",
    "compensation",
    "dead-lettered-by-broker",
    "poison-dead-lettered",
    "snapshot-rejected",
    "sequence-gap-refetched",
    "unknown-effect-verified",
    "lease-expired-fenced",
    "inbox-conflict-quarantined",
    "dead-letter-replayed",
    "idempotency-record-expired",
];

/// Every situation the world marks with `World::sometimes`, the headline
/// targets above among them. A campaign of 300 seeds x 10^4 steps reaches
/// each one (`tests/detect.rs` holds it), so a change to the protocol or
/// the harness that makes a situation unreachable (a fault that no longer
/// fires, a path no longer taken, a replay that silently does nothing) is
/// caught even where no invariant breaks. `tests/layout.rs` keeps this
/// list and the names in `src/world/` the same.
pub const SITUATIONS: [&str; 61] = [
    "ack-lost-in-broker-outage",
    "actor-paused",
    "altered-event-refetched",
    "artifact-bytes-mismatch",
    "artifact-metadata-mismatch",
    "attempt-resumed",
    "attempt-retried",
    "broker-outage",
    "cache-delete-retried",
    "cancellation-pending-refused",
    "client-heard-accepted",
    "client-heard-cancel-recorded",
    "client-heard-cancel-refused",
    "client-heard-not-found",
    "client-heard-refused",
    "client-heard-status",
    "compensation",
    "completion-won-cancellation-race",
    "dead-letter-redriven",
    "dead-letter-replayed",
    "dead-letter-to-review",
    "dead-lettered-by-broker",
    "delivery-delayed",
    "duplicate-absorbed-by-inbox",
    "event-duplicate-ignored",
    "event-id-payload-conflict",
    "fence-compensation-planned",
    "fence-found-lease-renewed",
    "fence-lost-lease",
    "hide-took-unanswered",
    "history-conflict-reported",
    "idempotency-record-expired",
    "inbox-conflict-quarantined",
    "inbox-lease-held",
    "lease-expired-fenced",
    "outbox-republished",
    "pause-ended-by-takeover",
    "poison-dead-letter-owed",
    "poison-dead-lettered",
    "projection-rebuilt",
    "put-retried-same-token",
    "put-returned-first-object",
    "redelivered",
    "retention-kept-unfinished",
    "sequence-gap-refetched",
    "snapshot-hash-stale",
    "snapshot-rejected",
    "snapshot-replay-mismatch",
    "snapshot-used",
    "stale-message-superseded",
    "status-read-from-cache",
    "step-slowed-by-spike",
    "store-cannot-confirm",
    "store-outage",
    "store-outage-outlasts-calls",
    "store-read-failed-in-outage",
    "store-write-failed-in-outage",
    "task-compacted",
    "unknown-effect-verified",
    "unstored-event-refused",
    "worker-paused-mid-job",
];

/// Situations too rare for the 300-seed floor of `tests/detect.rs`: a
/// fence that paused past the lease its claim took while a redelivered
/// worker resumed the attempt (0 of 300 seeds x 10^4 steps at `a463f68`),
/// and a fence whose claim finds the lease renewed since its scan (2 of
/// 300 before pauses were drawn higher, 0 after: it needs a worker to
/// take the attempt back in the few milliseconds between the two). The
/// 10,000-seed campaign of the README's "Fuzzing" reaches both.
pub const RARE_SITUATIONS: [&str; 2] = ["fence-lost-lease", "fence-found-lease-renewed"];

/// Coverage as (seen, declared) pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub transitions: (usize, usize),
    pub rejections: (usize, usize),
    pub races: (usize, usize),
}

impl Coverage {
    /// From the number of (status, event type) pairs exercised and whether
    /// each reject reason and race (by name) was seen: one run's counters
    /// and a campaign's summed maps both answer that.
    pub fn of(
        pairs_seen: usize,
        rejection_seen: impl Fn(&str) -> bool,
        race_seen: impl Fn(&str) -> bool,
    ) -> Coverage {
        let declared_pairs = Status::ALL.len() * EventType::ALL.len();
        let seen_rejections = RejectReason::ALL
            .iter()
            .filter(|reason| rejection_seen(reason.as_str()))
            .count();
        let seen_races = RACES.iter().filter(|race| race_seen(race)).count();
        Coverage {
            transitions: (pairs_seen, declared_pairs),
            rejections: (seen_rejections, RejectReason::ALL.len()),
            races: (seen_races, RACES.len()),
        }
    }

    pub fn line(&self) -> String {
        format!(
            "transitions {}/{}, rejections {}/{}, races {}/{}",
            self.transitions.0,
            self.transitions.1,
            self.rejections.0,
            self.rejections.1,
            self.races.0,
            self.races.1
        )
    }
}

/// What coverage did not reach, by name: `(status, event type)` pairs as
/// `status/EventType`, reject reasons and races. One run's counters and a
/// campaign's summed maps both answer the three questions.
pub fn not_reached(
    pair_seen: impl Fn(Status, EventType) -> bool,
    rejection_seen: impl Fn(&str) -> bool,
    race_seen: impl Fn(&str) -> bool,
) -> Vec<(&'static str, Vec<String>)> {
    let pairs: Vec<String> = Status::ALL
        .iter()
        .flat_map(|status| EventType::ALL.iter().map(move |event| (*status, *event)))
        .filter(|(status, event)| !pair_seen(*status, *event))
        .map(|(status, event)| format!("{}/{}", status.as_str(), event.as_str()))
        .collect();
    let rejections = RejectReason::ALL
        .iter()
        .map(|reason| reason.as_str())
        .filter(|reason| !rejection_seen(reason))
        .map(String::from)
        .collect();
    let races = RACES
        .iter()
        .filter(|race| !race_seen(race))
        .map(|race| race.to_string())
        .collect();
    vec![
        ("transitions", pairs),
        ("rejections", rejections),
        ("races", races),
    ]
}

/// The `not_reached` lists as lines: `transitions not reached: …`.
pub fn not_reached_lines(lists: &[(&'static str, Vec<String>)]) -> String {
    let mut out = String::new();
    for (what, missing) in lists {
        if !missing.is_empty() {
            let _ = writeln!(out, "{what} not reached: {}", missing.join(", "));
        }
    }
    out
}

/// Faults injected, counted by (site, kind).
pub fn fault_counts(world: &World) -> BTreeMap<(Site, FaultKind), u64> {
    let mut counts = BTreeMap::new();
    for fault in &world.faults.injected {
        *counts.entry((fault.site, fault.kind)).or_insert(0) += 1;
    }
    counts
}

pub fn tasks_by_status(world: &World) -> BTreeMap<Status, u64> {
    let mut counts = BTreeMap::new();
    for row in &world.db.tasks {
        *counts.entry(row.state.status).or_insert(0) += 1;
    }
    counts
}

/// The human summary of one run.
pub fn summary(world: &World, scenario: &str, outcome: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario     {scenario}");
    let _ = writeln!(out, "seed         {}", world.seed);
    if let Some(mutant) = world.mutant {
        let _ = writeln!(out, "mutant       {}", mutant.name());
    }
    let _ = writeln!(
        out,
        "steps        {} (fault phase {}, drain {})",
        world.steps, outcome.fault_steps, outcome.drain_steps
    );
    let _ = writeln!(out, "virtual time {} ms", world.last_step_ms);
    let statuses = tasks_by_status(world);
    let listed: Vec<String> = statuses
        .iter()
        .map(|(s, n)| format!("{} {n}", s.as_str()))
        .collect();
    let _ = writeln!(
        out,
        "tasks        {}{}{}",
        world.db.tasks.len(),
        if listed.is_empty() { "" } else { ": " },
        listed.join(", ")
    );
    let faults = fault_counts(world);
    if faults.is_empty() {
        let _ = writeln!(out, "faults       none");
    } else {
        let listed: Vec<String> = faults
            .iter()
            .map(|((site, kind), n)| format!("{}/{} {n}", site.as_str(), kind.as_str()))
            .collect();
        let _ = writeln!(out, "faults       {}", listed.join(", "));
    }
    let _ = writeln!(
        out,
        "checks       {} invariant checks",
        world.counters.invariant_checks
    );
    let counters = &world.counters;
    let coverage = Coverage::of(
        counters.transitions.len(),
        |reason| counters.rejections.get(reason).is_some_and(|n| *n > 0),
        |race| counters.races.get(race).is_some_and(|n| *n > 0),
    );
    let _ = writeln!(out, "coverage     {}", coverage.line());
    if !world.db.manual_review.is_empty() {
        let listed: Vec<String> = world
            .db
            .manual_review
            .iter()
            .map(|item| {
                format!(
                    "{} {}",
                    item.reason.as_str(),
                    item.task.map_or(String::new(), |t| t.to_string())
                )
            })
            .collect();
        let _ = writeln!(out, "review       {}", listed.join(", "));
    }
    match &outcome.violation {
        Some(violation) => {
            let _ = writeln!(
                out,
                "violations   {} at step {}",
                violation.invariant, violation.step
            );
        }
        None => {
            let _ = writeln!(out, "violations   none");
        }
    }
    if outcome.violation.is_none() {
        if outcome.not_converged.is_empty() {
            let _ = writeln!(out, "converged    yes");
        } else {
            let _ = writeln!(out, "converged    NO: {}", outcome.not_converged.join("; "));
        }
    }
    let _ = writeln!(out, "traceSha256  {}", hex(&world.trace.sha256()));
    out
}

/// Steps of a slice shown before the gap when it is long, and after it.
const SLICE_HEAD: usize = 12;
const SLICE_TAIL: usize = 48;

/// The identifiers a record is about, as text (`task-3`, `outbox-7`,
/// `entry-9`).
fn record_ids(record: &Record) -> impl Iterator<Item = String> {
    [
        record.task.map(|task| task.to_string()),
        record.message.map(|message| message.to_string()),
        record.entry.map(|entry| entry.to_string()),
    ]
    .into_iter()
    .flatten()
}

/// The causal slice of a violation: every step up to it that touched the
/// violation's entities (its tasks, messages and broker entries, named in
/// its entities, message or breaking step), and the steps that touched
/// what those steps were about (the entry a message was published as,
/// the task a message belongs to), in step order.
pub fn causal_slice<'a>(records: &'a [Record], violation: &Violation) -> Vec<&'a Record> {
    let upto: Vec<&Record> = records
        .iter()
        .filter(|record| record.step <= violation.step)
        .collect();
    let mut ids: BTreeSet<String> = BTreeSet::new();
    let texts = violation
        .entities
        .iter()
        .map(String::as_str)
        .chain([violation.message.as_str()]);
    for text in texts {
        for token in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            let numbered = |prefix: &str| {
                token
                    .strip_prefix(prefix)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            };
            if numbered("task-") || numbered("outbox-") || numbered("entry-") {
                ids.insert(token.to_string());
            }
        }
    }
    if let Some(record) = upto.iter().find(|record| record.step == violation.step) {
        ids.extend(record_ids(record));
    }
    // One round of "what produced it": the ids that share a step with the
    // violation's own.
    let mut grown = ids.clone();
    for record in &upto {
        if record_ids(record).any(|id| ids.contains(&id)) {
            grown.extend(record_ids(record));
        }
    }
    upto.into_iter()
        .filter(|record| record_ids(record).any(|id| grown.contains(&id)))
        .collect()
}

/// The violation report: what broke, where, what the invariant expected
/// and what it saw, the causal slice of the whole trace (`records`, from a
/// re-run; without it the last 20 steps of the ring), the faults so far
/// and the command that reproduces it.
pub fn violation_report(
    world: &World,
    violation: &Violation,
    reproduce: &str,
    records: Option<&[Record]>,
) -> String {
    let mut out = String::new();
    if violation.invariant == crate::fuzz::panic::SIM_PANIC {
        let _ = writeln!(
            out,
            "SIM PANICKED at step {} (t={}ms): a bug in sim itself, not in the protocol",
            violation.step, violation.time_ms
        );
    } else {
        let _ = writeln!(
            out,
            "VIOLATION {} at step {} (t={}ms)",
            violation.invariant, violation.step, violation.time_ms
        );
    }
    if let Some(invariant) = crate::invariants::INVARIANTS
        .iter()
        .find(|invariant| invariant.id == violation.invariant)
    {
        let _ = writeln!(out, "  expected: {}", invariant.statement);
    }
    let _ = writeln!(out, "  saw:      {}", violation.message);
    let _ = writeln!(out, "  entities: {}", violation.entities.join(", "));
    let tail = world.trace.tail(crate::trace::RING_LEN);
    let broke = records
        .and_then(|records| records.iter().find(|record| record.step == violation.step))
        .or_else(|| {
            tail.iter()
                .copied()
                .find(|record| record.step == violation.step)
        });
    if let Some(record) = broke {
        let _ = writeln!(out, "  broke at:\n  {}", record.story_line(false));
    }
    match records {
        Some(records) => {
            let slice = causal_slice(records, violation);
            let _ = writeln!(
                out,
                "  the steps that touched its tasks, messages and entries ({} of {}):",
                slice.len(),
                violation.step
            );
            let long = slice.len() > SLICE_HEAD + SLICE_TAIL;
            for (index, record) in slice.iter().enumerate() {
                if long && index == SLICE_HEAD {
                    let _ = writeln!(
                        out,
                        "  … {} steps of the slice left out …",
                        slice.len() - SLICE_HEAD - SLICE_TAIL
                    );
                }
                if long && index >= SLICE_HEAD && index < slice.len() - SLICE_TAIL {
                    continue;
                }
                let _ = writeln!(out, "  {}", record.story_line(false));
            }
        }
        None => {
            let _ = writeln!(out, "  last 20 steps:");
            let last: Vec<_> = tail
                .iter()
                .filter(|record| record.step <= violation.step)
                .collect();
            for record in last.iter().skip(last.len().saturating_sub(20)) {
                let _ = writeln!(out, "  {}", record.story_line(false));
            }
        }
    }
    if world.faults.injected.is_empty() {
        let _ = writeln!(out, "  faults injected so far: none");
    } else {
        let _ = writeln!(out, "  faults injected so far:");
        for fault in &world.faults.injected {
            let _ = writeln!(
                out,
                "    step {:>6}  {}/{}  {}",
                fault.step,
                fault.site.as_str(),
                fault.kind.as_str(),
                fault.actor
            );
        }
    }
    let _ = writeln!(out, "  reproduce: {reproduce}");
    out
}
