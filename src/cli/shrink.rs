//! `sim shrink FILE`: shrink a failing scenario to a smaller one that fails
//! with the same invariant (`shrink/`), print progress on stderr and write
//! the result to `--out FILE` or stdout.

use std::path::{Path, PathBuf};

use crate::error::{EXIT_INPUT, EXIT_OK, InputError};
use crate::scenario::Scenario;
use crate::shrink::{NotShrinkable, Shrunk, shrink};

/// What `sim shrink` was asked to do.
#[derive(clap::Args, Clone, Debug)]
pub struct ShrinkOptions {
    /// Wall-clock budget in seconds; on the cap the best scenario so far is written
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0, value_parser = parse_seconds)]
    pub time: f64,
    /// Write the shrunk scenario to FILE (default: standard output)
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// No progress lines on stderr
    #[arg(long)]
    pub quiet: bool,
}

pub(crate) fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err("expected a positive number of seconds, like 60 or 2.5".into()),
    }
}

/// The shrunk scenario as it is written: named after the original, its
/// description saying what was shrunk and what it breaks.
pub fn shrunk_scenario(original: &Scenario, shrunk: &Shrunk) -> Scenario {
    let mut scenario = shrunk.scenario.clone();
    scenario.name = format!("{}-shrunk", original.name);
    scenario.description = format!(
        "Shrunk by `sim shrink` from {} ({} requests, {} faults) to {} requests and {} faults that still break {}.{} {}",
        original.path.as_deref().unwrap_or(&original.name),
        original.requests.len(),
        original.faults.len(),
        scenario.requests.len(),
        scenario.faults.len(),
        shrunk.invariant,
        if shrunk.stopped_early {
            " The time budget ran out first: smaller may exist."
        } else {
            ""
        },
        original.description
    )
    .trim_end()
    .to_string();
    scenario.sim_version = None;
    scenario.config_sha256 = None;
    scenario
}

/// `sim shrink`.
pub fn shrink_command(file: &Path, options: &ShrinkOptions) -> u8 {
    let scenario = match crate::scenario::parse::load(file) {
        Ok(scenario) => scenario,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    // `--out` is checked and opened before the search, as `sim run` does
    // with its outputs: a directory, the input itself, a device that
    // refuses writes is exit 2 before any work.
    let mut out_file = match &options.out {
        Some(path) => match crate::cli::outputs::open_all(&[("--out", path)], &[file]) {
            Ok(mut opened) => opened.pop(),
            Err(error) => {
                crate::errln!("{error}");
                return EXIT_INPUT;
            }
        },
        None => None,
    };
    for warning in crate::scenario::write::version_warnings(&scenario) {
        crate::errln!("warning: {}", crate::escape::escape(&warning));
    }
    let quiet = options.quiet;
    let mut progress = |line: &str| {
        if !quiet {
            crate::errln!("{line}");
        }
    };
    let stopwatch = crate::stopwatch::Stopwatch::start();
    let shrunk = match shrink(&scenario, options.time, &mut progress) {
        Ok(shrunk) => shrunk,
        Err(NotShrinkable::Passes) => {
            crate::errln!(
                "{}",
                InputError::new("nothing to shrink: the scenario converges with no violation")
                    .in_file(file)
            );
            return EXIT_INPUT;
        }
    };
    let written = shrunk_scenario(&scenario, &shrunk);
    let text = crate::scenario::write::to_toml_compact(&written);
    crate::errln!(
        "shrunk: {} requests, {} faults, {} lines -> {} requests, {} faults, {} lines; still breaks {} ({} runs, {:.1}s){}",
        scenario.requests.len(),
        scenario.faults.len(),
        scenario_lines(&scenario),
        written.requests.len(),
        written.faults.len(),
        text.lines().count(),
        shrunk.invariant,
        shrunk.runs,
        stopwatch.seconds(),
        if shrunk.stopped_early {
            "; stopped at the time cap: this is the best so far"
        } else {
            ""
        }
    );
    match out_file.as_mut() {
        Some(output) => {
            use std::io::Write as _;
            if let Err(error) = output
                .file
                .write_all(text.as_bytes())
                .and_then(|()| output.file.flush())
            {
                crate::cli::outputs::remove_created(std::slice::from_ref(output));
                crate::errln!(
                    "{}",
                    InputError::new(format!("cannot write: {error}")).in_file(&output.path)
                );
                return EXIT_INPUT;
            }
        }
        None => crate::out!("{text}"),
    }
    EXIT_OK
}

/// Lines of a scenario as a reproducer writes it (the file's own lines
/// when it has a path).
fn scenario_lines(scenario: &Scenario) -> usize {
    scenario
        .path
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .map_or_else(
            || crate::scenario::write::to_toml(scenario).lines().count(),
            |text| text.lines().count(),
        )
}
