//! Seeded randomness: one ChaCha root per run, a child stream per purpose,
//! and integer-only draws so a seed means the same run on every machine.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What a stream is used for. Each purpose reads its own ChaCha stream of
/// the run's seed, so drawing one more fault never shifts the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The fuzz workload generator: which requests, when, with what input.
    Workload = 1,
    /// Which faults fire, and fault parameters.
    Faults = 2,
    /// Latencies and delays: when each next step happens.
    Delays = 3,
    /// The fuzz swarm draw: which fault kinds are on, rates, world shape.
    Shape = 4,
    /// Parameters of faults that fired (how long a delay is), apart from
    /// the draws that decide whether faults fire, so a reproducer with the
    /// same faults written out draws the same parameters.
    FaultParameters = 5,
}

/// A deterministic random stream. Only integer draws: probabilities are
/// parts per million, ranges are inclusive integer ranges.
#[derive(Clone, Debug)]
pub struct Prng {
    rng: ChaCha8Rng,
}

/// One million: probabilities are `ppm / PPM`.
pub const PPM: u32 = 1_000_000;

impl Prng {
    pub fn new(seed: u64, stream: Stream) -> Prng {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream as u64);
        Prng { rng }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Uniform in `0..bound` by rejection sampling (no modulo bias, no
    /// floating point). `bound` must be positive.
    ///
    /// Inlined so that a constant bound (every `chance`, a million) turns
    /// its divisions into multiplications: called out of line, two 64-bit
    /// divisions a draw were 2-3% of a swarm campaign's time.
    #[inline]
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0);
        let zone = acceptance_zone(bound);
        loop {
            let value = self.next_u64();
            if value <= zone {
                return value % bound;
            }
        }
    }

    /// Uniform in `low..=high`.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        assert!(low <= high);
        if low == high {
            return low;
        }
        match (high - low).checked_add(1) {
            Some(span) => low + self.below(span),
            None => self.next_u64(),
        }
    }

    /// True with probability `ppm` parts per million. A zero rate draws
    /// nothing, so a fault that is off consumes no randomness.
    #[inline]
    pub fn chance(&mut self, ppm: u32) -> bool {
        if ppm == 0 {
            return false;
        }
        if ppm >= PPM {
            return true;
        }
        self.below(u64::from(PPM)) < u64::from(ppm)
    }

    /// Picks an index into a slice of the given length.
    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }
}

/// The largest draw `below(bound)` keeps: `u64::MAX - 2^64 % bound`, so
/// that every residue is equally likely. `2^64 % bound` is `u64::MAX %
/// bound + 1`, wrapped to 0 when it reaches `bound`: one division, not two.
#[inline]
fn acceptance_zone(bound: u64) -> u64 {
    let rest = u64::MAX % bound + 1;
    u64::MAX - if rest == bound { 0 } else { rest }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_reproducible() {
        let mut a = Prng::new(7, Stream::Workload);
        let mut b = Prng::new(7, Stream::Workload);
        let mut c = Prng::new(7, Stream::Faults);
        let first: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let again: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let other: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(first, again);
        assert_ne!(first, other);
    }

    #[test]
    fn below_and_range_stay_in_bounds() {
        let mut rng = Prng::new(1, Stream::Delays);
        for _ in 0..1000 {
            assert!(rng.below(3) < 3);
            let value = rng.range(5, 9);
            assert!((5..=9).contains(&value));
        }
        assert_eq!(rng.range(4, 4), 4);
    }

    /// `below`'s acceptance zone is the one its two-division form gave
    /// (the draws of every seed depend on it), for small, odd, power-of-two
    /// and huge bounds.
    #[test]
    fn below_zone_matches_the_two_division_form() {
        for bound in [
            1,
            2,
            3,
            7,
            64,
            1_000_000,
            1 << 63,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let expected = u64::MAX - (u64::MAX % bound + 1) % bound;
            let zone = acceptance_zone(bound);
            assert_eq!(zone, expected, "bound {bound}");
            // Accepted values are a whole number of `bound`-sized runs.
            assert_eq!(zone.wrapping_add(1) % bound, 0, "bound {bound}");
        }
        let mut a = Prng::new(3, Stream::Faults);
        let draws: Vec<u64> = (0..8).map(|_| a.below(1_000_000)).collect();
        let mut b = Prng::new(3, Stream::Faults);
        let reference: Vec<u64> = (0..8).map(|_| b.next_u64() % 1_000_000).collect();
        // Seed 3's first draws all fall in the zone (rejection is rare).
        assert_eq!(draws, reference);
    }

    #[test]
    fn chance_extremes_are_exact() {
        let mut rng = Prng::new(1, Stream::Faults);
        assert!((0..100).all(|_| !rng.chance(0)));
        assert!((0..100).all(|_| rng.chance(PPM)));
    }
}
