//! The one place sim reads the wall clock: to report how fast a campaign or
//! a benchmark ran. Nothing measured here reaches state, traces or dumps,
//! and the simulation never reads it (the tidy test holds this file to that).

use std::time::Instant;

/// Elapsed real time since `start()`.
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch {
    started: Instant,
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        Stopwatch {
            started: Instant::now(),
        }
    }

    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub fn nanos(&self) -> u128 {
        self.started.elapsed().as_nanos()
    }
}
