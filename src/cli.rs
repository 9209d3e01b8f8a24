//! Command-line interface: clap structs close to the flags, then dispatch to
//! the module that does the work. Every command returns an exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::{EXIT_INPUT, EXIT_OK};
use crate::mutants::{MUTANTS, Mutant};
use crate::task::Policy;

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
        /// Override the scenario's seed
        #[arg(long)]
        seed: Option<u64>,
        /// Switch off one protocol guard (see `sim mutants`)
        #[arg(long, value_parser = parse_mutant)]
        mutant: Option<Mutant>,
        /// Write the final dump as canonical JSON to FILE (`-`: stdout, which then holds only the JSON)
        #[arg(long, value_name = "FILE")]
        dump: Option<PathBuf>,
        /// Write every trace record as JSON lines to FILE
        #[arg(long, value_name = "FILE")]
        trace: Option<PathBuf>,
        /// Leave the step-by-step story out; print only the summary
        #[arg(long)]
        quiet: bool,
    },
    /// Fuzz: random workloads and swarm-drawn faults over many seeds
    Fuzz {
        #[command(subcommand)]
        action: Option<FuzzAction>,
        /// First seed
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Steps of each run's fault phase
        #[arg(long, default_value_t = 10_000)]
        steps: u64,
        /// Seeds to run: seed .. seed + runs - 1
        #[arg(long, default_value_t = 1)]
        runs: u64,
        /// Threads; each simulation stays single-threaded and results are identical to --jobs 1
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Switch off one protocol guard (see `sim mutants`)
        #[arg(long, value_parser = parse_mutant)]
        mutant: Option<Mutant>,
        /// Run each seed twice and compare traceSha256
        #[arg(long)]
        check_determinism: bool,
        /// Directory for repro-<seed>.toml files (default: current directory)
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// No progress line on stderr
        #[arg(long)]
        quiet: bool,
        /// Run the I-th (0-based) of N disjoint slices of the seed range, as I/N
        #[arg(long, value_parser = parse_shard)]
        shard: Option<(u64, u64)>,
        /// Print the summary as JSON (shards' JSON merges with `sim fuzz merge`)
        #[arg(long)]
        json: bool,
    },
    /// Benchmark fixed workloads (each in a fresh child process) and print speed, memory and the target ratios
    Bench {
        /// Print a JSON array, one object per workload
        #[arg(long)]
        json: bool,
        /// Measurements per workload (median and spread are reported)
        #[arg(long, default_value_t = 5)]
        repeat: usize,
        /// Ten times smaller workloads (a smoke run)
        #[arg(long)]
        quick: bool,
        /// Only these workloads (by name)
        #[arg(long = "only")]
        only: Vec<String>,
        /// Internal: measure one workload in this process and print its sample
        #[arg(long, hide = true, value_name = "NAME")]
        run_one: Option<String>,
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
        /// First seed of each mutant's campaign
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seeds per mutant (the budget)
        #[arg(long, default_value_t = 100)]
        runs: u64,
        /// Steps per seed
        #[arg(long, default_value_t = 10_000)]
        steps: u64,
        /// Threads
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Score only these mutants
        #[arg(long = "only", value_parser = parse_mutant)]
        only: Vec<Mutant>,
    },
    /// Apply lesson 003's transition to JSON lines of {"state","event","policy"?}
    Transition {
        /// JSON-lines input; standard input when absent
        file: Option<PathBuf>,
    },
    /// Fold a JSON-lines event history of one task and print its state
    ReplayEvents {
        /// JSON-lines file of events, one task
        file: PathBuf,
        /// Cancellation policy the history was written under
        #[arg(long, default_value = "completion-wins", value_parser = parse_policy)]
        policy: Policy,
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

fn parse_mutant(text: &str) -> Result<Mutant, String> {
    Mutant::parse(text).ok_or_else(|| "unknown mutant; `sim mutants` lists them".to_string())
}

fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (index, count) = text.split_once('/').ok_or("expected I/N, like 0/4")?;
    let index: u64 = index
        .parse()
        .map_err(|_| "expected I/N with integers, like 0/4")?;
    let count: u64 = count
        .parse()
        .map_err(|_| "expected I/N with integers, like 0/4")?;
    if count == 0 || index >= count {
        return Err("expected 0 <= I < N".into());
    }
    Ok((index, count))
}

fn parse_policy(text: &str) -> Result<Policy, String> {
    Policy::parse(text).ok_or_else(|| "expected `completion-wins` or `cancel-wins`".to_string())
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { EXIT_INPUT } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    ExitCode::from(dispatch(cli.command))
}

fn dispatch(command: Command) -> u8 {
    match command {
        Command::Run {
            file,
            seed,
            mutant,
            dump,
            trace,
            quiet,
        } => crate::run::run_command(
            &file,
            &crate::run::RunOptions {
                seed,
                mutant,
                dump,
                trace,
                quiet,
            },
        ),
        Command::Fuzz {
            action: Some(FuzzAction::Merge { files, json }),
            ..
        } => crate::fuzz::command::merge_command(&files, json),
        Command::Fuzz {
            action: None,
            seed,
            steps,
            runs,
            jobs,
            mutant,
            check_determinism,
            out,
            quiet,
            shard,
            json,
        } => crate::fuzz::command::fuzz_command(&crate::fuzz::command::FuzzOptions {
            seed,
            runs,
            steps,
            jobs,
            mutant,
            check_determinism,
            out,
            quiet,
            shard,
            json,
        }),
        Command::Bench {
            json,
            repeat,
            quick,
            only,
            run_one,
        } => match run_one {
            Some(name) => crate::bench::run_one(&name, quick),
            None => crate::bench::bench_command(&crate::bench::BenchOptions {
                json,
                repeat,
                quick,
                only,
            }),
        },
        Command::Validate { file } => match crate::scenario::parse::load(&file) {
            Ok(scenario) => {
                crate::outln!(
                    "{}: ok ({} requests, {} faults{})",
                    file.display(),
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
            seed,
            runs,
            steps,
            jobs,
            only,
        } => crate::fuzz::score::score_command(&crate::fuzz::score::ScoreOptions {
            seed,
            runs,
            steps,
            jobs,
            only,
        }),
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
        Command::Transition { file } => crate::transition_cli::run_transition(file.as_deref()),
        Command::ReplayEvents { file, policy } => {
            crate::transition_cli::run_replay_events(&file, policy)
        }
    }
}
