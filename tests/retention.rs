//! Idempotency retention: a record whose task has ended but is not settled
//! is kept, and looked at again less and less often while it waits.

use sim::run::{execute, world_for};
use sim::world::step::Action;

/// Task-1 completes within 40 ms, but the publisher crashes after
/// publishing its first message and stays down for a minute, so the
/// task's event messages wait unpublished: its record (TTL 100 ms) is kept
/// while they do. Looked at once per reconcile period (50 ms) that was
/// about 1,200 looks; with each wait as long as the record has already
/// been kept, a few. Once the messages are out, the next look drops it (a
/// second request at 130 s keeps the world running until then).
#[test]
fn a_record_kept_for_an_unsettled_task_is_looked_at_less_and_less_often() {
    let text = r#"
name = "kept-record"
seed = 1
steps_max = 10000

[config]
apis = 1
publishers = 1
workers = 1
idempotency_ttl_ms = 100
reconcile_every_ms = 50
restart_delay_ms = 60000

[[requests]]
at = 0
kind = "create"
key = "intent-0001"
input = { doc = "doc-1", title = "demo" }

[[requests]]
at = 130000
kind = "create"
key = "intent-0002"
input = { doc = "doc-2", title = "demo" }

[[faults]]
site = "crash"
actor = "publisher-1"
after = "publisher.mark"

[expect]
"/tasks/task-1/status" = "completed"
"/tasks/task-2/status" = "completed"
"#;
    let scenario =
        sim::scenario::parse::parse(text, None).unwrap_or_else(|error| panic!("{error}"));
    let finished = execute(&scenario, world_for(&scenario), |_, _| {});
    assert_eq!(
        finished.exit, 0,
        "{:?} {:?}",
        finished.unmet, finished.outcome
    );
    assert!(
        finished
            .world
            .db
            .records()
            .all(|record| &*record.key != "intent-0001"),
        "task-1's record is gone once its messages are published"
    );
    let expires = finished
        .world
        .counters
        .steps_by_action
        .get(Action::parse("reconciler.expire").expect("a step name"));
    assert!(
        (2..=20).contains(&expires),
        "{expires} looks at the records in two minutes"
    );
}
