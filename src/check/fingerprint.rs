//! A world's fingerprint: 128 bits hashed from its identity
//! (`World::identity`) and the budgets its path spent, and `Fingerprints`,
//! the set of those a search kept. Two states with equal fingerprints are
//! taken to be one state; with 10^7 states the chance that two different
//! ones collide is about 10^-25.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::world::World;
use crate::world::engine::lanes::Lanes;
use crate::world::engine::schedule::Wake;

/// The fingerprint of `world` reached with `spent` faults injected and
/// `early` wakes fired ahead of an earlier-due one. `wakes` is lent to
/// `World::identity`.
pub fn fingerprint(world: &World, spent: u32, early: u32, wakes: &mut Vec<(u64, Wake)>) -> u128 {
    let mut hasher = Lanes::new();
    hasher.write_u32(spent);
    hasher.write_u32(early);
    world.identity(&mut hasher, wakes);
    hasher.finish128()
}

/// The fingerprints of the states a search kept: membership only. A hash
/// set, not a B-tree: the fingerprints are already uniform, so their own
/// bits place them, and a lookup is one probe instead of a walk down
/// nodes scattered over the heap (a B-tree's `contains` was 5% of a
/// search's time). Nothing walks the set, so its order reaches no output.
#[derive(Default)]
pub struct Fingerprints {
    set: HashSet<u128, BuildHasherDefault<Folded>>,
}

impl Fingerprints {
    pub fn contains(&self, fingerprint: u128) -> bool {
        self.set.contains(&fingerprint)
    }

    /// Whether `fingerprint` was new.
    pub fn insert(&mut self, fingerprint: u128) -> bool {
        self.set.insert(fingerprint)
    }
}

/// A fingerprint's two halves folded into one word: the hash the set
/// places a fingerprint by (it is already a hash).
#[derive(Default)]
struct Folded(u64);

impl Hasher for Folded {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is called for a fingerprint; any other key
        // still hashes by all its bytes.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = (value as u64) ^ ((value >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fingerprints;
    use crate::world::engine::lanes::digest as hash;

    /// The set answers membership as a B-tree of the same fingerprints
    /// would, also for fingerprints it places alike: equal halves fold to
    /// one value, and one half zero leaves the other as it is.
    #[test]
    fn fingerprints_answer_membership() {
        let mut set = Fingerprints::default();
        let mut reference = std::collections::BTreeSet::new();
        for n in 0..4_000u128 {
            let fingerprint = match n % 4 {
                0 => n << 64,
                1 => n,
                2 => (n << 64) | n,
                _ => hash(n as u64),
            };
            assert!(!set.contains(fingerprint));
            assert_eq!(set.insert(fingerprint), reference.insert(fingerprint));
            assert!(set.contains(fingerprint));
            assert!(!set.insert(fingerprint));
        }
        assert!(!set.contains(1u128 << 127));
        assert!(!set.contains(u128::MAX));
    }
}
