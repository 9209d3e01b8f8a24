//! `sim replay-events --task ID`: the history is of the task it names, an
//! event of another task is an invalid history at its own line, an empty
//! history is the task's initial state, and a malformed line is named by
//! line and column.

use crate::common::{scratch, sim, text};

fn started(task: &str, sequence: i64) -> String {
    format!(
        "{{\"eventId\":\"evt-{sequence}\",\"taskId\":\"{task}\",\"sequence\":{sequence},\"type\":\"TaskStarted\",\"attempt\":1,\"workerId\":\"worker-a\",\"leaseUntilEpochMs\":1000}}\n"
    )
}

fn history(name: &str, lines: &[String]) -> std::path::PathBuf {
    // A directory per history: tests run in parallel, and a scratch
    // directory is emptied when it is made.
    let path = scratch(&format!("replay-task-{name}")).join(name);
    std::fs::write(&path, lines.concat()).unwrap();
    path
}

fn replay(args: &[&str]) -> (i32, serde_json::Value, String) {
    let mut all = vec!["replay-events"];
    all.extend_from_slice(args);
    let output = sim(&all);
    let stdout = text(&output.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        output.status.code().unwrap_or(-1),
        value,
        text(&output.stderr),
    )
}

/// A history whose events all belong to another task was accepted: the
/// task came from line 1. Named with --task, line 1 is TASK_ID_MISMATCH,
/// exit 1.
#[test]
fn a_history_of_another_task_is_a_task_id_mismatch_at_line_1() {
    let file = history("other.jsonl", &[started("task-7", 1)]);
    let path = file.to_str().unwrap();
    let (code, report, stderr) = replay(&[path, "--task", "task-1"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["invalid"]["reason"], "TASK_ID_MISMATCH");
    assert_eq!(report["invalid"]["line"], 1);
    assert_eq!(report["stateBefore"]["taskId"], "task-1");
    // Without --task the first event's task is the history's.
    let (code, report, _) = replay(&[path]);
    assert_eq!(code, 0);
    assert_eq!(report["taskId"], "task-7");
}

/// A foreign event blamed the line after it, as an input error (exit 2);
/// it is an invalid history at its own line.
#[test]
fn a_foreign_event_is_blamed_at_its_own_line() {
    let file = history(
        "mixed.jsonl",
        &[started("task-7", 1), "\n".into(), started("task-1", 2)],
    );
    let path = file.to_str().unwrap();
    let (code, report, stderr) = replay(&[path, "--task", "task-1"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["invalid"]["reason"], "TASK_ID_MISMATCH");
    assert_eq!(report["invalid"]["line"], 1);
    let (code, report, stderr) = replay(&[path]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(report["invalid"]["reason"], "TASK_ID_MISMATCH");
    assert_eq!(report["invalid"]["line"], 3);
    assert_eq!(report["invalid"]["eventId"], "evt-2");
}

/// An empty history is the initial state of the task --task names; with
/// no task named there is no task to start from (exit 2).
#[test]
fn an_empty_history_is_the_initial_state_of_the_named_task() {
    let file = history("empty.jsonl", &["\n".into()]);
    let path = file.to_str().unwrap();
    let (code, state, stderr) = replay(&[path, "--task", "task-3"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(state["taskId"], "task-3");
    assert_eq!(state["status"], "queued");
    assert_eq!(state["version"], 0);
    let (code, _, stderr) = replay(&[path]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no events") && stderr.contains("--task"),
        "{stderr}"
    );
}

/// A line error names its column too.
#[test]
fn a_malformed_line_is_named_by_line_and_column() {
    let file = history(
        "typed.jsonl",
        &[
            started("task-1", 1),
            "{\"eventId\":\"evt-2\",\"taskId\":5}\n".into(),
        ],
    );
    let (code, _, stderr) = replay(&[file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains(&format!("{}:2:20: event.taskId", file.display())),
        "{stderr}"
    );
}
