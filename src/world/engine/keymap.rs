//! `KeyMap`: the one hash table in sim, for lookups by idempotency key.
//! Everywhere else sim uses ordered containers (and one hash set, the
//! model checker's fingerprints, asked for membership only), so that no
//! order can come from hashing; this one is only looked up, never walked
//! in hash order.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::world::engine::ids::{fingerprint, mix_word};

/// A table filed by a key that hashes by its fingerprint (`KeyOf`, alone
/// or beside a request fingerprint). Looked up on every create, answer,
/// check of a key and expiry; a B-tree ordered by (fingerprint, text) made
/// each lookup a walk down three levels of nodes with a mispredicted branch
/// at each. Its hasher has no random state, and it offers no iteration but
/// in key order, so nothing in a run depends on where an entry hashed.
pub struct KeyMap<K, V> {
    table: HashMap<K, V, BuildHasherDefault<FingerprintHasher>>,
}

/// In key order too, like the one walk.
impl<K: Hash + Eq + Ord + fmt::Debug, V: fmt::Debug> fmt::Debug for KeyMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.entries_in_key_order()).finish()
    }
}

/// In key order, like the one walk: equal maps hash alike, whatever
/// order their entries went in.
impl<K: Hash + Eq + Ord, V: Hash> Hash for KeyMap<K, V> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.table.len());
        // One entry is in key order as it is: no list to sort. The model
        // checker hashes a world at every transition, and its maps hold a
        // key or two.
        if self.table.len() == 1 {
            for (key, value) in &self.table {
                key.hash(state);
                value.hash(state);
            }
            return;
        }
        for (key, value) in self.entries_in_key_order() {
            key.hash(state);
            value.hash(state);
        }
    }
}

impl<K: Clone, V: Clone> Clone for KeyMap<K, V> {
    fn clone(&self) -> KeyMap<K, V> {
        KeyMap {
            table: self.table.clone(),
        }
    }
}

impl<K, V> Default for KeyMap<K, V> {
    fn default() -> KeyMap<K, V> {
        KeyMap {
            table: HashMap::default(),
        }
    }
}

impl<K: Hash + Eq, V> KeyMap<K, V> {
    pub fn get(&self, key: &K) -> Option<&V> {
        self.table.get(key)
    }

    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.table.get_mut(key)
    }

    /// Writes `value` under `key`, replacing the value there.
    pub fn insert(&mut self, key: K, value: V) {
        self.table.insert(key, value);
    }

    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.table.remove(key)
    }

    /// The value under `key`, a default one put there first if none is.
    pub fn get_or_default(&mut self, key: K) -> &mut V
    where
        V: Default,
    {
        self.table.entry(key).or_default()
    }

    /// Every value, in the order of their keys.
    pub fn values_in_key_order(&self) -> Vec<&V>
    where
        K: Ord,
    {
        self.entries_in_key_order()
            .into_iter()
            .map(|(_, value)| value)
            .collect()
    }

    fn entries_in_key_order(&self) -> Vec<(&K, &V)>
    where
        K: Ord,
    {
        let mut entries: Vec<(&K, &V)> = self.table.iter().collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
        entries
    }
}

/// Hashes what a `KeyMap` is filed by: a key's fingerprint is already well
/// mixed and goes in with one multiply; other bytes (the request
/// fingerprint beside a key) are fingerprinted first.
#[derive(Default)]
struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = mix_word(self.0, value);
    }

    fn write(&mut self, bytes: &[u8]) {
        self.write_u64(fingerprint(bytes));
    }

    /// A slice's length prefix (a hashed `Sha` has one) is a number, not
    /// bytes to fingerprint.
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::engine::ids::KeyOf;

    /// Every key is found again after 500 inserts, and the one walk the
    /// table offers is in key order, whatever the insertion order.
    #[test]
    fn lookups_find_each_key_and_the_walk_is_in_key_order() {
        let mut map: KeyMap<KeyOf, u32> = KeyMap::default();
        let keys: Vec<KeyOf> = (0..500u32)
            .rev()
            .map(|n| KeyOf::new(&format!("intent-{n:06}").into()))
            .collect();
        for (n, key) in keys.iter().enumerate() {
            map.insert(key.clone(), n as u32);
        }
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(map.get(key), Some(&(n as u32)));
        }
        let mut sorted = keys.clone();
        sorted.sort();
        let walked: Vec<u32> = map.values_in_key_order().into_iter().copied().collect();
        assert_eq!(walked.len(), 500);
        let expected: Vec<u32> = sorted
            .iter()
            .map(|key| *map.get(key).expect("present"))
            .collect();
        assert_eq!(walked, expected);
        assert_eq!(map.remove(&keys[7]), Some(7));
        assert_eq!(map.get(&keys[7]), None);
        *map.get_or_default(keys[7].clone()) += 3;
        assert_eq!(map.get(&keys[7]), Some(&3));
    }
}
