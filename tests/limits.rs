//! Every limit bounded: a valid scenario whose world cannot make progress
//! still ends, within a budget the test states, never growing until memory
//! runs out.

use sim::run::{execute, world_for};

/// One create under a projector that never acks in time (each step up to
/// an hour, one delivery allowed): its events were dead-lettered and
/// re-driven for ever, 17,167 re-drives in 10^4 steps, and with
/// `steps_max = 10^12` the process ran out of memory.
const PROJECTOR_NEVER_ACKS: &str = r#"
name = "projector-never-acks"
seed = 1
steps_max = 100000

[config]
delivery_attempts_max = 1
latency_ms_max = 3600000

[[requests]]
at = 0
kind = "create"
key = "intent-0001"
input = { doc = "doc-1" }
"#;

#[test]
fn dead_lettered_events_are_re_driven_within_redrive_max_and_the_run_ends() {
    let scenario = sim::scenario::parse::parse(PROJECTOR_NEVER_ACKS, None).expect("valid");
    let finished = execute(&scenario, world_for(&scenario), |_, _| {});
    let world = &finished.world;
    assert!(
        world.steps < 1_000,
        "the run ends by itself: {} steps",
        world.steps
    );
    let redrives = world
        .db
        .task(world.db.tasks.first().expect("one task").id);
    assert!(
        u64::from(redrives.event_redrives) <= scenario.config.redrive_max,
        "{} event re-drives",
        redrives.event_redrives
    );
    assert!(
        world.broker.dead_letters.len() < 20,
        "{} dead letters",
        world.broker.dead_letters.len()
    );
    // Past the budget a dead letter goes to a human, as a task's work does.
    assert!(
        world
            .db
            .manual_review
            .iter()
            .any(|item| item.reason.as_str() == "DEAD_LETTERED")
    );
    assert!(matches!(finished.exit, 0 | 3), "exit {}", finished.exit);
}
