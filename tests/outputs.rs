//! Output paths are checked before the run: a bad one is exit 2 with
//! nothing on standard output and no other file written, and an input is
//! never overwritten.

use crate::common::{scratch, sim, text};

fn refused(args: &[&str], needle: &str) {
    let output = sim(args);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "{args:?}: the story was told first: {}",
        text(&output.stdout)
    );
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

/// `--dump /dev/full` printed the whole story, then exited 2.
#[test]
fn a_device_that_refuses_writes_is_refused_before_the_story() {
    if std::path::Path::new("/dev/full").exists() {
        refused(
            &["run", "scenarios/happy-path.toml", "--dump", "/dev/full"],
            "No space left",
        );
    }
}

/// `--dump DIR --trace t.jsonl` refused the dump after the run but had
/// written t.jsonl.
#[test]
fn a_directory_is_refused_and_no_other_output_is_written() {
    let dir = scratch("outputs-dir");
    let trace = dir.join("t.jsonl");
    refused(
        &[
            "run",
            "scenarios/happy-path.toml",
            "--dump",
            dir.to_str().unwrap(),
            "--trace",
            trace.to_str().unwrap(),
        ],
        "is a directory",
    );
    assert!(!trace.exists(), "the trace was written");
    // A later output that cannot be opened removes the one created first.
    if std::path::Path::new("/dev/full").exists() {
        let dump = dir.join("d.json");
        refused(
            &[
                "run",
                "scenarios/happy-path.toml",
                "--dump",
                dump.to_str().unwrap(),
                "--trace",
                "/dev/full",
            ],
            "/dev/full: cannot write",
        );
        assert!(!dump.exists(), "the dump file was left behind");
    }
}

/// `--dump` naming the scenario overwrote it with the dump (exit 0); so
/// would a link to it, or both outputs naming one file.
#[test]
fn an_input_or_one_file_named_twice_is_never_overwritten() {
    let dir = scratch("outputs-input");
    let scenario = dir.join("s.toml");
    let original = std::fs::read("scenarios/happy-path.toml").unwrap();
    std::fs::write(&scenario, &original).unwrap();
    let path = scenario.to_str().unwrap();
    refused(&["run", path, "--dump", path], "input");
    let dotted = format!("{}/./s.toml", dir.display());
    refused(&["run", path, "--trace", &dotted], "input");
    #[cfg(unix)]
    {
        let link = dir.join("link.toml");
        std::os::unix::fs::symlink(&scenario, &link).unwrap();
        refused(&["run", path, "--dump", link.to_str().unwrap()], "input");
    }
    assert_eq!(std::fs::read(&scenario).unwrap(), original);
    let same = dir.join("out.json");
    let same = same.to_str().unwrap();
    refused(&["run", path, "--dump", same, "--trace", same], "same file");
    assert!(!std::path::Path::new(same).exists());
}

/// A refused run leaves an existing output file as it was.
#[test]
fn an_existing_output_is_kept_when_the_run_is_refused() {
    let dir = scratch("outputs-keep");
    let dump = dir.join("d.json");
    std::fs::write(&dump, "keep me").unwrap();
    refused(
        &[
            "run",
            "scenarios/happy-path.toml",
            "--dump",
            dump.to_str().unwrap(),
            "--trace",
            dir.to_str().unwrap(),
        ],
        "is a directory",
    );
    assert_eq!(std::fs::read_to_string(&dump).unwrap(), "keep me");
    let output = sim(&[
        "run",
        "scenarios/happy-path.toml",
        "--quiet",
        "--dump",
        dump.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0));
    let written = std::fs::read_to_string(&dump).unwrap();
    assert!(
        written.starts_with('{') && written.ends_with("}\n"),
        "{written}"
    );
}

/// A write that fails during the run (here standard output, a full disk)
/// is exit 2, and the outputs this run created are removed with it.
#[cfg(target_os = "linux")]
#[test]
fn a_write_failing_during_the_run_removes_the_outputs_it_created() {
    let dir = scratch("outputs-late");
    let trace = dir.join("t.jsonl");
    let output = crate::common::sim_command(&[
        "run",
        "scenarios/happy-path.toml",
        "--trace",
        trace.to_str().unwrap(),
    ])
    .stdout(std::fs::File::create("/dev/full").unwrap())
    .output()
    .unwrap();
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("standard output"), "{stderr}");
    assert!(!trace.exists(), "the trace was left behind");
}
