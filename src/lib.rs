//! sim: a deterministic discrete-event fault-injection simulator for a
//! reliable asynchronous task pipeline. See README.md for the codemap.

pub mod check;
pub mod cli;
pub mod config;
pub mod dump;
pub mod error;
pub mod escape;
pub mod faults;
pub mod fuzz;
pub mod hash;
pub mod input;
pub mod invariants;
pub mod lesson_json;
pub mod mutants;
pub mod output;
pub mod prng;
pub mod report;
pub mod run;
pub mod scenario;
pub mod shrink;
pub mod simulate;
pub mod stopwatch;
pub mod task;
pub mod timeline;
pub mod trace;
pub mod world;
