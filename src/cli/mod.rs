//! Command-line interface: the commands, then dispatch to the module that
//! does the work. A command's flags are its options struct, declared with
//! the command's code and flattened in here, so nothing copies them field
//! by field. Every command returns an exit code.

pub mod args;
pub mod bench;
pub mod check;
pub mod fuzz;
pub mod limits;
pub mod merge;
pub mod outputs;
pub mod replay_events;
pub mod run;
pub mod score;
pub mod shrink;
pub mod transition;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{EXIT_INPUT, EXIT_OK};
use crate::mutants::MUTANTS;
use crate::task::Policy;
use bench::BenchOptions;
use fuzz::FuzzOptions;
use run::RunOptions;
use score::ScoreOptions;
use shrink::ShrinkOptions;

#[derive(Parser, Debug)]
#[command(
    name = "sim",
    version,
    about = "Deterministic fault-injection simulator for reliable asynchronous task pipelines",
    long_about = "sim runs a whole task pipeline (client, API, database, outbox, publisher, \
broker, worker, artifact store, cache, projector, reconciler) in one process on one \
thread from one seed, injects faults, and checks every invariant after every step.\n\n\
Exit codes: 0 the run ended as expected; 1 an invariant fired or an expectation \
failed; 2 bad usage or input; 3 the system did not converge."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run one scenario: print its story and summary, judge its expectations
    Run {
        /// Scenario file (TOML)
        file: PathBuf,
        #[command(flatten)]
        options: RunOptions,
    },
    /// Fuzz: random workloads and swarm-drawn faults over many seeds
    Fuzz {
        #[command(subcommand)]
        action: Option<FuzzAction>,
        #[command(flatten)]
        options: FuzzOptions,
    },
    /// Benchmark fixed workloads (each in a fresh child process) and print speed, memory and the target ratios
    Bench {
        #[command(flatten)]
        options: BenchOptions,
        /// Internal: measure one workload in this process and print its sample
        #[arg(long, hide = true, value_name = "NAME")]
        run_one: Option<String>,
    },
    /// Shrink a failing scenario to a smaller one that fails with the same invariant
    Shrink {
        /// Scenario file (TOML) that fails: a violation, or no convergence
        file: PathBuf,
        #[command(flatten)]
        options: ShrinkOptions,
    },
    /// Model-check a scenario: every order of its wakes and every fault within a budget, breadth first
    Check {
        /// Scenario file (TOML)
        file: PathBuf,
        #[command(flatten)]
        options: check::CheckArgs,
    },
    /// Check a scenario file without running it
    Validate {
        /// Scenario file (TOML)
        file: PathBuf,
    },
    /// Print every configuration knob
    Config {
        /// Print each knob with its default, as a `[config]` table
        #[arg(long)]
        defaults: bool,
    },
    /// List the invariants: stable id and statement
    Invariants,
    /// List the protocol mutants (name, lesson section, invariant expected to catch it, guard removed), or score them
    Mutants {
        /// Fuzz each mutant until the first kill or the budget; print the table and the score
        #[arg(long)]
        score: bool,
        #[command(flatten)]
        options: ScoreOptions,
    },
    /// Apply lesson 003's transition to JSON lines of {"state","event","policy"?}
    Transition {
        /// JSON-lines input; standard input when absent
        file: Option<PathBuf>,
        /// The older reading: integral numbers in any notation (3.0, 1e3)
        /// as integers, negative numbers, and unknown fields ignored
        #[arg(long)]
        lenient: bool,
    },
    /// Fold a JSON-lines event history of one task and print its state
    ReplayEvents {
        /// JSON-lines file of events, one task
        file: PathBuf,
        /// The task the history belongs to (default: the task of the first event)
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        /// Cancellation policy the history was written under
        #[arg(long, default_value = "completion-wins", value_parser = args::parse_policy)]
        policy: Policy,
        /// The older reading: integral numbers in any notation (3.0, 1e3)
        /// as integers, negative numbers, and unknown fields ignored
        #[arg(long)]
        lenient: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum FuzzAction {
    /// Merge `sim fuzz --json` summaries (of shards) into one report
    Merge {
        /// JSON summaries
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the merged summary as JSON
        #[arg(long)]
        json: bool,
    },
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A usage error echoes the value given, which may carry escape
        // sequences: it is shown as plain text, escaped (help is printed
        // as clap styles it).
        Err(error) if error.use_stderr() => {
            let text = error.render().to_string();
            crate::errln!("{}", crate::escape::escape_lines(text.trim_end()));
            return ExitCode::from(EXIT_INPUT);
        }
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(0);
        }
    };
    ExitCode::from(dispatch(cli.command))
}

fn dispatch(command: Command) -> u8 {
    match command {
        Command::Run { file, options } => crate::cli::run::run_command(&file, &options),
        Command::Fuzz {
            action: Some(FuzzAction::Merge { files, json }),
            ..
        } => crate::cli::fuzz::merge_command(&files, json),
        Command::Fuzz {
            action: None,
            options,
        } => crate::cli::fuzz::fuzz_command(&options),
        Command::Bench {
            options,
            run_one: Some(name),
        } => crate::cli::bench::run_one(&name, options.quick),
        Command::Bench {
            options,
            run_one: None,
        } => crate::cli::bench::bench_command(&options),
        Command::Shrink { file, options } => crate::cli::shrink::shrink_command(&file, &options),
        Command::Check { file, options } => crate::cli::check::check_command(&file, &options),
        Command::Validate { file } => match crate::scenario::parse::load(&file) {
            Ok(scenario) => {
                crate::outln!(
                    "{}: ok ({} requests, {} faults{})",
                    crate::escape::escape(&file.display().to_string()),
                    scenario.requests.len(),
                    scenario.faults.len(),
                    scenario
                        .mutant
                        .map_or(String::new(), |m| format!(", mutant {}", m.name()))
                );
                EXIT_OK
            }
            Err(error) => {
                crate::errln!("{error}");
                EXIT_INPUT
            }
        },
        Command::Config { defaults: _ } => {
            crate::out!("{}", crate::config::Config::defaults_toml());
            EXIT_OK
        }
        Command::Invariants => {
            for invariant in crate::invariants::INVARIANTS {
                crate::outln!("{:<34} {}", invariant.id, invariant.statement);
            }
            EXIT_OK
        }
        Command::Mutants {
            score: true,
            options,
        } => crate::cli::score::score_command(&options),
        Command::Mutants { .. } => {
            for info in MUTANTS {
                crate::outln!(
                    "{:<30} {:<14} {:<34} {}",
                    info.name,
                    info.lesson,
                    info.expected,
                    info.guard
                );
            }
            EXIT_OK
        }
        Command::Transition { file, lenient } => {
            crate::cli::transition::run_transition(file.as_deref(), reading(lenient))
        }
        Command::ReplayEvents {
            file,
            policy,
            task,
            lenient,
        } => crate::cli::replay_events::run_replay_events(
            &file,
            policy,
            task.as_deref(),
            reading(lenient),
        ),
    }
}

fn reading(lenient: bool) -> crate::lesson_json::Reading {
    if lenient {
        crate::lesson_json::Reading::Lenient
    } else {
        crate::lesson_json::Reading::Strict
    }
}
