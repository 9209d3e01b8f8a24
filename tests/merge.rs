//! `sim fuzz merge` refuses what would make a wrong report: a shard merged
//! twice, overlapping seed ranges, sums that wrap, negative or endless
//! seconds, fields that do not fit the seeds: exit 2, naming file and field.

use crate::common::{scratch, sim, text};

/// Two shards of one campaign, as `sim fuzz --json` writes them.
fn shards() -> Vec<serde_json::Value> {
    ["0/2", "1/2"]
        .iter()
        .map(|shard| {
            let output = sim(&[
                "fuzz", "--seed", "5", "--runs", "4", "--steps", "300", "--shard", shard, "--json",
                "--quiet",
            ]);
            serde_json::from_slice(&output.stdout).expect("a summary")
        })
        .collect()
}

fn merge(dir: &std::path::Path, files: &[(&str, &serde_json::Value)]) -> (i32, String, String) {
    let mut args = vec!["fuzz".to_string(), "merge".to_string()];
    for (name, value) in files {
        let path = dir.join(name);
        std::fs::write(&path, value.to_string()).unwrap();
        args.push(path.to_str().unwrap().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = sim(&args);
    (
        output.status.code().unwrap_or(-1),
        text(&output.stdout),
        text(&output.stderr),
    )
}

#[test]
fn merge_refuses_duplicates_overlaps_wraps_and_bad_fields() {
    let dir = scratch("merge");
    let [a, b] = <[serde_json::Value; 2]>::try_from(shards()).unwrap();
    let (code, stdout, stderr) = merge(&dir, &[("a.json", &a), ("b.json", &b)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("runs          4"), "{stdout}");

    let mut overlapping = b.clone();
    overlapping["seeds"] = serde_json::json!(["6..=7"]);
    let mut wrapping = b.clone();
    wrapping["steps"] = u64::MAX.into();
    let mut negative = a.clone();
    negative["seconds"] = (-1.0).into();
    let mut runs = a.clone();
    runs["runs"] = 7.into();
    let mut unknown = a.clone();
    unknown["extra"] = 1.into();
    let mut failure = a.clone();
    failure["failures"] = serde_json::json!([{"seed": 99, "invariant": "converges", "step": 1}]);
    let cases: Vec<(Vec<(&str, &serde_json::Value)>, &str)> = vec![
        // The same shard twice was counted twice without a word.
        (vec![("a.json", &a), ("a2.json", &a)], "`seeds`"),
        (vec![("a.json", &a), ("o.json", &overlapping)], "`seeds`"),
        // A sum past 2^64 wrapped around.
        (vec![("a.json", &a), ("w.json", &wrapping)], "`steps`"),
        (vec![("n.json", &negative)], "`seconds`"),
        (vec![("r.json", &runs)], "`runs`"),
        (vec![("u.json", &unknown)], "extra"),
        (vec![("f.json", &failure)], "`failures[0].seed`"),
    ];
    for (files, needle) in cases {
        let (code, stdout, stderr) = merge(&dir, &files);
        let last = files.last().unwrap().0;
        assert_eq!(code, 2, "{needle}: {stdout}{stderr}");
        assert!(stdout.is_empty(), "{needle}: {stdout}");
        assert!(
            stderr.contains(needle) && stderr.contains(last),
            "{needle}: {stderr}"
        );
    }
}
