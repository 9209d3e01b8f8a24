//! A world's fingerprint: 128 bits hashed from its identity
//! (`World::identity`) and the budgets its path spent, and `Fingerprints`,
//! the set of those a search kept. Two states with equal fingerprints are
//! taken to be one state; with 10^7 states the chance that two different
//! ones collide is about 10^-25.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use crate::world::World;
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

const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;
const P3: u64 = 0x5899_65cc_7537_4cc3;

/// The 128-bit product of two words, folded to 64 (wyhash's mixer).
fn mix(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// Two independent 64-bit lanes fed two words at a time, each pair through
/// wyhash's mixer with each lane's own constants: fast on the many small
/// writes a derived `Hash` makes (SipHash over the state's `Debug` text
/// spent half a check's time). A pair, not a word, per multiply: each
/// lane's multiplies form one chain, so the chain's length is the cost
/// (a word per multiply took twice as long to hash a world).
#[derive(Clone, Copy)]
struct Lanes {
    low: u64,
    high: u64,
    /// Words taken so far, the one waiting for its pair included.
    words: u64,
    /// The first word of a pair, while `words` is odd.
    waiting: u64,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            low: P0,
            high: P2,
            words: 0,
            waiting: 0,
        }
    }

    fn word(&mut self, word: u64) {
        self.words += 1;
        if self.words % 2 == 1 {
            self.waiting = word;
        } else {
            self.pair(self.waiting, word);
        }
    }

    /// Both words of a pair enter both factors' sides: the first with
    /// the lane, the second with the count.
    fn pair(&mut self, first: u64, second: u64) {
        self.low = mix(self.low ^ first ^ P1, second ^ P0 ^ self.words);
        self.high = mix(
            self.high ^ first.rotate_left(29) ^ P3,
            second.rotate_left(43) ^ P2 ^ self.words,
        );
    }

    fn finish128(&self) -> u128 {
        let mut lanes = *self;
        // An odd last word goes in as a pair with zero (the count tells
        // it from a zero written after it).
        if lanes.words % 2 == 1 {
            lanes.pair(lanes.waiting, 0);
        }
        let low = mix(lanes.low ^ P1, lanes.words ^ P0);
        let high = mix(lanes.high ^ P3, lanes.words ^ P2);
        (u128::from(high) << 64) | u128::from(low)
    }
}

impl Hasher for Lanes {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.word(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        let mut tail = [0u8; 8];
        tail[..rest.len()].copy_from_slice(rest);
        // The length goes in too: "ab" and "ab\0" pad to the same word.
        self.word(u64::from_le_bytes(tail) ^ ((bytes.len() as u64) << 56));
    }

    fn write_u8(&mut self, value: u8) {
        self.word(u64::from(value));
    }

    fn write_u16(&mut self, value: u16) {
        self.word(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.word(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.word(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.word(value as u64);
    }

    fn finish(&self) -> u64 {
        self.finish128() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::{Fingerprints, Lanes};
    use std::hash::{Hash, Hasher};

    fn hash(value: impl Hash) -> u128 {
        let mut lanes = Lanes::new();
        value.hash(&mut lanes);
        lanes.finish128()
    }

    /// The hashes seen, by each 64-bit half apart.
    #[derive(Default)]
    struct Halves {
        low: std::collections::BTreeSet<u64>,
        high: std::collections::BTreeSet<u64>,
    }

    impl Halves {
        /// Whether both halves of `hash` are new.
        fn insert(&mut self, hash: u128) -> bool {
            let low = self.low.insert(hash as u64);
            let high = self.high.insert((hash >> 64) as u64);
            low && high
        }
    }

    /// Values one bit, one byte or one element apart, in another order or
    /// cut at another boundary, hash apart, in each lane on its own (a
    /// word left out of one lane would still leave the 128 bits apart).
    #[test]
    fn nearby_values_hash_apart() {
        let mut seen = Halves::default();
        for bit in 0..64 {
            assert!(seen.insert(hash(1u64 << bit)), "bit {bit}");
            // Either word of a pair, and a pair after a pair.
            assert!(seen.insert(hash((1u64 << bit, 0u64))), "first {bit}");
            assert!(seen.insert(hash((0u64, 1u64 << bit))), "second {bit}");
            assert!(
                seen.insert(hash((7u64, 9u64, 0u64, 1u64 << bit))),
                "fourth {bit}"
            );
            assert!(seen.insert(hash((7u64, 9u64, 1u64 << bit))), "odd {bit}");
        }
        let base = vec![b'a'; 40];
        for at in 0..base.len() {
            let mut changed = base.clone();
            changed[at] = b'b';
            assert!(seen.insert(hash(&changed)), "byte {at}");
        }
        for len in 0..base.len() {
            assert!(seen.insert(hash(&base[..len])), "length {len}");
        }
        assert!(seen.insert(hash((1u32, 2u32))) && seen.insert(hash((2u32, 1u32))));
        assert!(seen.insert(hash(("ab", "c"))) && seen.insert(hash(("a", "bc"))));
        let mut a = Lanes::new();
        a.write_u32(0);
        assert!(seen.insert(a.finish128()), "a zero counts");
        assert!(seen.insert(Lanes::new().finish128()), "nothing counts");
    }

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
