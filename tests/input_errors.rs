//! Bad input never panics: each malformed or invalid scenario gets one clear
//! message naming the file, the line and column where there is one, the key,
//! and what was expected; exit code 2; nothing on stdout; no output file.

use crate::common::{scratch, sim, text};

const GOOD_HEAD: &str = "name = \"bad\"\nseed = 1\nsteps_max = 100\n";

/// (case, file bytes, what stderr must contain besides the file name).
fn cases() -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
    vec![
        ("syntax", b"name = \"bad\"\nseed = \nsteps_max = 1\n".to_vec(), vec![":2:", "not valid TOML"]),
        ("unknown-key", format!("{GOOD_HEAD}colour = \"red\"\n").into_bytes(), vec![":4:1", "`colour`", "unknown key", "expected one of"]),
        ("unknown-knob", format!("{GOOD_HEAD}[config]\nwrkers = 2\n").into_bytes(), vec![":5:1", "`config.wrkers`", "unknown knob"]),
        ("unknown-site", format!("{GOOD_HEAD}[[faults]]\nsite = \"disk.write\"\nkind = \"lost\"\nnth = 1\n").into_bytes(), vec![":5:8", "`faults[0].site`", "unknown fault site", "expected one of"]),
        ("unknown-kind", format!("{GOOD_HEAD}[[faults]]\nsite = \"store.put\"\nkind = \"lost\"\nnth = 1\n").into_bytes(), vec![":6:8", "`faults[0].kind`", "unknown kind", "timeout-after-commit"]),
        ("unknown-request-kind", format!("{GOOD_HEAD}[[requests]]\nat = 0\nkind = \"delete\"\n").into_bytes(), vec![":6:8", "`requests[0].kind`", "unknown request kind", "create"]),
        ("unknown-step", format!("{GOOD_HEAD}[[faults]]\nsite = \"crash\"\nactor = \"worker-1\"\nafter = \"worker.fly\"\n").into_bytes(), vec![":7:9", "`faults[0].after`", "unknown step"]),
        ("wrong-type", b"name = \"bad\"\nseed = \"one\"\nsteps_max = 1\n".to_vec(), vec![":2:8", "`seed`", "expected an integer", "found string"]),
        ("out-of-range", format!("{GOOD_HEAD}[config]\napis = 0\n").into_bytes(), vec![":5:8", "`config.apis`", "expected an integer from 1 to 16", "found 0"]),
        ("missing-key", b"name = \"bad\"\nseed = 1\n".to_vec(), vec!["`steps_max`", "is missing"]),
        ("no-such-actor", format!("{GOOD_HEAD}[[faults]]\nsite = \"crash\"\nactor = \"worker-3\"\nnth = 1\n").into_bytes(), vec![":6:9", "`faults[0].actor`", "does not exist"]),
        ("bad-event", format!("{GOOD_HEAD}[[requests]]\nat = 0\nkind = \"append-event\"\nevent = {{ type = \"TaskStarted\" }}\n").into_bytes(), vec![":7:9", "`requests[0].event`", "not a well-typed TaskEvent"]),
        ("waits-without-wait-ms", format!("{GOOD_HEAD}[[requests]]\nat = 9\nkind = \"bump-handler-version\"\nversion = 2\nwaits = 3\n").into_bytes(), vec![":4:1", "`requests[0].wait_ms`", "is missing", "`waits`"]),
        ("waits-before-zero", format!("{GOOD_HEAD}[[requests]]\nat = 5\nkind = \"bump-handler-version\"\nversion = 2\nwaits = 3\nwait_ms = 10\n").into_bytes(), vec![":4:1", "`requests[0].waits`", "start before 0 ms"]),
        ("empty", Vec::new(), vec!["is empty"]),
        ("whitespace-only", b"  \n\n".to_vec(), vec!["is empty"]),
        ("non-utf8", b"name = \"b\xffad\"\n".to_vec(), vec![":1:10", "not valid UTF-8"]),
    ]
}

#[test]
fn every_bad_scenario_gets_one_clear_error_and_exit_2() {
    let dir = scratch("bad-input");
    for (case, bytes, needles) in cases() {
        let file = dir.join(format!("{case}.toml"));
        std::fs::write(&file, &bytes).expect("write case");
        let dump = dir.join(format!("{case}-dump.json"));
        let trace = dir.join(format!("{case}-trace.jsonl"));
        let output = sim(&[
            "run",
            file.to_str().unwrap(),
            "--dump",
            dump.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{case}: {stderr}");
        assert!(
            output.stdout.is_empty(),
            "{case}: stdout {:?}",
            text(&output.stdout)
        );
        assert!(
            stderr.contains(file.to_str().unwrap()),
            "{case}: names the file: {stderr}"
        );
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{case}: expected {needle:?} in {stderr}"
            );
        }
        assert_eq!(
            stderr.trim_end().lines().count(),
            1,
            "{case}: one message: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
        assert!(!dump.exists(), "{case}: no partial dump");
        assert!(!trace.exists(), "{case}: no partial trace");
        let validate = sim(&["validate", file.to_str().unwrap()]);
        assert_eq!(validate.status.code(), Some(2), "{case}: validate");
        assert_eq!(
            text(&validate.stderr),
            stderr,
            "{case}: validate says the same"
        );
    }
}

#[test]
fn a_missing_file_and_a_directory_are_input_errors() {
    let dir = scratch("missing");
    let missing = dir.join("nope.toml");
    let output = sim(&["run", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("nope.toml") && stderr.contains("no such file"),
        "{stderr}"
    );
    let output = sim(&["run", dir.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("is a directory"), "{stderr}");
}

#[test]
fn bad_flags_are_usage_errors_with_exit_2() {
    let output = sim(&["run", "scenarios/happy-path.toml", "--seed", "minus-one"]);
    assert_eq!(output.status.code(), Some(2));
    let output = sim(&[
        "run",
        "scenarios/happy-path.toml",
        "--mutant",
        "no-such-mutant",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("sim mutants"));
    let output = sim(&["fuzz", "--shard", "3/2"]);
    assert_eq!(output.status.code(), Some(2));
}

/// A fuzz run bumps the handler version one at a time for as long as it
/// lasts (seed 1 passed 1,000 at 213 s of virtual time), and its reproducer
/// writes each bump out: a version past the `handler_version` knob's range
/// is a request sim must read back; below 1 or past 10^12 is refused.
#[test]
fn a_long_run_s_handler_bumps_read_back() {
    let dir = scratch("bump-versions");
    let bump = |version: u64| {
        format!(
            "{GOOD_HEAD}[[requests]]\nat = 0\nkind = \"bump-handler-version\"\nversion = {version}\n"
        )
    };
    let far = dir.join("far.toml");
    std::fs::write(&far, bump(1001)).expect("write scenario");
    let output = sim(&["run", far.to_str().unwrap(), "--quiet"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    for (name, version) in [("zero", 0), ("past-the-top", 1_000_000_000_001)] {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, bump(version)).expect("write scenario");
        let output = sim(&["run", file.to_str().unwrap(), "--quiet"]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains("`requests[0].version`"), "{stderr}");
        assert!(
            stderr.contains("expected an integer from 1 to 1000000000000"),
            "{stderr}"
        );
    }
}
