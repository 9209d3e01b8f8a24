//! `sim run FILE`: run one scenario, print its story and summary, write the
//! dump and the trace when asked, judge the scenario's expectations, and
//! return the exit code of DESIGN §8.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::error::{EXIT_INPUT, EXIT_NOT_CONVERGED, EXIT_OK, EXIT_VIOLATION, InputError};
use crate::faults::FaultRates;
use crate::mutants::Mutant;
use crate::output::Guarded;
use crate::report::{summary, violation_report};
use crate::scenario::Scenario;
use crate::simulate::{Outcome, simulate};
use crate::trace::TraceFile;
use crate::world::World;

/// What `sim run` was asked to do.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunOptions {
    /// Override the scenario's seed
    #[arg(long)]
    pub seed: Option<u64>,
    /// Switch off one protocol guard (see `sim mutants`)
    #[arg(long, value_parser = crate::cli::parse_mutant)]
    pub mutant: Option<Mutant>,
    /// Write the final dump as canonical JSON to FILE (`-`: stdout, which then holds only the JSON)
    #[arg(long, value_name = "FILE")]
    pub dump: Option<PathBuf>,
    /// Write every trace record as JSON lines to FILE
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Leave the step-by-step story out; print only the summary
    #[arg(long)]
    pub quiet: bool,
    /// Write the run as a self-contained HTML timeline to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// A finished run: the world, how it ended, and how it measured up.
pub struct Finished {
    pub world: World,
    pub outcome: Outcome,
    pub dump: serde_json::Value,
    /// Expectation failures (empty when the run ended as expected).
    pub unmet: Vec<String>,
    pub exit: u8,
}

/// Runs a validated scenario to the end and judges it. `on_step` sees the
/// world after each step.
pub fn execute(
    scenario: &Scenario,
    mut world: World,
    on_step: impl FnMut(&World, u64),
) -> Finished {
    let outcome = simulate(&mut world, scenario.steps_max, on_step);
    let name = scenario.name.clone();
    let dump = world.dump(&name);
    let mut unmet = Vec::new();
    for (pointer, expected) in &scenario.expect.facts {
        match dump.pointer(pointer) {
            Some(actual) if actual == expected => {}
            Some(actual) => unmet.push(format!("{pointer} is {actual}, expected {expected}")),
            None => unmet.push(format!(
                "{pointer} is absent from the dump, expected {expected}"
            )),
        }
    }
    let fired = outcome.fired();
    let exit = match (&scenario.expect.violation, fired) {
        (Some(expected), Some(fired)) if expected == fired => {
            if unmet.is_empty() {
                EXIT_OK
            } else {
                EXIT_VIOLATION
            }
        }
        (Some(expected), Some(fired)) => {
            unmet.push(format!("expected `{expected}` to fire, but `{fired}` did"));
            EXIT_VIOLATION
        }
        (Some(expected), None) => {
            unmet.push(format!(
                "expected `{expected}` to fire, but the run converged with no violation"
            ));
            EXIT_VIOLATION
        }
        (None, Some(_)) if outcome.violation.is_some() => EXIT_VIOLATION,
        (None, Some(_)) => EXIT_NOT_CONVERGED,
        (None, None) if unmet.is_empty() => EXIT_OK,
        (None, None) => EXIT_VIOLATION,
    };
    Finished {
        world,
        outcome,
        dump,
        unmet,
        exit,
    }
}

/// Builds the world a scenario describes (no random faults, no workload).
pub fn world_for(scenario: &Scenario) -> World {
    World::new(scenario, &FaultRates::none(), None)
}

/// The command that reproduces a run of this scenario.
pub fn reproduce_command(scenario: &Scenario) -> String {
    let path = scenario.path.clone().unwrap_or_else(|| "<scenario>".into());
    let mut command = format!("sim run {path} --seed {}", scenario.seed);
    if let Some(mutant) = scenario.mutant {
        command.push_str(&format!(" --mutant {}", mutant.name()));
    }
    command
}

fn open_output(path: &Path) -> Result<std::fs::File, InputError> {
    std::fs::File::create(path).map_err(|error| cannot_write(path, &error))
}

fn cannot_write(path: &Path, error: &std::io::Error) -> InputError {
    InputError::new(format!("cannot write: {error}")).in_file(path)
}

/// `sim run`.
pub fn run_command(file: &Path, options: &RunOptions) -> u8 {
    let mut scenario = match crate::scenario::parse::load(file) {
        Ok(scenario) => scenario,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    if let Some(seed) = options.seed {
        scenario.seed = seed;
    }
    if options.mutant.is_some() {
        scenario.mutant = options.mutant;
    }
    crate::scenario::write::warn_on_version_mismatch(&scenario);
    let dump_to_stdout = options.dump.as_deref() == Some(Path::new("-"));
    let mut world = world_for(&scenario);
    if let Some(path) = &options.trace {
        match open_output(path) {
            Ok(file) => world.trace.lines = Some(TraceFile::new(path, file)),
            Err(error) => {
                crate::errln!("{error}");
                return EXIT_INPUT;
            }
        }
    }
    if let Some(path) = &options.html
        && let Err(error) = crate::timeline::check_writable(path)
    {
        crate::errln!("{error}");
        return EXIT_INPUT;
    }
    let mut timeline = options
        .html
        .as_ref()
        .map(|_| crate::timeline::Recorder::new());
    let story = !options.quiet;
    let colour = !dump_to_stdout && std::io::stdout().is_terminal();
    let mut out: Box<dyn Write> = if dump_to_stdout {
        Box::new(Guarded::new("standard error", std::io::stderr().lock()))
    } else {
        Box::new(Guarded::new("standard output", std::io::stdout().lock()))
    };
    let mut finished = execute(&scenario, world, |world, added| {
        if let Some(timeline) = timeline.as_mut() {
            timeline.observe(world, added);
        }
        if !story {
            return;
        }
        for record in world.trace.tail(added as usize) {
            let line = record.story_line(colour);
            let _ = writeln!(out, "{line}");
        }
        if let Some(violation) = &world.violation {
            let mark = format!(
                "!!! VIOLATION {} at step {}",
                violation.invariant, violation.step
            );
            let _ = if colour {
                writeln!(out, "\x1b[1;31m{mark}\x1b[0m")
            } else {
                writeln!(out, "{mark}")
            };
        }
    });
    // The whole trace is on disk before anything is said about the run, so
    // a trace that cannot be written ends sim before the summary.
    finished.world.trace.close_lines();
    let dump_text = options
        .dump
        .as_ref()
        .map(|_| serde_json::to_string_pretty(&finished.dump).expect("a dump serializes") + "\n");
    // Likewise the dump file: written whole before the summary, or not at all.
    if let (Some(path), Some(text), false) = (&options.dump, &dump_text, dump_to_stdout)
        && let Err(error) = std::fs::write(path, text)
    {
        crate::output::remove_partial(path);
        if let Some(html) = &options.html {
            crate::output::remove_partial(html);
        }
        crate::errln!("{}", cannot_write(path, &error));
        return EXIT_INPUT;
    }
    if let (Some(path), Some(timeline)) = (&options.html, &timeline) {
        let info = crate::timeline::PageInfo {
            title: &scenario.name,
            description: &scenario.description,
            command: &reproduce_command(&scenario),
        };
        if let Err(error) = crate::timeline::write_timeline(
            path,
            &finished.world,
            &finished.outcome,
            timeline,
            &info,
        ) {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
        if let Some(note) = timeline.window_note(path) {
            crate::errln!("{note}");
        }
    }
    let name = match &scenario.path {
        Some(path) => format!("{} ({path})", scenario.name),
        None => scenario.name.clone(),
    };
    if story {
        let _ = writeln!(out);
    }
    let _ = write!(
        out,
        "{}",
        summary(&finished.world, &name, &finished.outcome)
    );
    if let Some(violation) = &finished.outcome.violation {
        let _ = write!(
            out,
            "\n{}",
            violation_report(&finished.world, violation, &reproduce_command(&scenario))
        );
    }
    for unmet in &finished.unmet {
        let _ = writeln!(out, "EXPECTATION FAILED: {unmet}");
    }
    if let Some(expected) = &scenario.expect.violation
        && finished.exit == EXIT_OK
    {
        let _ = writeln!(
            out,
            "expected violation `{expected}` fired, as the scenario says"
        );
    }
    for fault in finished.world.faults.unfired() {
        let _ = writeln!(
            out,
            "warning: scripted fault {}/{} never fired",
            fault.site.as_str(),
            fault.kind.as_str()
        );
    }
    drop(out);
    if let (Some(text), true) = (&dump_text, dump_to_stdout) {
        crate::out!("{text}");
    }
    finished.exit
}
