//! The command line as a user meets it: help explains every flag, the
//! listing commands list everything, a scenario runs with a story and a
//! summary, and the dump and trace land where asked.

use crate::common::{planted_violation, scratch, sim, sim_command, text};

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

/// `sim bench --json` (quick, two rounds) prints one object per workload
/// with every field the speed figures are quoted from; the human report
/// prints the target ratios. Figures are not asserted: timing belongs to
/// the benchmark, not to tests.
#[test]
fn bench_reports_every_figure() {
    let only = [
        "--only",
        "fuzz-1e3",
        "--only",
        "fuzz-1e4-invariants-off",
        "--only",
        "fuzz-1e4",
        "--only",
        "fuzz-1e4-trace-file",
    ];
    let mut args = vec!["bench", "--quick", "--repeat", "2", "--json"];
    args.extend(only);
    let output = sim(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let figures: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let figures = figures.as_array().expect("an array of workloads");
    let names: Vec<&str> = figures
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "fuzz-1e3",
            "fuzz-1e4",
            "fuzz-1e4-invariants-off",
            "fuzz-1e4-trace-file"
        ]
    );
    for figure in figures {
        for field in [
            "steps",
            "stepsPerSecond",
            "nsPerStep",
            "tasksPerSecond",
            "peakRssBytes",
        ] {
            assert!(figure[field].as_f64().unwrap() > 0.0, "{field} in {figure}");
        }
        assert_eq!(figure["repeats"], 2);
        assert_eq!(figure["nsPerStepByRound"].as_array().unwrap().len(), 2);
    }
    let traces: Vec<&str> = figures
        .iter()
        .map(|f| f["trace"].as_str().unwrap())
        .collect();
    assert_eq!(traces, ["off", "off", "off", "on"]);
    assert_eq!(figures[1]["invariants"], "on");
    assert_eq!(figures[2]["invariants"], "off");
    assert_eq!(figures[1]["steps"], figures[2]["steps"]);
    // The steps counted are the steps taken, by name; a wake that found
    // nothing to do is counted apart. Checking the invariants changes none.
    for figure in figures {
        let by_name = figure["stepsByName"].as_object().expect("steps by name");
        let sum: u64 = by_name.values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(Some(sum), figure["steps"].as_u64(), "{figure}");
        assert!(by_name.contains_key("worker.register"), "{figure}");
        assert!(figure["idleWakes"].as_u64().unwrap() > 0, "{figure}");
    }
    // Nor does writing every record out (`-trace-file`, as `sim run
    // --trace` does).
    for other in [&figures[2], &figures[3]] {
        assert_eq!(figures[1]["stepsByName"], other["stepsByName"]);
        assert_eq!(figures[1]["idleWakes"], other["idleWakes"]);
    }

    let mut args = vec!["bench", "--quick", "--repeat", "1"];
    args.extend(only);
    let report = text(&sim(&args).stdout);
    for line in [
        "cost per step fuzz-1e4 / fuzz-1e3: ",
        "steps/s with every invariant, fuzz-1e4: ",
        "peak RSS of fuzz-1e4: ",
        "invariants on / off (fuzz-1e4): ",
        "steps by kind, fuzz-1e4: 10000 steps; ",
        "\n  worker ",
        "\n  broker ",
    ] {
        assert!(report.contains(line), "{line} in\n{report}");
    }
}

#[test]
fn bench_refuses_an_unknown_workload() {
    let output = sim(&["bench", "--quick", "--only", "fuzz-7"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let error = text(&output.stderr);
    assert!(
        error.contains("--only fuzz-7") && error.contains("fuzz-1e3"),
        "{error}"
    );
}

/// Runs sim with a standard output whose reader has already gone.
fn with_stdout_closed(args: &[&str]) -> std::process::Output {
    let mut child = sim_command(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sim starts");
    drop(child.stdout.take());
    child.wait_with_output().expect("sim ends")
}

/// A reader that stops early (`sim mutants | head -1`) silences the rest of
/// the output, never panics, and leaves the verdict, the trace, the dump and
/// the reproducers as they would have been.
#[test]
fn a_closed_pipe_silences_output_but_not_the_verdict() {
    for args in [&["mutants"][..], &["config", "--defaults"]] {
        let output = with_stdout_closed(args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
    let dir = scratch("closed-pipe");
    let (trace, dump) = (dir.join("trace.jsonl"), dir.join("dump.json"));
    let output = with_stdout_closed(&[
        "run",
        "scenarios/confirm-lost.toml",
        "--trace",
        trace.to_str().unwrap(),
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let dump: serde_json::Value = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    assert_eq!(dump["tasks"]["task-1"]["status"], "completed");
    assert!(std::fs::read_to_string(&trace).unwrap().lines().count() > 10);

    let output = with_stdout_closed(&planted_violation(&dir));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(dir.join("repro-1.toml").exists());
}

/// Output that cannot be written (a full disk) is an error naming the file,
/// exit 2, and nothing on standard output.
#[cfg(target_os = "linux")]
#[test]
fn an_unwritable_trace_or_dump_is_an_error_with_no_partial_output() {
    for flag in ["--trace", "--dump"] {
        let output = sim(&[
            "run",
            "scenarios/confirm-lost.toml",
            "--quiet",
            flag,
            "/dev/full",
        ]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag}: {stderr}");
        assert!(output.stdout.is_empty(), "{flag}: {}", text(&output.stdout));
        assert!(
            stderr.contains("/dev/full: cannot write"),
            "{flag}: {stderr}"
        );
    }
    assert!(
        std::fs::metadata("/dev/full").is_ok_and(|meta| !meta.is_file()),
        "the device is left alone"
    );
}
