//! Command-line interface: clap structs close to the flags, then dispatch to
//! the module that does the work. Every command returns an exit code.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::EXIT_INPUT;
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
        Command::Transition { file } => crate::transition_cli::run_transition(file.as_deref()),
        Command::ReplayEvents { file, policy } => {
            crate::transition_cli::run_replay_events(&file, policy)
        }
    }
}
