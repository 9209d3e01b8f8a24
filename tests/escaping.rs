//! Text from the input never reaches the terminal raw: a scenario's name,
//! a key or a value echoed in an error, with escape sequences, C1
//! controls, line separators or bidi overrides, is shown escaped.

use crate::common::{scratch, sim, text};

/// Characters that drive a terminal or reorder what it shows.
fn raw_controls(output: &str) -> Vec<char> {
    output
        .chars()
        .filter(|c| *c != '\n' && sim::escape::is_unsafe(*c))
        .collect()
}

#[test]
fn names_keys_and_values_from_a_scenario_are_shown_escaped() {
    let dir = scratch("escaping");
    let evil = "\\u001b]0;owned\\u0007\\u009b2J\\u2028\\u202e";
    let file = dir.join("evil.toml");
    std::fs::write(
        &file,
        format!("name = \"x{evil}\"\nseed = 1\nsteps_max = 100\n[expect]\n\"/y{evil}\" = 1\n"),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    for args in [vec!["run", path, "--quiet"], vec!["run", path]] {
        let output = sim(&args);
        let stdout = text(&output.stdout);
        assert_eq!(output.status.code(), Some(1), "{stdout}");
        assert_eq!(raw_controls(&stdout), Vec::<char>::new(), "{stdout}");
        assert!(
            stdout.contains("x\\x1b]0;owned\\x07\\x9b2J\\u{2028}\\u{202e}"),
            "{stdout}"
        );
        assert!(
            stdout.contains("EXPECTATION FAILED: /y\\x1b]0;owned"),
            "{stdout}"
        );
    }
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        format!("name = \"x\"\nseed = 1\nsteps_max = 100\n[config]\n\"w{evil}\" = 1\n"),
    )
    .unwrap();
    for args in [
        vec!["run", bad.to_str().unwrap()],
        vec!["validate", bad.to_str().unwrap()],
    ] {
        let output = sim(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{stderr}");
        assert!(stderr.contains("`config.w\\x1b]0;owned"), "{stderr}");
    }
}

#[test]
fn a_bad_flag_value_and_a_bad_json_line_are_echoed_escaped() {
    let output = sim(&["fuzz", "--mutant", "x\u{1b}]0;owned\u{7}\u{2028}"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{stderr}");
    let dir = scratch("escaping-history");
    let file = dir.join("h\u{1b}[2J.jsonl");
    std::fs::write(&file, "{\"eventId\":\"e\u{2028}\",\"taskId\":7}\n").unwrap();
    let output = sim(&["replay-events", file.to_str().unwrap()]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(raw_controls(&stderr), Vec::<char>::new(), "{stderr}");
    assert!(stderr.contains("h\\x1b[2J.jsonl"), "{stderr}");
}
