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

/// A finished task whose record expires while something still carries it
/// (a broker entry, a delivery, a job) is compacted at a later expiry:
/// before, it kept its events, outbox and inbox rows, read model and
/// checker history for the rest of the run (one task in eight of fuzz
/// seed 1). After a long run only the last few can still wait.
#[test]
fn a_finished_task_left_whole_by_its_expiry_is_compacted_later() {
    use sim::fuzz::campaign::fuzz_world;
    use sim::world::stores::db::Answer;

    let (_, mut world, _) = fuzz_world(1, 60_000, None);
    let outcome = sim::simulate::simulate(&mut world, 60_000, |_, _| {});
    assert!(outcome.converged(), "{outcome:?}");
    let db = &world.db;
    let expired_and_whole: Vec<_> = db
        .tasks
        .iter()
        .filter(|row| row.state.status.is_terminal() && !row.compacted)
        .filter(|row| {
            db.record(&row.key)
                .is_none_or(|record| record.answer != Answer::Accepted(row.id))
        })
        .filter(|row| !db.in_review(row.id))
        .map(|row| row.id)
        .collect();
    let compacted = db.tasks.iter().filter(|row| row.compacted).count();
    assert!(compacted > 1_000, "{compacted} tasks compacted");
    assert!(
        expired_and_whole
            .iter()
            .all(|task| world.compaction_deferred.contains(task)),
        "tasks whose record expired, whole and not waiting: {expired_and_whole:?}"
    );
    assert!(
        world.compaction_deferred.len() <= 8,
        "{} tasks wait to be compacted",
        world.compaction_deferred.len()
    );
}
