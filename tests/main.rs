//! The one integration-test binary; a module per area.

mod check;
mod cli;
mod common;
mod determinism;
mod escaping;
mod fuzz;
mod input_errors;
mod invariants;
mod layout;
mod limits;
mod merge;
mod mutants;
mod outputs;
mod parser_campaign;
mod readme;
mod replay_events;
mod retention;
mod scenarios;
mod shrink;
mod tidy;
mod timeline;
mod transition;
