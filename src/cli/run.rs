//! `sim run FILE`: run one scenario, print its story and summary, write the
//! dump and the trace when asked, judge the scenario's expectations, and
//! return the exit code of DESIGN §8.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::error::{EXIT_INPUT, EXIT_OK, InputError};
use crate::escape::{escape, escape_lines};
use crate::mutants::Mutant;
use crate::output::Guarded;
use crate::report::{summary, violation_report};
use crate::run::{execute, reproduce_command, world_for};
use crate::trace::TraceFile;

/// What `sim run` was asked to do.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunOptions {
    /// Override the scenario's seed
    #[arg(long)]
    pub seed: Option<u64>,
    /// Switch off one protocol guard (see `sim mutants`)
    #[arg(long, value_parser = crate::cli::args::parse_mutant)]
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
    /// After the summary, name the transitions, rejections, races and sometimes-targets the run did not reach
    #[arg(long)]
    pub coverage: bool,
    /// Write the run as a self-contained HTML timeline to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    let dump_to_stdout = options.dump.as_deref() == Some(Path::new("-"));
    // Every output is checked and opened before the run, so a bad one is
    // exit 2 before the story, with nothing else written.
    let mut wanted: Vec<(&str, &Path)> = Vec::new();
    if let Some(path) = options.dump.as_deref().filter(|_| !dump_to_stdout) {
        wanted.push(("--dump", path));
    }
    if let Some(path) = options.trace.as_deref() {
        wanted.push(("--trace", path));
    }
    if let Some(path) = options.html.as_deref() {
        wanted.push(("--html", path));
    }
    let mut opened = match crate::cli::outputs::open_all(&wanted, &[file]) {
        Ok(opened) => opened,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    // The page is written whole after the run (`write_timeline`); its file
    // is created here only so that a bad path is refused up front.
    let _html_file = options.html.as_ref().and_then(|_| opened.pop());
    let trace_file = options.trace.as_ref().and_then(|_| opened.pop());
    let dump_file = opened.pop();
    for warning in crate::scenario::write::version_warnings(&scenario) {
        crate::errln!("warning: {warning}");
    }
    let mut world = world_for(&scenario);
    if let Some(output) = trace_file {
        world.trace.lines = Some(TraceFile::new(&output.path, output.file));
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
    if story {
        let _ = writeln!(out, "{}", crate::trace::Record::story_header());
    }
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
    if let Err(error) = finished.world.trace.close_lines() {
        crate::output::remove_created();
        crate::errln!("{error}");
        return EXIT_INPUT;
    }
    let dump_text = options
        .dump
        .as_ref()
        .map(|_| serde_json::to_string_pretty(&finished.dump).expect("a dump serializes") + "\n");
    // Likewise the dump file: written whole before the summary, or not at all.
    if let (Some(mut output), Some(text)) = (dump_file, &dump_text)
        && let Err(error) = output
            .file
            .write_all(text.as_bytes())
            .and_then(|()| output.file.flush())
    {
        crate::output::remove_partial(&output.path);
        crate::output::remove_created();
        crate::errln!("{}", cannot_write(&output.path, &error));
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
            crate::output::remove_created();
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
    // The name, the path and the expectations came from the input: shown
    // escaped, so a scenario cannot drive the terminal.
    let text = summary(&finished.world, &name, &finished.outcome);
    let _ = write!(out, "{}", escape_lines(&text));
    if options.coverage {
        let counters = &finished.world.counters;
        let missing = crate::report::not_reached(
            |status, event| counters.transitions.contains_key(&(status, event)),
            |reason| counters.rejections.get(reason).is_some_and(|n| *n > 0),
            |race| counters.races.get(race).is_some_and(|n| *n > 0),
        );
        let _ = write!(out, "{}", crate::report::not_reached_lines(&missing));
        let sometimes: Vec<&str> = crate::report::SOMETIMES
            .iter()
            .copied()
            .filter(|target| counters.sometimes.get(target).is_none_or(|n| *n == 0))
            .collect();
        if !sometimes.is_empty() {
            let _ = writeln!(out, "sometimes not reached: {}", sometimes.join(", "));
        }
    }
    if let Some(violation) = &finished.outcome.violation {
        // The causal slice reads the whole trace: a second, identical run.
        let records = crate::run::full_trace(&scenario);
        let report = violation_report(
            &finished.world,
            violation,
            &reproduce_command(&scenario),
            Some(&records),
        );
        let _ = write!(out, "\n{}", escape_lines(&report));
    }
    for unmet in &finished.unmet {
        let _ = writeln!(out, "EXPECTATION FAILED: {}", escape(unmet));
    }
    if let Some(expected) = &scenario.expect.violation
        && finished.exit == EXIT_OK
    {
        let _ = writeln!(
            out,
            "expected violation `{expected}` fired, as the scenario says"
        );
    }
    let expected = scenario.expect.facts.len() + usize::from(scenario.expect.violation.is_some());
    if expected > 0 {
        let _ = writeln!(
            out,
            "expect: {} of {expected} held",
            expected.saturating_sub(finished.unmet.len())
        );
    }
    let total = scenario.faults.len();
    for (index, fault) in finished.world.faults.unfired_indexed() {
        let _ = writeln!(
            out,
            "warning: scripted fault {} of {total} ({}) never fired",
            index + 1,
            fault.describe()
        );
    }
    if let Some(missed) = &finished.world.schedule_missed {
        let _ = writeln!(out, "warning: {missed}");
    }
    // A scripted request whose client is down at its time is dropped, as a
    // real client's would be: the scenario most likely meant otherwise.
    if let Some(answers) = &finished.world.answers {
        for (index, entry) in answers.dropped() {
            let _ = writeln!(
                out,
                "warning: request {} ({} {}) at {} ms was dropped: {} was down (dump: /requests/{index})",
                index + 1,
                entry["kind"].as_str().unwrap_or("?"),
                escape(
                    entry["key"]
                        .as_str()
                        .or(entry["task"].as_str())
                        .unwrap_or("")
                ),
                entry["issuedMs"],
                entry["client"].as_str().unwrap_or("its client"),
            );
        }
    }
    drop(out);
    if let (Some(text), true) = (&dump_text, dump_to_stdout) {
        crate::out!("{text}");
    }
    finished.exit
}
