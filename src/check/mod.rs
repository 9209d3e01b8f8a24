//! `sim check`: a breadth-first model checker over the real protocol code.
//! It explores every order in which the queued wakes of a scenario's world
//! can fire and every fault the budget allows at each step, merges states
//! by fingerprint, and writes the first (shortest) violation back as a
//! scenario `sim run` replays. `options.rs` holds the types, `prepare.rs`
//! the world explored, `explore.rs` the search, `successors.rs` one
//! state's expansion, `level.rs` a level on several threads,
//! `fingerprint.rs` state identity, `counterexample.rs` the scenario
//! written back.

pub mod counterexample;
pub mod explore;
pub mod fingerprint;
pub mod level;
pub mod options;
pub mod prepare;
pub mod successors;
