//! `CowTable`: a table a model-checker branch shares with the world it was
//! copied from until one of them writes it.
//!
//! `sim check` copies a world for every transition, and a step writes a
//! few of its tables: copying every table (about sixty allocations a
//! world) was most of what a transition cost. A table behind `CowTable` is
//! owned inline, as a plain field would be, until `share` moves it behind
//! a reference count; from then on a copy of the world counts one more
//! reference instead of copying the table, and the first write through a
//! shared table copies it (`Arc::make_mut`), once, for the writer alone.
//!
//! A fuzz run never shares: every table stays owned, and a read or write
//! costs a branch. That branch is why not every table is one: the tables
//! a fuzz step reads at almost every wake (the actors' lives, the fault
//! plan, the API calls and requests in flight, the broker's queues) stay
//! plain fields, where sharing them saved the checker little and cost
//! every fuzz step (README, "Model checking"). Equality and hashing see
//! the table, never how it is held, so a shared table and an owned copy
//! of it are one state.
//!
//! A table hashes as the 128-bit `Lanes` digest of its rows, and a shared
//! one keeps that digest beside its reference once it is taken; a copy of
//! the world copies the digest with the reference, and a write drops it.
//! The worlds copied from one parent share every table their step did
//! not write, so each table is hashed once for all of them, and a state's
//! fingerprint hashes only what its step wrote (the initial world's
//! tables are owned when it is fingerprinted, so its children take the
//! first digests).

use std::cell::Cell;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::lanes::digest;

#[derive(Clone)]
enum Held<T> {
    Owned(T),
    /// The rows and their digest, `NOT_TAKEN` until a hash takes it. Kept
    /// here rather than behind the reference: the identity reads it for
    /// every table of every state, and here it is in the world's own
    /// memory, a line it reads anyway, not one more pointer to follow.
    /// A cell, as the hash that takes it only reads the table; a world
    /// moves between threads but is never read from two at once.
    Shared(Arc<T>, Cell<[u64; 2]>),
}

/// No digest taken yet. A table whose digest happens to be this one is
/// only hashed again each time: never wrong, once in 2^128.
const NOT_TAKEN: [u64; 2] = [0, 0];

/// A digest as the two words `Held::Shared` keeps it in (a `u128` would
/// align the cell, and with it every table, to 16 bytes).
fn words(digest: u128) -> [u64; 2] {
    [digest as u64, (digest >> 64) as u64]
}

#[derive(Clone)]
pub struct CowTable<T: Clone>(Held<T>);

impl<T: Clone> CowTable<T> {
    pub fn new(table: T) -> CowTable<T> {
        CowTable(Held::Owned(table))
    }
}

impl<T: Clone + Default> CowTable<T> {
    /// Moves an owned table behind a reference count, so that copies of
    /// it share it; a shared one stays as it is.
    pub fn share(&mut self) {
        if let Held::Owned(table) = &mut self.0 {
            self.0 = Held::Shared(Arc::new(std::mem::take(table)), Cell::new(NOT_TAKEN));
        }
    }
}

impl<T: Clone> Deref for CowTable<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        match &self.0 {
            Held::Owned(table) => table,
            Held::Shared(table, _) => table,
        }
    }
}

impl<T: Clone> DerefMut for CowTable<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut T {
        match &mut self.0 {
            Held::Owned(table) => table,
            Held::Shared(table, digest) => {
                // Copied if another world shares it; either way the rows
                // may change, so a digest taken of them goes.
                digest.set(NOT_TAKEN);
                Arc::make_mut(table)
            }
        }
    }
}

impl<'a, T: Clone> IntoIterator for &'a CowTable<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        (**self).into_iter()
    }
}

impl<T: Clone> From<T> for CowTable<T> {
    fn from(table: T) -> CowTable<T> {
        CowTable::new(table)
    }
}

impl<T: Clone + Default> Default for CowTable<T> {
    fn default() -> CowTable<T> {
        CowTable::new(T::default())
    }
}

impl<T: Clone + Hash> Hash for CowTable<T> {
    /// The rows' digest, taken once for a shared table.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let [low, high] = match &self.0 {
            Held::Owned(table) => words(digest(table)),
            Held::Shared(table, kept) => {
                let mut rows = kept.get();
                if rows == NOT_TAKEN {
                    rows = words(digest(&**table));
                    kept.set(rows);
                }
                rows
            }
        };
        // As the two words it is kept in: no round trip through a `u128`
        // (whose default write is the bytes and their length, three words).
        state.write_u64(low);
        state.write_u64(high);
    }
}

impl<T: Clone + PartialEq> PartialEq for CowTable<T> {
    fn eq(&self, other: &CowTable<T>) -> bool {
        **self == **other
    }
}

impl<T: Clone + Eq> Eq for CowTable<T> {}

impl<T: Clone + std::fmt::Debug> std::fmt::Debug for CowTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_table_is_copied_for_its_first_writer_alone() {
        let mut parent = CowTable::new(vec![1, 2, 3]);
        parent.share();
        let mut child = parent.clone();
        let untouched = parent.clone();
        child.push(4);
        assert_eq!(*parent, vec![1, 2, 3]);
        assert_eq!(*untouched, vec![1, 2, 3]);
        assert_eq!(*child, vec![1, 2, 3, 4]);
        parent.push(5);
        assert_eq!(*parent, vec![1, 2, 3, 5]);
        assert_eq!(*untouched, vec![1, 2, 3]);
    }

    fn hash(table: &CowTable<Vec<i32>>) -> u64 {
        use std::hash::DefaultHasher;
        let mut state = DefaultHasher::new();
        table.hash(&mut state);
        state.finish()
    }

    #[test]
    fn how_a_table_is_held_changes_neither_equality_nor_hash() {
        let owned = CowTable::new(vec![7, 8]);
        let mut shared = owned.clone();
        shared.share();
        assert_eq!(owned, shared);
        assert_eq!(hash(&owned), hash(&shared));
        let Held::Shared(_, kept) = &shared.0 else {
            panic!("shared");
        };
        assert_eq!(kept.get(), words(digest(vec![7, 8])), "taken and kept");
        // A copy of the world carries the digest with the reference.
        let copy = shared.clone();
        let Held::Shared(_, carried) = &copy.0 else {
            panic!("shared");
        };
        assert_eq!(carried.get(), kept.get());
        assert_eq!(hash(&copy), hash(&owned));
        let mut plain = std::hash::DefaultHasher::new();
        let [low, high] = words(digest(vec![7, 8]));
        plain.write_u64(low);
        plain.write_u64(high);
        assert_eq!(hash(&owned), plain.finish());
        assert_ne!(hash(&owned), hash(&CowTable::new(vec![8, 7])));
    }

    /// A write drops the digest of the rows it changes, whether the table
    /// was copied for it or held alone, and leaves the digest of a world
    /// that still shares the old rows.
    #[test]
    fn a_write_leaves_no_stale_digest() {
        let mut parent = CowTable::new(vec![1, 2]);
        parent.share();
        let before = hash(&parent);
        let mut child = parent.clone();
        child.push(3);
        assert_eq!(hash(&child), hash(&CowTable::new(vec![1, 2, 3])));
        assert_eq!(hash(&parent), before);
        // `child` holds its copy alone now: written in place, and hashed
        // anew.
        child[0] = 9;
        assert_eq!(hash(&child), hash(&CowTable::new(vec![9, 2, 3])));
        parent.push(4);
        assert_eq!(hash(&parent), hash(&CowTable::new(vec![1, 2, 4])));
    }

    #[test]
    fn sharing_twice_keeps_the_copies_together() {
        let mut table = CowTable::new(String::from("a"));
        table.share();
        let copy = table.clone();
        table.share();
        let Held::Shared(first, _) = &table.0 else {
            panic!("shared");
        };
        let Held::Shared(second, _) = &copy.0 else {
            panic!("shared");
        };
        assert!(Arc::ptr_eq(first, second));
    }
}
