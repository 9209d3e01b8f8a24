//! `IdTable`: rows named by a counter id (`entry-2`, a call, a request),
//! kept in a window of slots indexed by the id, for the hot tables whose
//! rows are born in id order and mostly leave in it.

use std::collections::{BTreeMap, VecDeque};

use super::slots::Slots;

/// Counter ids that name a slot: 0-based, dense.
pub trait Slot: Copy {
    fn slot(self) -> usize;
    /// The id whose slot this is.
    fn from_slot(slot: usize) -> Self;
}

/// A table of rows by counter id. A lookup in the window is an index, not
/// a walk down B-tree nodes (an id below it costs a search of the rows set
/// aside, a map that is mostly empty), and a short-lived row costs no
/// allocation of its own. The window starts at the oldest live row it
/// holds, so its memory follows the rows in flight, not every row ever
/// written. A row that stays while the rows born after it come and go (a
/// task parked in review keeps its messages) would hold the window open
/// over every id since; once the window is mostly empty slots, its oldest
/// rows move aside to `stragglers`, a map whose memory follows their
/// number. They move there boxed: a node of the map then holds pointers,
/// not rows, so it stays a small allocation (a node of large rows is a
/// request big enough to make malloc consolidate its free lists first).
/// Small rows pay for the box too; few rows go aside, and one rule is
/// simpler. Iteration is in id order.
#[derive(Clone, Debug, Hash)]
pub struct IdTable<K, V> {
    /// In chunks (`Slots`): memory follows the window's length now.
    slots: Slots<V>,
    /// The slot number of `slots[0]`.
    base: usize,
    /// Rows in `slots`.
    in_window: usize,
    /// Rows older than the window, by slot: every key is below `base`.
    stragglers: BTreeMap<usize, Box<V>>,
    ids: std::marker::PhantomData<K>,
}

/// A window this short is never thinned: below it a map costs more than
/// the empty slots it would save.
const WINDOW_FLOOR: usize = 256;
/// A longer window holds at least one row per this many slots, on average.
const WINDOW_SPARSITY: usize = 4;

/// Whether a window of `slots` holding `rows` is to be thinned.
fn too_sparse(slots: usize, rows: usize) -> bool {
    slots > WINDOW_FLOOR && slots > WINDOW_SPARSITY * rows
}

impl<K, V> Default for IdTable<K, V> {
    fn default() -> IdTable<K, V> {
        IdTable {
            slots: Slots::default(),
            base: 0,
            in_window: 0,
            stragglers: BTreeMap::new(),
            ids: std::marker::PhantomData,
        }
    }
}

impl<K: Slot, V> IdTable<K, V> {
    pub fn get(&self, id: K) -> Option<&V> {
        let slot = id.slot();
        match slot.checked_sub(self.base) {
            Some(index) => self.slots.get(index)?.as_ref(),
            None => self.stragglers.get(&slot).map(|row| &**row),
        }
    }

    pub fn get_mut(&mut self, id: K) -> Option<&mut V> {
        let slot = id.slot();
        match slot.checked_sub(self.base) {
            Some(index) => self.slots.row_mut(index),
            None => self.stragglers.get_mut(&slot).map(|row| &mut **row),
        }
    }

    pub fn contains(&self, id: K) -> bool {
        self.get(id).is_some()
    }

    /// The row of `id`, made by `make` first if there is none.
    pub fn get_or_insert_with(&mut self, id: K, make: impl FnOnce() -> V) -> &mut V {
        if !self.contains(id) {
            self.insert(id, make());
        }
        self.get_mut(id).expect("inserted")
    }

    /// Drops every row.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.base = 0;
        self.in_window = 0;
        self.stragglers.clear();
    }

    /// Writes the row of `id`, replacing the row there.
    pub fn insert(&mut self, id: K, row: V) {
        let slot = id.slot();
        if self.in_window == 0 && self.past_aside(slot) {
            // No row in the window: it restarts at this id.
            self.slots.clear();
            self.base = slot;
        }
        if slot < self.base {
            // Older than the window: a row written back under an old id
            // (the broker's count of a task's entries is). Near enough, the
            // window grows at the front to take it; far back, it goes aside.
            let grown = self.slots.len() + (self.base - slot);
            if !self.past_aside(slot) || too_sparse(grown, self.in_window + 1) {
                self.stragglers.insert(slot, Box::new(row));
                return;
            }
            for _ in slot..self.base {
                self.slots.push_front_empty();
            }
            self.base = slot;
        }
        let index = slot - self.base;
        if index >= self.slots.len() {
            self.slots.grow_to(index + 1);
        }
        if self.slots.replace(index, row).is_none() {
            self.in_window += 1;
            self.thin();
        }
    }

    /// Whether `slot` is above every row set aside, as the window must be.
    fn past_aside(&self, slot: usize) -> bool {
        self.stragglers
            .last_key_value()
            .is_none_or(|(&last, _)| last < slot)
    }

    pub fn remove(&mut self, id: K) -> Option<V> {
        let slot = id.slot();
        let Some(index) = slot.checked_sub(self.base) else {
            return self.stragglers.remove(&slot).map(|row| *row);
        };
        let row = self.slots.take(index)?;
        self.in_window -= 1;
        self.trim();
        Some(row)
    }

    /// Removes the row of `id`, returning what `read` takes from it. The
    /// row is dropped where it lies: `remove` moves all of it out, reading
    /// every line of a row untouched since it was written, where a caller
    /// that needs a field or two of it reads just those.
    pub fn remove_with<R>(&mut self, id: K, read: impl FnOnce(&V) -> R) -> Option<R> {
        let slot = id.slot();
        let Some(index) = slot.checked_sub(self.base) else {
            return self.stragglers.remove(&slot).map(|row| read(&row));
        };
        let taken = read(self.slots.get(index)?.as_ref()?);
        self.slots.discard(index);
        self.in_window -= 1;
        self.trim();
        Some(taken)
    }

    /// Removes the row of `id`, if any, dropping it where it lies.
    pub fn discard(&mut self, id: K) {
        self.remove_with(id, |_| ());
    }

    /// Removes the rows `take` says yes to and returns them, in id order,
    /// for the caller to end as it ends a row it removes by id.
    pub fn remove_where(&mut self, mut take: impl FnMut(&V) -> bool) -> Vec<V> {
        let mut taken: Vec<V> = self
            .stragglers
            .extract_if(.., |_, row| take(row))
            .map(|(_, row)| *row)
            .collect();
        let in_window = self.slots.take_where(take);
        self.in_window -= in_window.len();
        taken.extend(in_window);
        self.trim();
        taken
    }

    /// The window starts at the oldest live row it holds.
    fn trim(&mut self) {
        self.skip_empty_front();
        self.thin();
    }

    /// Drops the empty slots at the window's front.
    fn skip_empty_front(&mut self) {
        self.base += self.slots.drop_empty_front();
    }

    /// Moves the window's oldest rows aside while it is mostly empty slots.
    #[inline]
    fn thin(&mut self) {
        if self.is_sparse() {
            self.thin_out();
        }
    }

    fn is_sparse(&self) -> bool {
        too_sparse(self.slots.len(), self.in_window)
    }

    #[cold]
    fn thin_out(&mut self) {
        while self.is_sparse() {
            if let Some(Some(row)) = self.slots.pop_front() {
                self.stragglers.insert(self.base, Box::new(row));
                self.in_window -= 1;
            }
            self.base += 1;
            self.skip_empty_front();
        }
    }

    pub fn len(&self) -> usize {
        self.in_window + self.stragglers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows and their ids, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> {
        self.stragglers
            .iter()
            .map(|(slot, row)| (K::from_slot(*slot), &**row))
            .chain(self.slots.iter().enumerate().filter_map(|(index, slot)| {
                Some((K::from_slot(self.base + index), slot.as_ref()?))
            }))
    }

    /// The rows in id order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, row)| row)
    }

    /// What is wrong with the table's own bookkeeping, if anything: the
    /// rows it counts are the rows it holds, and a window with no row left
    /// in it holds no slot (the slots its removals emptied are let go, so
    /// its memory follows the rows it still has). `converges` asks it of
    /// the world's tables.
    pub fn bookkeeping_failure(&self) -> Option<String> {
        let held = self.values().count();
        if held != self.len() {
            return Some(format!("counts {} row(s) and holds {held}", self.len()));
        }
        if self.in_window == 0 && !self.slots.is_empty() {
            return Some(format!(
                "holds {} empty slot(s) and no row in them",
                self.slots.len()
            ));
        }
        None
    }
}

/// A set kept as a sorted deque, for time-ordered queues whose items mostly
/// arrive at the back (due later than everything queued) and leave near
/// the front (the earliest first): the broker's ready and in-flight
/// entries, the outbox rows to claim, leases and retention by expiry.
/// Those are a push or a pop, with no node to allocate or rebalance; an
/// item elsewhere costs a binary search and a shift of the shorter side.
/// `BTreeSet`'s order and semantics.
#[derive(Clone, Debug, Hash)]
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

    /// A counter id of the tests' own, numbered from 1 like the world's.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct EntryId(u32);

    impl Slot for EntryId {
        fn slot(self) -> usize {
            self.0 as usize - 1
        }

        fn from_slot(slot: usize) -> EntryId {
            EntryId(u32::try_from(slot + 1).expect("a slot of a u32 id"))
        }
    }

    #[test]
    fn bookkeeping_holds_through_removals_and_names_what_broke() {
        let mut table: IdTable<EntryId, u32> = IdTable::default();
        for id in 1..=200 {
            table.insert(EntryId(id), id);
        }
        assert_eq!(table.bookkeeping_failure(), None);
        assert_eq!(table.remove_where(|row| row % 3 == 0).len(), 66);
        table.discard(EntryId(1));
        assert_eq!(table.remove(EntryId(2)), Some(2));
        assert_eq!(table.bookkeeping_failure(), None);
        for id in 1..=200 {
            table.discard(EntryId(id));
        }
        assert_eq!((table.len(), table.slots.len()), (0, 0));
        assert_eq!(table.bookkeeping_failure(), None);

        // A count that drifted from the rows held.
        let mut miscounted = table.clone();
        miscounted.insert(EntryId(7), 7);
        miscounted.in_window += 1;
        assert_eq!(
            miscounted.bookkeeping_failure().as_deref(),
            Some("counts 2 row(s) and holds 1")
        );
        // Slots its removals emptied, kept with no row left in them.
        let mut kept = table;
        kept.slots.grow_to(3);
        assert_eq!(
            kept.bookkeeping_failure().as_deref(),
            Some("holds 3 empty slot(s) and no row in them")
        );
    }

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
        assert_eq!(table.remove_where(|row| *row == "E"), ["E"]);
        assert_eq!((table.base, table.len()), (5, 1));
        assert_eq!(table.remove(EntryId(6)), Some("f"));
        assert!(table.is_empty());
        table.insert(EntryId(7), "g");
        assert_eq!((table.base, table.slots.len()), (6, 1));
        assert!(table.contains(EntryId(7)));
    }

    /// The table answers as a `BTreeMap` does while rows are born in id
    /// order and leave mostly in it, some staying on for good (as messages
    /// of a task held in review do), with rows written back under old ids
    /// and a `retain` now and then; and the window stays within its
    /// sparsity bound, so the rows that stay cost a map entry each and not
    /// a slot for every id born after them.
    #[test]
    fn a_table_is_a_map_by_id_and_long_stayers_do_not_widen_the_window() {
        let mut table: IdTable<EntryId, u64> = IdTable::default();
        let mut map = BTreeMap::new();
        let mut state = 7u64;
        let mut next = 1u32;
        let mut stayer_set_aside = false;
        for round in 0..60_000u64 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let draw = state >> 33;
            // An id born so far (ids start at 1).
            let born = 1 + (draw % u64::from(next.max(2) - 1)) as u32;
            match draw % 8 {
                0..=2 => {
                    table.insert(EntryId(next), round);
                    map.insert(next, round);
                    next += 1;
                }
                3..=5 => {
                    // The oldest rows leave, except one in 50 that stays.
                    let oldest = map.keys().copied().find(|id| id % 50 != 0);
                    if let Some(id) = oldest {
                        // Half of them leave dropped in place.
                        let expected = map.remove(&id);
                        if round % 2 == 0 {
                            assert_eq!(table.remove(EntryId(id)), expected);
                        } else {
                            assert_eq!(table.remove_with(EntryId(id), |row| *row), expected);
                        }
                    }
                }
                6 => {
                    assert_eq!(table.remove(EntryId(born)), map.remove(&born));
                }
                _ if round % 500 == 0 => {
                    let taken: Vec<u64> = map
                        .extract_if(.., |_, row| *row % 3 == 0)
                        .map(|(_, row)| row)
                        .collect();
                    assert_eq!(table.remove_where(|row| row % 3 == 0), taken);
                }
                _ => {
                    table.insert(EntryId(born), round);
                    map.insert(born, round);
                }
            }
            let probe = 1 + (draw % u64::from(next + 1)) as u32;
            assert_eq!(table.get(EntryId(probe)), map.get(&probe));
            assert_eq!(table.contains(EntryId(probe)), map.contains_key(&probe));
            if let (Some(row), Some(expected)) =
                (table.get_mut(EntryId(probe)), map.get_mut(&probe))
            {
                *row += 1;
                *expected += 1;
            }
            assert_eq!(table.len(), map.len());
            assert!(
                table.slots.len() <= WINDOW_FLOOR.max(WINDOW_SPARSITY * table.in_window),
                "round {round}: a window of {} slots holds {} rows",
                table.slots.len(),
                table.in_window
            );
            assert!(table.stragglers.keys().all(|slot| *slot < table.base));
            // A slot is its id less one.
            stayer_set_aside |= table.stragglers.keys().any(|slot| (slot + 1) % 50 == 0);
        }
        assert!(table.values().eq(map.values()));
        assert!(
            table
                .iter()
                .map(|(id, row)| (id.0, *row))
                .eq(map.iter().map(|(id, row)| (*id, *row)))
        );
        assert!(stayer_set_aside, "a row that stayed was moved aside");
        assert_eq!(table.is_empty(), map.is_empty());
        let (old, new) = (*map.keys().next().expect("rows"), next + 7);
        *table.get_or_insert_with(EntryId(old), || 1_000) += 1;
        *table.get_or_insert_with(EntryId(new), || 1_000) += 1;
        assert_eq!(table.get(EntryId(old)), Some(&(map[&old] + 1)));
        assert_eq!(table.get(EntryId(new)), Some(&1_001));
        table.clear();
        assert!(table.is_empty() && table.iter().next().is_none());
        table.insert(EntryId(3), 3);
        assert_eq!(table.iter().collect::<Vec<_>>(), [(EntryId(3), &3)]);
    }

    /// An `IdTable` and the `BTreeMap` it must answer like, checked
    /// against each other after every write.
    #[derive(Default)]
    struct Twins {
        table: IdTable<EntryId, u32>,
        map: BTreeMap<u32, u32>,
    }

    impl Twins {
        fn insert(&mut self, id: u32) {
            self.table.insert(EntryId(id), id * 10);
            self.map.insert(id, id * 10);
            self.agree();
        }

        fn remove(&mut self, id: u32) {
            assert_eq!(self.table.remove(EntryId(id)), self.map.remove(&id));
            self.agree();
        }

        fn agree(&self) {
            assert_eq!(self.table.len(), self.map.len());
            assert!(self.table.values().eq(self.map.values()));
            for id in 1..=1000 {
                assert_eq!(self.table.get(EntryId(id)), self.map.get(&id), "id {id}");
            }
            assert!(
                self.table
                    .stragglers
                    .keys()
                    .all(|slot| *slot < self.table.base)
            );
        }
    }

    /// The window restarts at an id written while it is empty only when
    /// that id is past every row set aside; an id at or below one of them
    /// joins them instead, so the set-aside rows stay below the window.
    #[test]
    fn an_empty_window_restarts_only_past_the_rows_set_aside() {
        let mut twins = Twins::default();
        for id in 1..=400 {
            twins.insert(id);
        }
        // Rows 1 and 400 stay in a window of 400 slots: row 1 moves aside.
        for id in 2..=399 {
            twins.remove(id);
        }
        let table = &twins.table;
        assert_eq!((table.stragglers.len(), table.base), (1, 399));
        // Far below the window: set aside too. Then the window empties.
        twins.insert(2);
        twins.remove(400);
        assert_eq!(twins.table.in_window, 0);
        // At or below the last row set aside: it joins (or replaces) them.
        twins.insert(1);
        twins.insert(2);
        assert_eq!(twins.table.in_window, 0);
        // Past them: the window restarts there.
        twins.insert(3);
        assert_eq!((twins.table.base, twins.table.in_window), (2, 1));
        twins.insert(2);
        twins.remove(3);
        twins.insert(2);
        twins.remove(1);
        twins.remove(2);
        assert!(twins.table.is_empty());
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
