//! `IdTable`: rows named by a counter id (`entry-2`, a call, a request),
//! kept in a window of slots indexed by the id, for the hot tables whose
//! rows are born in id order and mostly leave in it.

use std::collections::VecDeque;

/// Counter ids that name a slot: 0-based, dense.
pub trait Slot: Copy {
    fn slot(self) -> usize;
}

/// A table of rows by counter id. A lookup is an index into a window, not
/// a walk down B-tree nodes, and a short-lived row costs no allocation of
/// its own. The window starts at the oldest live row, so its memory follows
/// the rows in flight (one empty slot per id born after the oldest live
/// row), not every row ever written. A table whose rows may live long
/// (one old row keeps the window wide) holds them boxed, so an empty slot
/// costs a pointer. Iteration is in id order.
#[derive(Debug)]
pub struct IdTable<K, V> {
    slots: VecDeque<Option<V>>,
    /// The slot number of `slots[0]`.
    base: usize,
    len: usize,
    ids: std::marker::PhantomData<K>,
}

impl<K, V> Default for IdTable<K, V> {
    fn default() -> IdTable<K, V> {
        IdTable {
            slots: VecDeque::new(),
            base: 0,
            len: 0,
            ids: std::marker::PhantomData,
        }
    }
}

impl<K: Slot, V> IdTable<K, V> {
    fn index(&self, id: K) -> Option<usize> {
        id.slot().checked_sub(self.base)
    }

    pub fn get(&self, id: K) -> Option<&V> {
        let index = self.index(id)?;
        self.slots.get(index)?.as_ref()
    }

    pub fn get_mut(&mut self, id: K) -> Option<&mut V> {
        let index = self.index(id)?;
        self.slots.get_mut(index)?.as_mut()
    }

    pub fn contains(&self, id: K) -> bool {
        self.get(id).is_some()
    }

    /// Writes the row of `id`, replacing the row there.
    pub fn insert(&mut self, id: K, row: V) {
        if self.len == 0 {
            // Empty: the window restarts at this id.
            self.slots.clear();
            self.base = id.slot();
        }
        let slot = id.slot();
        if slot < self.base {
            // Older than the window (rare: a row written back under an old
            // id): the window grows at the front.
            for _ in slot..self.base {
                self.slots.push_front(None);
            }
            self.base = slot;
        }
        let index = slot - self.base;
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, || None);
        }
        if self.slots[index].replace(row).is_none() {
            self.len += 1;
        }
    }

    pub fn remove(&mut self, id: K) -> Option<V> {
        let index = self.index(id)?;
        let row = self.slots.get_mut(index)?.take()?;
        self.len -= 1;
        self.trim();
        Some(row)
    }

    /// Keeps the rows `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|row| !keep(row)) {
                *slot = None;
                self.len -= 1;
            }
        }
        self.trim();
    }

    /// The window starts at the oldest live row.
    fn trim(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.slots.iter().filter_map(|slot| slot.as_ref())
    }
}

/// A set kept as a sorted deque, for time-ordered queues whose items mostly
/// arrive at the back (due later than everything queued) and leave near
/// the front (the earliest first): the broker's ready and in-flight
/// entries, the outbox rows to claim, leases and retention by expiry.
/// Those are a push or a pop, with no node to allocate or rebalance; an
/// item elsewhere costs a binary search and a shift of the shorter side.
/// `BTreeSet`'s order and semantics.
#[derive(Debug)]
pub struct SortedDeque<T> {
    items: VecDeque<T>,
}

impl<T> Default for SortedDeque<T> {
    fn default() -> SortedDeque<T> {
        SortedDeque {
            items: VecDeque::new(),
        }
    }
}

impl<T: Ord> SortedDeque<T> {
    /// Adds `item`; false if it was there already.
    pub fn insert(&mut self, item: T) -> bool {
        if self.items.back().is_none_or(|last| *last < item) {
            self.items.push_back(item);
            return true;
        }
        match self.items.binary_search(&item) {
            Ok(_) => false,
            Err(position) => {
                self.items.insert(position, item);
                true
            }
        }
    }

    /// Removes `item`; false if it was not there.
    pub fn remove(&mut self, item: &T) -> bool {
        if self.items.front() == Some(item) {
            self.items.pop_front();
            return true;
        }
        match self.items.binary_search(item) {
            Ok(position) => {
                self.items.remove(position);
                true
            }
            Err(_) => false,
        }
    }

    pub fn first(&self) -> Option<&T> {
        self.items.front()
    }

    pub fn pop_first(&mut self) -> Option<T> {
        self.items.pop_front()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::ids::EntryId;

    #[test]
    fn rows_are_found_by_id_and_the_window_follows_the_oldest_live_row() {
        let mut table: IdTable<EntryId, &str> = IdTable::default();
        for (id, row) in [(3, "c"), (1, "a"), (5, "e"), (4, "d")] {
            table.insert(EntryId(id), row);
        }
        assert_eq!(table.len(), 4);
        assert_eq!(table.get(EntryId(1)), Some(&"a"));
        assert_eq!(table.get(EntryId(2)), None);
        assert_eq!(table.get(EntryId(9)), None);
        assert_eq!(
            table.values().copied().collect::<Vec<_>>(),
            ["a", "c", "d", "e"]
        );
        assert_eq!(table.remove(EntryId(1)), Some("a"));
        assert_eq!(table.remove(EntryId(1)), None);
        assert_eq!((table.base, table.slots.len()), (2, 3));
        assert_eq!(table.remove(EntryId(3)), Some("c"));
        assert_eq!((table.base, table.slots.len()), (3, 2));
        *table.get_mut(EntryId(5)).unwrap() = "E";
        table.insert(EntryId(4), "D");
        assert_eq!(table.len(), 2);
        assert_eq!(table.values().copied().collect::<Vec<_>>(), ["D", "E"]);
        assert_eq!(table.remove(EntryId(4)), Some("D"));
        table.insert(EntryId(6), "f");
        table.retain(|row| *row != "E");
        assert_eq!((table.base, table.len()), (5, 1));
        assert_eq!(table.remove(EntryId(6)), Some("f"));
        assert!(table.is_empty());
        table.insert(EntryId(7), "g");
        assert_eq!((table.base, table.slots.len()), (6, 1));
        assert!(table.contains(EntryId(7)));
    }

    /// The deque answers as a `BTreeSet` does over random inserts and
    /// removals, at the back, the front and anywhere.
    #[test]
    fn a_sorted_deque_is_a_set_in_order() {
        let mut deque = SortedDeque::default();
        let mut set = std::collections::BTreeSet::new();
        let mut state = 11u64;
        for round in 0..20_000u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let draw = state >> 33;
            let item = match draw % 4 {
                0 => round,
                _ => draw % 512,
            };
            if draw.is_multiple_of(3) {
                assert_eq!(deque.remove(&item), set.remove(&item));
            } else if draw.is_multiple_of(7) {
                assert_eq!(deque.pop_first(), set.pop_first());
            } else {
                assert_eq!(deque.insert(item), set.insert(item));
            }
            assert_eq!(deque.first(), set.first());
            assert_eq!(deque.len(), set.len());
        }
        assert!(deque.iter().eq(set.iter()));
        assert_eq!(deque.is_empty(), set.is_empty());
    }
}
