//! The one integration-test binary; a module per area.

mod cli;
mod common;
mod determinism;
mod fuzz;
mod input_errors;
mod invariants;
mod mutants;
mod readme;
mod retention;
mod scenarios;
mod shrink;
mod tidy;
mod transition;
