//! The command line as a user meets it: help explains every flag, the
//! listing commands list everything, a scenario runs with a story and a
//! summary, and the dump and trace land where asked.

use crate::common::{scratch, sim, text};

#[test]
fn help_explains_every_command_and_flag() {
    let help = text(&sim(&["--help"]).stdout);
    for command in [
        "run",
        "fuzz",
        "validate",
        "config",
        "invariants",
        "mutants",
        "transition",
        "replay-events",
    ] {
        assert!(help.contains(command), "sim --help lists {command}");
    }
    let run = text(&sim(&["run", "--help"]).stdout);
    for flag in ["--seed", "--mutant", "--dump", "--trace", "--quiet"] {
        assert!(run.contains(flag), "sim run --help explains {flag}");
    }
}

#[test]
fn listings_cover_every_knob_invariant_and_mutant() {
    let config = text(&sim(&["config", "--defaults"]).stdout);
    for knob in sim::config::KNOBS {
        assert!(
            config.contains(&format!("{} = ", knob.name)),
            "{}",
            knob.name
        );
    }
    let invariants = text(&sim(&["invariants"]).stdout);
    for invariant in sim::invariants::INVARIANTS {
        assert!(invariants.contains(invariant.id), "{}", invariant.id);
    }
    let mutants = text(&sim(&["mutants"]).stdout);
    for info in sim::mutants::MUTANTS {
        assert!(
            mutants.lines().any(|line| line.starts_with(info.name)),
            "{}",
            info.name
        );
    }
}

#[test]
fn run_prints_a_story_and_a_summary_and_writes_dump_and_trace() {
    let dir = scratch("run");
    let dump = dir.join("dump.json");
    let trace = dir.join("trace.jsonl");
    let output = sim(&[
        "run",
        "scenarios/happy-path.toml",
        "--dump",
        dump.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("worker.complete"), "story: {stdout}");
    assert!(stdout.contains("traceSha256"), "summary: {stdout}");
    let dump: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&dump).unwrap()).unwrap();
    assert_eq!(dump["schemaVersion"], 1);
    assert_eq!(dump["tasks"]["task-1"]["status"], "completed");
    let lines = std::fs::read_to_string(&trace).unwrap();
    let records: Vec<serde_json::Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len() as u64, dump["steps"].as_u64().unwrap());
    assert!(stdout.contains(dump["traceSha256"].as_str().unwrap()));
}

#[test]
fn dump_to_stdout_leaves_only_the_json_there() {
    let output = sim(&["run", "scenarios/happy-path.toml", "--dump", "-"]);
    assert_eq!(output.status.code(), Some(0));
    let dump: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is only JSON");
    assert_eq!(dump["scenario"], "happy-path");
    assert!(text(&output.stderr).contains("traceSha256"));
}

#[test]
fn quiet_leaves_the_story_out_and_seed_overrides_the_file() {
    let quiet = text(&sim(&["run", "scenarios/happy-path.toml", "--quiet"]).stdout);
    assert!(!quiet.contains("worker.complete"));
    assert!(quiet.contains("seed         1"));
    let other = text(&sim(&["run", "scenarios/happy-path.toml", "--quiet", "--seed", "9"]).stdout);
    assert!(other.contains("seed         9"));
}
