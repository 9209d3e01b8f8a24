//! `sim check FILE`: explore every schedule of a scenario's world within a
//! fault budget (`check/`), print the report (or one JSON object), and
//! write the first violation's counterexample as a scenario.

use std::path::{Path, PathBuf};

use crate::check::counterexample::counterexample;
use crate::check::explore::explore;
use crate::check::options::{CheckOptions, Ended, Explored, Found};
use crate::check::prepare::{initial_world, prepare};
use crate::error::{EXIT_INPUT, EXIT_OK, EXIT_VIOLATION, InputError};
use crate::escape::escape;
use crate::faults::{FaultKind, Site, catalogue};
use crate::mutants::Mutant;

/// What `sim check` was asked to do.
#[derive(clap::Args, Clone, Debug)]
pub struct CheckArgs {
    /// Faults injected on any one path, at most (the scenario's own scripted faults fire as written and do not count)
    #[arg(long, value_name = "F", default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=16))]
    pub faults: u32,
    /// Wakes fired ahead of an earlier-due one on any one path, at most (a timer before its time is reached, an actor paused past a timer); `any` lifts the bound
    #[arg(long, value_name = "E", default_value = "1", value_parser = parse_early)]
    pub early: Early,
    /// Fault kinds that may be injected: comma-separated `site` (all its kinds) or `site/kind`, like `crash,store.put/corrupt` (default: the whole catalogue)
    #[arg(long, value_name = "LIST", value_parser = parse_kinds)]
    pub kinds: Option<Kinds>,
    /// Transitions on any one path, at most (default: no bound)
    #[arg(long, value_name = "D", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub depth: Option<u32>,
    /// Unique states to keep, at most; the search stops there and says so
    #[arg(long, value_name = "N", default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_states: u64,
    /// Threads expanding each breadth-first level (the result is the same with any number)
    #[arg(long, value_name = "J", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub jobs: u64,
    /// Switch off one protocol guard (see `sim mutants`)
    #[arg(long, value_parser = crate::cli::args::parse_mutant)]
    pub mutant: Option<Mutant>,
    /// Drop the scenario's scripted faults: the checker alone injects faults
    #[arg(long)]
    pub no_scripted_faults: bool,
    /// Write a counterexample to FILE (default: counterexample.toml)
    #[arg(long, value_name = "FILE", default_value = "counterexample.toml")]
    pub out: PathBuf,
    /// Also write the counterexample's run as an HTML timeline to FILE (as `sim run --html` does)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print one JSON object instead of the report
    #[arg(long)]
    pub json: bool,
    /// Print only the verdict line
    #[arg(long)]
    pub quiet: bool,
}

/// The bound on early wakes: a number, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Early(pub Option<u32>);

fn parse_early(text: &str) -> Result<Early, String> {
    if text == "any" {
        return Ok(Early(None));
    }
    match text.parse::<u32>() {
        Ok(bound) if bound <= 64 => Ok(Early(Some(bound))),
        _ => Err("expected a number from 0 to 64, or `any`".into()),
    }
}

/// The fault kinds a `--kinds` list names, in catalogue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kinds(pub Vec<(Site, FaultKind)>);

fn parse_kinds(text: &str) -> Result<Kinds, String> {
    let mut wanted = Vec::new();
    for item in text.split(',').map(str::trim) {
        let (site_name, kind_name) = match item.split_once('/') {
            Some((site, kind)) => (site, Some(kind)),
            None => (item, None),
        };
        let site = Site::parse(site_name).ok_or_else(|| {
            format!(
                "unknown fault site `{site_name}`; expected one of {}",
                Site::ALL.map(Site::as_str).join(", ")
            )
        })?;
        match kind_name {
            None => wanted.extend(site.kinds().iter().map(|kind| (site, *kind))),
            Some(kind_name) => {
                let kind = site
                    .kinds()
                    .iter()
                    .find(|kind| kind.as_str() == kind_name)
                    .ok_or_else(|| {
                        format!(
                            "`{site_name}` has no kind `{kind_name}`; its kinds: {}",
                            site.kinds()
                                .iter()
                                .map(|kind| kind.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?;
                wanted.push((site, *kind));
            }
        }
    }
    Ok(Kinds(
        catalogue()
            .into_iter()
            .filter(|pair| wanted.contains(pair))
            .collect(),
    ))
}

/// `sim check`.
pub fn check_command(file: &Path, args: &CheckArgs) -> u8 {
    let scenario = match crate::scenario::parse::load(file) {
        Ok(scenario) => scenario,
        Err(error) => {
            crate::errln!("{error}");
            return EXIT_INPUT;
        }
    };
    let prepared = prepare(&scenario, !args.no_scripted_faults, args.mutant);
    let options = CheckOptions {
        faults: args.faults,
        early: args.early.0,
        kinds: args.kinds.clone().map_or_else(catalogue, |kinds| kinds.0),
        depth: args.depth,
        max_states: args.max_states,
        jobs: args.jobs as usize,
    };
    let stopwatch = crate::stopwatch::Stopwatch::start();
    let explored = explore(initial_world(&prepared), &options);
    let seconds = stopwatch.seconds();
    let written = match &explored.found {
        Some(found) => {
            let mut scenario = counterexample(&prepared, found);
            let text = crate::scenario::write::to_toml(&scenario);
            if let Err(error) = std::fs::write(&args.out, text) {
                crate::errln!(
                    "{}",
                    InputError::new(format!("cannot write: {error}")).in_file(&args.out)
                );
                return EXIT_INPUT;
            }
            scenario.path = Some(args.out.display().to_string());
            if let Some(page) = &args.html
                && let Err(error) = write_page(&scenario, page)
            {
                crate::errln!("{error}");
                return EXIT_INPUT;
            }
            Some(args.out.display().to_string())
        }
        None => None,
    };
    if args.json {
        crate::outln!("{}", json_report(&explored, seconds, written.as_deref()));
    } else {
        print_report(
            file,
            &options,
            &explored,
            seconds,
            written.as_deref(),
            args.quiet,
        );
    }
    if explored.found.is_some() {
        EXIT_VIOLATION
    } else {
        EXIT_OK
    }
}

/// Runs the counterexample as `sim run --html` would and writes its page.
fn write_page(scenario: &crate::scenario::Scenario, page: &Path) -> Result<(), InputError> {
    let mut recorder = crate::timeline::Recorder::new();
    let world = crate::run::world_for(scenario);
    let finished = crate::run::execute(scenario, world, |world, added| {
        recorder.observe(world, added);
    });
    let info = crate::timeline::PageInfo {
        title: &scenario.name,
        description: &scenario.description,
        command: &crate::run::reproduce_command(scenario),
    };
    crate::timeline::write_timeline(page, &finished.world, &finished.outcome, &recorder, &info)
}

fn states_per_second(explored: &Explored, seconds: f64) -> u64 {
    if seconds > 0.0 {
        (explored.unique_states as f64 / seconds) as u64
    } else {
        0
    }
}

fn ended_text(ended: Ended) -> &'static str {
    match ended {
        Ended::Exhausted => "exhausted",
        Ended::DepthBound => "depth-bound",
        Ended::StateBound => "max-states",
        Ended::Violation => "violation",
    }
}

fn move_texts(found: &Found) -> Vec<String> {
    found
        .path
        .iter()
        .map(|step| match &step.fault {
            Some(fault) => format!(
                "{} <<< FAULT {}/{} {} step {}",
                step.wake.describe(),
                fault.site.as_str(),
                fault.kind.as_str(),
                fault.actor,
                fault.step
            ),
            None => step.wake.describe(),
        })
        .collect()
}

fn json_report(explored: &Explored, seconds: f64, written: Option<&str>) -> String {
    let violation = explored.found.as_ref().map(|found| {
        serde_json::json!({
            "invariant": found.invariant,
            "depth": found.depth,
            "step": found.step,
            "detail": found.detail,
            "path": move_texts(found),
            "counterexample": written,
        })
    });
    serde_json::json!({
        "uniqueStates": explored.unique_states,
        "transitions": explored.transitions,
        "maxDepth": explored.max_depth,
        "quietStates": explored.quiet_states,
        "seconds": seconds,
        "statesPerSecond": states_per_second(explored, seconds),
        "exhausted": explored.exhausted(),
        "ended": ended_text(explored.ended),
        "sometimes": explored.sometimes,
        "violation": violation,
    })
    .to_string()
}

fn print_report(
    file: &Path,
    options: &CheckOptions,
    explored: &Explored,
    seconds: f64,
    written: Option<&str>,
    quiet: bool,
) {
    let name = escape(&file.display().to_string()).into_owned();
    if !quiet {
        crate::outln!(
            "sim check {name}: at most {} fault(s) of {} kind(s) and {} early wake(s) per path, depth {}, at most {} states",
            options.faults,
            options.kinds.len(),
            options
                .early
                .map_or_else(|| "any".to_string(), |early| early.to_string()),
            options
                .depth
                .map_or_else(|| "unbounded".to_string(), |depth| depth.to_string()),
            options.max_states
        );
        crate::outln!(
            "unique states {}, transitions {}, max depth {}, quiet states {}, {:.2}s, {} states/s",
            explored.unique_states,
            explored.transitions,
            explored.max_depth,
            explored.quiet_states,
            seconds,
            states_per_second(explored, seconds)
        );
        if !explored.sometimes.is_empty() {
            let targets: Vec<&str> = explored.sometimes.iter().copied().collect();
            crate::outln!("sometimes reached: {}", targets.join(", "));
        }
    }
    match (&explored.found, explored.ended) {
        (Some(found), _) => {
            crate::outln!(
                "VIOLATION {} after {} transitions (step {}): {}",
                found.invariant,
                found.depth,
                found.step,
                escape(&found.detail)
            );
            if !quiet {
                for (index, text) in move_texts(found).iter().enumerate() {
                    crate::outln!("  {:>4}  {text}", index + 1);
                }
            }
            if let Some(path) = written {
                let path = escape(path);
                crate::outln!("counterexample: {path}; replay with: sim run {path}");
            }
        }
        (None, Ended::Exhausted) => crate::outln!(
            "no violation; exhausted: every state within the fault budget was explored"
        ),
        (None, Ended::DepthBound) => crate::outln!(
            "no violation; NOT exhausted: stopped at --depth {} with states left to expand",
            options.depth.unwrap_or(0)
        ),
        (None, _) => crate::outln!(
            "no violation; NOT exhausted: stopped at --max-states {} (raise it, or lower --faults or --depth)",
            options.max_states
        ),
    }
}
