//! sim: a deterministic discrete-event fault-injection simulator for a
//! reliable asynchronous task pipeline. See README.md for the codemap.

pub mod cli;
pub mod error;
pub mod hash;
pub mod task;
pub mod transition_cli;
