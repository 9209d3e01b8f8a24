//! The timeline page's data and file: every step a row on its lane, the
//! hand-offs the trace alone does not name, the state each step left, a
//! window for long runs, the same bytes for the same run, and a bad path
//! refused before the run. What the page draws from that data is checked
//! in a real browser by `scripts/browser-test.py` (CI runs it).

use serde_json::Value;

use sim::run::{execute, world_for};
use sim::timeline::{PageInfo, Recorder, data, page};

use crate::common::{load_scenario, scratch, sim, text};

/// Runs `scenarios/<name>.toml` with a recorder keeping `limit` steps and
/// returns the page's data and the run's step count.
fn recorded(name: &str, limit: usize) -> (Value, u64, String) {
    let scenario = load_scenario(name);
    let mut recorder = Recorder::keeping(limit);
    let finished = execute(&scenario, world_for(&scenario), |world, added| {
        recorder.observe(world, added);
    });
    let info = PageInfo {
        title: &scenario.name,
        description: &scenario.description,
        command: "sim run",
    };
    let value = data(&finished.world, &finished.outcome, &recorder, &info);
    let html = page(&finished.world, &finished.outcome, &recorder, &info);
    (value, finished.world.steps, html)
}

fn row_of(value: &Value, step: u64) -> &Value {
    value["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|row| row[0] == step)
        .unwrap_or_else(|| panic!("no row for step {step}"))
}

fn state_of(value: &Value, step: u64) -> String {
    let index = row_of(value, step)[12].as_u64().expect("a state index") as usize;
    value["states"][index]
        .as_str()
        .expect("a state")
        .to_string()
}

#[test]
fn every_step_is_a_row_on_its_actors_lane() {
    let (value, steps, _) = recorded("confirm-lost", sim::timeline::STEPS_MAX);
    let rows = value["rows"].as_array().expect("rows");
    assert_eq!(rows.len() as u64, steps);
    assert_eq!(value["steps"], steps);
    let lanes: Vec<&str> = value["lanes"]
        .as_array()
        .expect("lanes")
        .iter()
        .map(|lane| lane.as_str().expect("a name"))
        .collect();
    for lane in [
        "client-1",
        "api-1",
        "database",
        "publisher-1",
        "broker task-work",
        "broker task-events",
        "dead letters",
        "worker-1",
        "artifact store",
        "cache",
        "projector",
        "reconciler",
        "operator",
    ] {
        assert!(lanes.contains(&lane), "{lane} in {lanes:?}");
    }
    let lane_of = |step: u64| lanes[row_of(&value, step)[2].as_u64().expect("a lane") as usize];
    // confirm-lost: step 1 is client-1's send, step 6 the broker's first
    // delivery of a task-work message, step 14 one of task-events.
    assert_eq!(lane_of(1), "client-1");
    assert_eq!(lane_of(6), "broker task-work");
    assert_eq!(lane_of(14), "broker task-events");
    assert_eq!(lane_of(33), "worker-1");
    let fault = row_of(&value, 5)[11].as_i64().expect("a fault index");
    assert_eq!(
        value["faults"][fault as usize],
        "publisher.confirm/confirm-lost"
    );
}

#[test]
fn sends_and_answers_are_linked_and_states_follow_the_run() {
    let (value, _, _) = recorded("confirm-lost", sim::timeline::STEPS_MAX);
    // client-1's send (step 1) reached api-1's create (step 2); the answer
    // (step 4) went back to client 0 (client-1).
    assert_eq!(value["sends"], serde_json::json!([[1, 2]]));
    assert_eq!(value["answers"], serde_json::json!([[4, 0]]));
    // After the lost confirm, outbox-1 is unpublished; after the duplicate
    // is absorbed, the inbox row is completed and the task still at v2.
    assert!(
        state_of(&value, 5).contains("outbox-1: task-work TaskCreated v0, unpublished"),
        "{}",
        state_of(&value, 5)
    );
    let absorbed = state_of(&value, 33);
    assert!(absorbed.contains("task-1: completed v2"), "{absorbed}");
    assert!(
        absorbed.contains("inbox outbox-1: completed (completed)"),
        "{absorbed}"
    );
    assert_eq!(value["tasks"]["1"]["key"], "intent-0001");
    assert_eq!(
        value["tasks"]["1"]["tokens"],
        serde_json::json!(["task-1:artifact:attempt-1"])
    );
}

#[test]
fn a_violation_and_its_entities_reach_the_page() {
    let (value, steps, _) = recorded("mutants/no-inbox-hash-check", sim::timeline::STEPS_MAX);
    let violation = &value["violation"];
    assert_eq!(violation["step"], steps, "the run stops at the violation");
    assert!(
        !violation["entities"]
            .as_array()
            .expect("entities")
            .is_empty()
    );
}

#[test]
fn a_long_run_keeps_its_last_window() {
    let (value, steps, _) = recorded("confirm-lost", 10);
    let rows = value["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 10);
    assert_eq!(value["steps"], steps);
    assert_eq!(value["firstStep"], steps - 9);
    assert_eq!(rows.last().expect("a row")[0], steps);
    // Hand-offs from before the window are left out.
    assert_eq!(value["sends"], serde_json::json!([]));
}

#[test]
fn only_a_page_shorter_than_its_run_says_so() {
    let scenario = load_scenario("confirm-lost");
    let mut short = Recorder::keeping(10);
    let mut whole = Recorder::new();
    let _ = execute(&scenario, world_for(&scenario), |world, added| {
        short.observe(world, added);
        whole.observe(world, added);
    });
    let path = std::path::Path::new("t.html");
    assert_eq!(whole.window_note(path), None);
    let note = short.window_note(path).expect("a note");
    assert!(
        note.contains("t.html shows the last 10 of the run's 34 steps (steps 25-34)"),
        "{note}"
    );
}

#[test]
fn the_page_is_one_file_with_its_data_inline() {
    let (value, _, html) = recorded("confirm-lost", sim::timeline::STEPS_MAX);
    let start = html
        .find(r#"<script type="application/json" id="run-data">"#)
        .expect("data")
        + r#"<script type="application/json" id="run-data">"#.len();
    let end = start + html[start..].find("</script>").expect("the data ends");
    let embedded: Value = serde_json::from_str(&html[start..end]).expect("JSON");
    assert_eq!(embedded, value);
    for external in ["src=", "href=", "@import", "url(", "http:", "https:"] {
        assert!(!html.contains(external), "the page names {external}");
    }
}

#[test]
fn html_is_written_whole_byte_identical_and_refused_when_unwritable() {
    let dir = scratch("timeline");
    let first = dir.join("first.html");
    let second = dir.join("second.html");
    for path in [&first, &second] {
        let output = sim(&[
            "run",
            "scenarios/confirm-lost.toml",
            "--quiet",
            "--html",
            path.to_str().expect("UTF-8"),
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    }
    let bytes = std::fs::read(&first).expect("written");
    assert!(bytes.starts_with(b"<!DOCTYPE html>"));
    assert_eq!(bytes, std::fs::read(&second).expect("written"));

    let missing = dir.join("no-such-dir").join("t.html");
    let output = sim(&[
        "run",
        "scenarios/confirm-lost.toml",
        "--html",
        missing.to_str().expect("UTF-8"),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        output.stdout.is_empty(),
        "nothing ran: {}",
        text(&output.stdout)
    );
    let error = text(&output.stderr);
    assert!(
        error.contains("t.html") && error.contains("cannot write"),
        "{error}"
    );
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fuzz_reproducer_gets_its_page_beside_it() {
    let dir = scratch("timeline-fuzz");
    let output = sim(&crate::common::planted_violation(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let page = std::fs::read_to_string(dir.join("repro-1.html")).expect("repro-1.html");
    assert!(dir.join("repro-1.toml").exists());
    assert!(page.contains("<title>sim timeline: repro-1</title>"));
    assert!(page.contains(r#""invariant":"key-bound-to-fingerprint""#));
    let _ = std::fs::remove_dir_all(&dir);
}
