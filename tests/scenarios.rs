//! Data-driven: every `scenarios/**/*.toml` runs, must end as it expects
//! (exit 0), and its final Task/Inbox/Outbox/Ledger dump and traceSha256
//! must match its reviewed snapshot in `snapshots/`. A scenario added later
//! is tested here with no new test code.

use sim::run::{execute, world_for};
use sim::scenario::parse::load;

use crate::common::{scenario_files, scenario_name};

/// The part of the dump a scenario snapshot holds.
pub fn snapshot_part(dump: &serde_json::Value) -> String {
    let part = serde_json::json!({
        "traceSha256": dump["traceSha256"],
        "tasks": dump["tasks"],
        "inbox": dump["inbox"],
        "outbox": dump["outbox"],
        "ledger": dump["ledger"],
    });
    serde_json::to_string_pretty(&part).expect("json")
}

#[test]
fn every_scenario_ends_as_it_expects_and_matches_its_snapshot() {
    let files = scenario_files();
    assert!(!files.is_empty(), "scenarios/ holds scenarios");
    for path in files {
        let name = scenario_name(&path);
        let scenario = load(&path).unwrap_or_else(|error| panic!("{error}"));
        let finished = execute(&scenario, world_for(&scenario), |_, _| {});
        assert_eq!(
            finished.exit,
            0,
            "{name}: exit {}, unmet {:?}, violation {:?}, not converged {:?}",
            finished.exit,
            finished.unmet,
            finished.outcome.violation,
            finished.outcome.not_converged
        );
        let text = snapshot_part(&finished.dump);
        insta::with_settings!({
            snapshot_path => "../snapshots",
            prepend_module_to_snapshot => false,
            description => format!("scenarios/{name}.toml: tasks, inbox, outbox, ledger and traceSha256"),
            omit_expression => true,
        }, {
            insta::assert_snapshot!(format!("scenario__{}", name.replace('/', "__")), text);
        });
    }
}

#[test]
fn replaying_every_scenario_s_event_history_gives_its_state_row() {
    for path in scenario_files() {
        let scenario = load(&path).unwrap_or_else(|error| panic!("{error}"));
        let finished = execute(&scenario, world_for(&scenario), |_, _| {});
        if finished.outcome.violation.is_some() {
            continue;
        }
        // A compacted task's history is gone by design; the rest replay.
        for row in finished.world.db.tasks.iter().filter(|row| !row.compacted) {
            let events: Vec<_> = row
                .events
                .iter()
                .map(|stored| (*stored.event).clone())
                .collect();
            let replayed = sim::task::replay::replay(
                row.state.task_id.clone(),
                &events,
                scenario.config.cancel_policy,
            )
            .unwrap_or_else(|invalid| {
                panic!(
                    "{}: {} does not replay: {invalid}",
                    scenario_name(&path),
                    row.id
                )
            });
            assert_eq!(replayed, row.state, "{}: {}", scenario_name(&path), row.id);
        }
    }
}
