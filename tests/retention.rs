//! Idempotency retention: a record whose task has ended but is not settled
//! is kept, and looked at again less and less often while it waits.

use sim::world::engine::step::Action;

use crate::common::{load_scenario, run_clean};

/// `scenarios/regressions/kept-record-behind-crashed-publisher.toml`: a
/// record kept for a minute behind a crashed publisher. Looked at once per
/// reconcile period (50 ms) that was about 1,200 looks; with each wait as
/// long as the record has already been kept, a few. Once the messages are
/// out, the next look drops it.
#[test]
fn a_record_kept_for_an_unsettled_task_is_looked_at_less_and_less_often() {
    let scenario = load_scenario("regressions/kept-record-behind-crashed-publisher");
    let finished = run_clean(&scenario);
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
