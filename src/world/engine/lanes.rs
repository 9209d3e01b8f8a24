//! `Lanes`: the fast 128-bit hasher behind the model checker's state
//! fingerprints and the digests a shared table keeps of itself
//! (`engine::cow`).

use std::hash::Hasher;

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
pub struct Lanes {
    low: u64,
    high: u64,
    /// Words taken so far, the one waiting for its pair included.
    words: u64,
    /// The first word of a pair, while `words` is odd.
    waiting: u64,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes::new()
    }
}

impl Lanes {
    pub fn new() -> Lanes {
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

    pub fn finish128(&self) -> u128 {
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

/// The 128-bit `Lanes` digest of `value`.
pub fn digest(value: impl std::hash::Hash) -> u128 {
    let mut lanes = Lanes::new();
    value.hash(&mut lanes);
    lanes.finish128()
}

#[cfg(test)]
mod tests {
    use super::Lanes;
    use super::digest as hash;
    use std::hash::Hasher;

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
}
