//! Helpers shared by the test modules: scenario discovery, running the
//! binary, scratch directories.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sim::run::{Finished, execute, world_for};
use sim::scenario::Scenario;

/// Every scenario file under `scenarios/`, sorted.
pub fn scenario_files() -> Vec<PathBuf> {
    files_under("scenarios", "toml")
}

/// Every file with extension `ext` under `dir` (relative to the crate
/// root), at any depth, sorted.
pub fn files_under(dir: &str, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, files: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, ext, files);
            } else if path.extension().is_some_and(|found| found == ext) {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(dir),
        ext,
        &mut files,
    );
    files.sort();
    files
}

/// The scenario's path relative to `scenarios/`, without `.toml`.
pub fn scenario_name(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    path.strip_prefix(&root)
        .unwrap_or(path)
        .with_extension("")
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

/// The `sim` binary with `args`, run from the project's root.
pub fn sim_command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sim"));
    command.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// Runs the `sim` binary.
pub fn sim(args: &[&str]) -> Output {
    sim_command(args).output().expect("the sim binary runs")
}

/// `sim fuzz` arguments for a planted bug that is caught at once: on seed
/// 1 the `no-fingerprint-check` mutant fires within 2,000 steps, and the
/// reproducer, `repro-1.toml`, is written into `out`.
pub fn planted_violation(out: &Path) -> Vec<&str> {
    vec![
        "fuzz",
        "--mutant",
        "no-fingerprint-check",
        "--seed",
        "1",
        "--steps",
        "2000",
        "--out",
        out.to_str().expect("a UTF-8 scratch path"),
    ]
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sim-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `scenarios/<name>.toml`, parsed.
pub fn load_scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    sim::scenario::parse::load(&path).unwrap_or_else(|error| panic!("{error}"))
}

/// Runs `scenario` to its end, which must be as it expects (exit 0).
pub fn run_clean(scenario: &Scenario) -> Finished {
    let finished = execute(scenario, world_for(scenario), |_, _| {});
    assert_eq!(
        finished.exit, 0,
        "{:?} {:?}",
        finished.unmet, finished.outcome
    );
    finished
}
