//! Scenarios: the validated description of one run (world shape, seed,
//! requests, faults, expectations), parsed from TOML in `parse.rs` and
//! written back as TOML by reproducers in `write.rs`.

pub mod parse;
pub mod write;

use crate::config::Config;
use crate::faults::ScriptedFault;
use crate::mutants::Mutant;
use crate::world::input::Setup;

/// A scenario's requests are the world's own input: the parser and the
/// fuzz generator both produce `world::input` values.
pub use crate::world::input::{DeadLetterRef, Request, RequestKind, Target};

/// A validated scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub seed: u64,
    pub steps_max: u64,
    pub mutant: Option<Mutant>,
    pub config: Config,
    pub requests: Vec<Request>,
    pub faults: Vec<ScriptedFault>,
    pub expect: Expect,
    /// Where it came from, for messages and reproduce commands.
    pub path: Option<String>,
    /// Reproducers record these; a mismatch is a warning.
    pub sim_version: Option<String>,
    pub config_sha256: Option<String>,
}

impl Scenario {
    /// What the world is built from: everything but the name, the step
    /// budget and the expectations, which judge the run from outside.
    pub fn setup(&self) -> Setup {
        Setup {
            seed: self.seed,
            mutant: self.mutant,
            config: self.config.clone(),
            requests: self.requests.clone(),
            faults: self.faults.clone(),
        }
    }
}

/// `[expect]`: facts about the final dump, and the violation a scenario
/// must produce, if any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// JSON pointer into the dump → expected JSON value.
    pub facts: Vec<(String, serde_json::Value)>,
    pub violation: Option<String>,
}
