//! Fuzzing: the random workload, swarm-drawn faults and world shapes,
//! campaigns over many seeds, reproducers.

pub mod campaign;
mod outside;
pub mod panic;
pub mod summary;
pub mod swarm;
pub mod workload;

pub use workload::{Generator, WorkloadMix};
