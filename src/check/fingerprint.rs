//! A world's fingerprint: 128 bits hashed from its identity text
//! (`World::identity`) and the budgets its path spent. Two states with
//! equal fingerprints are taken to be one state; with 10^7 states the
//! chance that two different ones collide is about 10^-25.

use crate::world::World;

/// The fingerprint of `world` reached with `spent` faults injected and
/// `early` wakes fired ahead of an earlier-due one.
pub fn fingerprint(world: &World, spent: u32, early: u32) -> u128 {
    let mut text = String::with_capacity(16 * 1024);
    world
        .identity(&mut text)
        .expect("writing to a string cannot fail");
    let low = hash64(text.as_bytes(), u64::from(spent) << 32 | u64::from(early));
    let high = hash64(
        text.as_bytes(),
        (u64::from(early) << 32 | u64::from(spent)) ^ SEED_HIGH,
    );
    (u128::from(high) << 64) | u128::from(low)
}

const SEED_HIGH: u64 = 0x9e37_79b9_7f4a_7c15;
const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;

/// The 128-bit product of two words, folded to 64 (wyhash's mixer).
fn mix(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A wyhash-style hash of `bytes`: 16 bytes at a time through the mixer,
/// with the length and seed folded in. Fast on the long identity texts
/// (SipHash spent half of a check's time there) and well mixed.
fn hash64(bytes: &[u8], seed: u64) -> u64 {
    let mut state = seed ^ P0;
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        let a = u64::from_le_bytes(chunk[..8].try_into().expect("8 bytes"));
        let b = u64::from_le_bytes(chunk[8..].try_into().expect("8 bytes"));
        state = mix(a ^ P1, b ^ state);
    }
    let mut tail = [0u8; 16];
    let rest = chunks.remainder();
    tail[..rest.len()].copy_from_slice(rest);
    let a = u64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
    let b = u64::from_le_bytes(tail[8..].try_into().expect("8 bytes"));
    state = mix(a ^ P1, b ^ state);
    mix(state ^ P0, bytes.len() as u64 ^ P1)
}

#[cfg(test)]
mod tests {
    use super::hash64;

    /// Texts one byte apart, anywhere, or of different lengths hash apart.
    #[test]
    fn nearby_texts_hash_apart() {
        let base = vec![b'a'; 100];
        let mut seen = std::collections::BTreeSet::new();
        assert!(seen.insert(hash64(&base, 0)));
        for at in 0..base.len() {
            let mut changed = base.clone();
            changed[at] = b'b';
            assert!(seen.insert(hash64(&changed, 0)), "byte {at}");
        }
        for len in 0..base.len() {
            assert!(seen.insert(hash64(&base[..len], 0)), "length {len}");
        }
        assert_ne!(hash64(&base, 0), hash64(&base, 1), "the seed counts");
    }
}
