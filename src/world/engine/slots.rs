//! `Slots`: the window of an `IdTable`, a deque of optional rows kept in
//! fixed-size chunks, so its memory follows the window's length as it is,
//! not the longest it ever was.

use std::collections::VecDeque;

/// Slots per chunk: a power of two, so finding a slot is a shift and a
/// mask, and one `u64` says which of a chunk's slots hold rows. 64 rows of
/// the largest table (outbox rows, 216 bytes) are 14 KB.
const CHUNK: usize = 64;

/// A deque of `Option<V>` with the few operations a window needs: a
/// lookup by index, a pop or a push of empty slots at the front, growth
/// at the back. A `VecDeque` of rows doubled its buffer as the window grew
/// and never gave it back: a window that once spanned 40,000 slots held
/// 65,536 for the rest of the run (the outbox of a long overloaded run
/// held 28 MB for 60,000 rows). Here a chunk is freed as soon as the front
/// leaves it, and the back grows one chunk at a time. Slots past `len`
/// are always `None`.
///
/// Every chunk holds `CHUNK` slots but the last, which may hold fewer: a
/// window's only chunk, doubling as the window grows (a table of three
/// rows is a chunk of four, not of 64), or a copy's last. The model checker's worlds hold a few rows
/// per table and are copied at every branch; full chunks made each copy
/// of the happy path's world allocate and copy about 100 KB.
///
/// Rows go in through `replace` only and out through `take`, `discard`,
/// `take_where` and `clear`, which keep each chunk's `occupied` bits in
/// step with its slots, so that the empty slots at the front are dropped
/// by reading those bits, not the slots.
#[derive(Debug)]
pub struct Slots<V> {
    chunks: Chunks<V>,
    /// Where slot 0 is in `chunks[0]`.
    head: usize,
    len: usize,
    /// The longest chunk freed lately, every slot `None` (see
    /// `free_chunk`).
    spare: Option<Box<[Option<V>]>>,
}

/// Up to `CHUNK` slots and which of them hold a row.
#[derive(Debug)]
struct Chunk<V> {
    /// Bit `i`: `slots[i]` is `Some`.
    occupied: u64,
    slots: Box<[Option<V>]>,
}

impl<V> Chunk<V> {
    fn empty(slots: Box<[Option<V>]>) -> Chunk<V> {
        debug_assert!(slots.len() <= CHUNK && slots.iter().all(Option::is_none));
        Chunk { occupied: 0, slots }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }
}

/// A copy holds the rows, not the spare chunk: the spare only spares an
/// allocation, and the model checker copies a world at every branch. The
/// copy starts at the window's first slot and its last chunk ends at the
/// window's last, so it holds no empty slot the window has left behind.
impl<V: Clone> Clone for Slots<V> {
    fn clone(&self) -> Slots<V> {
        let mut copy = Slots::default();
        copy.grow(self.len, true);
        for (index, slot) in self.iter().enumerate() {
            if let Some(row) = slot {
                copy.replace(index, row.clone());
            }
        }
        copy
    }
}

/// The rows in slot order: two windows holding the same rows hash alike,
/// however their chunks are laid out (the model checker's state identity).
impl<V: std::hash::Hash> std::hash::Hash for Slots<V> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.len.hash(state);
        // A chunk at a time: the identity hashes every table of a world
        // at every transition the model checker takes.
        for slot in self.iter() {
            Some(slot).hash(state);
        }
    }
}

impl<V> Default for Slots<V> {
    fn default() -> Slots<V> {
        Slots {
            chunks: Chunks::default(),
            head: 0,
            len: 0,
            spare: None,
        }
    }
}

impl<V> Slots<V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where slot `index` lives: chunk and offset (no bounds check).
    #[inline]
    fn place(&self, index: usize) -> (usize, usize) {
        let at = self.head + index;
        (at / CHUNK, at % CHUNK)
    }

    #[inline]
    pub fn get(&self, index: usize) -> Option<&Option<V>> {
        if index >= self.len {
            return None;
        }
        let (chunk, offset) = self.place(index);
        Some(&self.chunks[chunk].slots[offset])
    }

    /// The row in slot `index`, to change in place (not to take out: that
    /// is `take`).
    #[inline]
    pub fn row_mut(&mut self, index: usize) -> Option<&mut V> {
        if index >= self.len {
            return None;
        }
        let (chunk, offset) = self.place(index);
        self.chunks[chunk].slots[offset].as_mut()
    }

    /// Puts `row` in slot `index` (below `len`), returning the row that
    /// was there.
    #[inline]
    pub fn replace(&mut self, index: usize, row: V) -> Option<V> {
        assert!(index < self.len, "slot {index} of {}", self.len);
        let (chunk, offset) = self.place(index);
        let chunk = &mut self.chunks[chunk];
        let bit = 1 << offset;
        if chunk.occupied & bit == 0 {
            // An empty slot is assigned, not swapped: `Option::replace`
            // moved the old `None` out, copying a row's width of a chunk
            // untouched since it was made, where an assignment reads only
            // the old value's tag (to drop it).
            chunk.occupied |= bit;
            chunk.slots[offset] = Some(row);
            return None;
        }
        chunk.slots[offset].replace(row)
    }

    /// Slot `index` (if below `len`) with its bit cleared, for a caller
    /// about to empty it.
    #[inline]
    fn emptying(&mut self, index: usize) -> Option<&mut Option<V>> {
        if index >= self.len {
            return None;
        }
        let (chunk, offset) = self.place(index);
        let chunk = &mut self.chunks[chunk];
        chunk.occupied &= !(1 << offset);
        Some(&mut chunk.slots[offset])
    }

    /// Takes the row out of slot `index`, leaving it empty.
    #[inline]
    pub fn take(&mut self, index: usize) -> Option<V> {
        self.emptying(index)?.take()
    }

    /// Empties slot `index`, dropping its row where it lies (moving it
    /// out would read every line of a row untouched since it was
    /// written).
    #[inline]
    pub fn discard(&mut self, index: usize) {
        if let Some(slot) = self.emptying(index) {
            *slot = None;
        }
    }

    /// Takes the rows `take` says yes to out of their slots, in slot
    /// order.
    pub fn take_where(&mut self, mut take: impl FnMut(&V) -> bool) -> Vec<V> {
        let mut taken = Vec::new();
        for index in 0..self.len {
            if self
                .get(index)
                .and_then(Option::as_ref)
                .is_some_and(&mut take)
            {
                taken.extend(self.take(index));
            }
        }
        taken
    }

    /// A fresh whole chunk of empty slots: the spare one if it is whole.
    fn new_chunk(&mut self) -> Chunk<V> {
        self.new_chunk_of(CHUNK)
    }

    /// A fresh chunk for `wanted` more slots: `wanted` rounded up to a
    /// power of two, at most a whole chunk; the spare if it is at least
    /// that long.
    fn new_chunk_of(&mut self, wanted: usize) -> Chunk<V> {
        let size = wanted.next_power_of_two().min(CHUNK);
        match self.spare.take() {
            Some(spare) if spare.len() >= size => Chunk::empty(spare),
            short => {
                self.spare = short;
                Chunk::empty(empty_chunk(size))
            }
        }
    }

    /// Keeps `chunk` (every slot already `None`) as the spare, if it is at
    /// least as long as the spare it replaces. A window that moves back and
    /// forth across a chunk's edge, or empties and fills again (the API's
    /// calls, a client's requests), so takes back the chunk it grew last
    /// time instead of growing a new one from one slot.
    fn free_chunk(&mut self, chunk: Chunk<V>) {
        debug_assert!(chunk.occupied == 0 && chunk.slots.iter().all(Option::is_none));
        if self
            .spare
            .as_ref()
            .is_none_or(|spare| spare.len() <= chunk.len())
        {
            self.spare = Some(chunk.slots);
        }
    }

    /// Slots the chunks hold, from the first chunk's first.
    fn capacity(&self) -> usize {
        match self.chunks.back() {
            Some(last) => (self.chunks.len() - 1) * CHUNK + last.len(),
            None => 0,
        }
    }

    pub fn pop_front(&mut self) -> Option<Option<V>> {
        if self.len == 0 {
            return None;
        }
        let taken = self.take(0);
        self.advance_front(1);
        Some(taken)
    }

    /// Drops the empty slots at the front, returning how many. It reads
    /// the chunks' `occupied` bits, not the slots: `IdTable` drops the
    /// empty slots its oldest rows left at almost every removal, and in a
    /// long run those slots were emptied long before, so reading each was
    /// a miss of every cache (7% of the misses of a 10^6-step bench run).
    pub fn drop_empty_front(&mut self) -> usize {
        let mut dropped = 0;
        while self.len > 0 {
            let chunk = &self.chunks[0];
            let in_chunk = (chunk.len() - self.head).min(self.len);
            // No row ahead in the chunk: 64 trailing zeros, capped.
            let ahead = chunk.occupied >> self.head;
            let empty = (ahead.trailing_zeros() as usize).min(in_chunk);
            if empty == 0 {
                break;
            }
            debug_assert!(self.iter().take(empty).all(Option::is_none));
            self.advance_front(empty);
            dropped += empty;
        }
        dropped
    }

    /// Moves the window's start `by` slots on, all in the front chunk,
    /// freeing that chunk when the window leaves it.
    fn advance_front(&mut self, by: usize) {
        debug_assert!(by <= self.len && self.head + by <= self.chunks[0].len());
        self.len -= by;
        self.head += by;
        if self.head == CHUNK || self.len == 0 {
            // The front chunk is empty: slots past `len` are `None`.
            let chunk = self.chunks.pop_front().expect("a chunk holds slot 0");
            self.free_chunk(chunk);
            self.head = 0;
            if self.len == 0 {
                // Anything left is past `len`, hence empty.
                while let Some(chunk) = self.chunks.pop_front() {
                    self.free_chunk(chunk);
                }
            }
        }
    }

    /// Adds an empty slot at the front.
    pub fn push_front_empty(&mut self) {
        if self.head == 0 {
            let chunk = self.new_chunk();
            self.chunks.push_front(chunk);
            self.head = CHUNK;
        }
        self.head -= 1;
        self.len += 1;
    }

    /// Grows to `len` slots, the new ones empty.
    pub fn grow_to(&mut self, len: usize) {
        self.grow(len, false);
    }

    /// Grows to `len` slots. A window's first chunk starts as short as
    /// its rows need and doubles as they grow (the model checker's worlds
    /// hold a few rows per table); a chunk after a whole one is whole
    /// (`exact`: as short as the rows need, for a copy, which is laid out
    /// once). A window past 64 rows is a long run's, and a new last chunk
    /// grown from one slot copied its rows at each of six doublings: in a
    /// 10^6-step fuzz run that was 4% of the time (the outbox, the inbox,
    /// the broker's entries).
    fn grow(&mut self, len: usize, exact: bool) {
        debug_assert!(len >= self.len);
        let end = self.head + len;
        while self.capacity() < end {
            let before_last = self.chunks.len().saturating_sub(1) * CHUNK;
            match self.chunks.back_mut() {
                // A short last chunk doubles (at least to what is needed
                // in it, at most to a whole chunk); its rows keep their
                // places, and so their bits.
                Some(last) if last.len() < CHUNK => {
                    let in_last = end - before_last;
                    let size = (last.len() * 2).max(in_last).min(CHUNK);
                    let mut longer = std::mem::take(&mut last.slots).into_vec();
                    longer.resize_with(size, || None);
                    last.slots = longer.into_boxed_slice();
                }
                _ => {
                    let wanted = if exact || self.chunks.is_empty() {
                        end - self.capacity()
                    } else {
                        CHUNK
                    };
                    let chunk = self.new_chunk_of(wanted);
                    self.chunks.push_back(chunk);
                }
            }
        }
        self.len = len;
    }

    pub fn clear(&mut self) {
        while let Some(mut chunk) = self.chunks.pop_front() {
            chunk.slots.iter_mut().for_each(|slot| *slot = None);
            chunk.occupied = 0;
            self.free_chunk(chunk);
        }
        self.head = 0;
        self.len = 0;
    }

    pub fn iter(&self) -> impl Iterator<Item = &Option<V>> {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.slots.iter())
            .skip(self.head)
            .take(self.len)
    }
}

/// A window's chunks in order: the first held in place, the rest in a
/// deque. Most windows of the model checker's worlds hold one chunk, and
/// a copy of a world copies every table it writes (and every table not
/// behind a `CowTable`): with every chunk in the deque,
/// each non-empty table's copy allocated the deque's buffer besides its
/// chunk (an eighth of a search's allocations: 1,027,448 -> 895,159
/// blocks at 20,000 states of the happy path).
struct Chunks<V> {
    /// `None` only when there is no chunk at all.
    first: Option<Chunk<V>>,
    rest: VecDeque<Chunk<V>>,
}

impl<V> Default for Chunks<V> {
    fn default() -> Chunks<V> {
        Chunks {
            first: None,
            rest: VecDeque::new(),
        }
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for Chunks<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<V> Chunks<V> {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn back(&self) -> Option<&Chunk<V>> {
        self.rest.back().or(self.first.as_ref())
    }

    fn back_mut(&mut self) -> Option<&mut Chunk<V>> {
        match self.rest.back_mut() {
            Some(last) => Some(last),
            None => self.first.as_mut(),
        }
    }

    fn push_back(&mut self, chunk: Chunk<V>) {
        debug_assert!(self.first.is_some() || self.rest.is_empty());
        if self.first.is_none() {
            self.first = Some(chunk);
        } else {
            self.rest.push_back(chunk);
        }
    }

    fn push_front(&mut self, chunk: Chunk<V>) {
        if let Some(first) = self.first.replace(chunk) {
            self.rest.push_front(first);
        }
    }

    fn pop_front(&mut self) -> Option<Chunk<V>> {
        debug_assert!(self.first.is_some() || self.rest.is_empty());
        let first = self.first.take()?;
        self.first = self.rest.pop_front();
        Some(first)
    }

    fn iter(&self) -> impl Iterator<Item = &Chunk<V>> {
        self.first.iter().chain(self.rest.iter())
    }
}

impl<V> std::ops::Index<usize> for Chunks<V> {
    type Output = Chunk<V>;

    #[inline]
    fn index(&self, chunk: usize) -> &Chunk<V> {
        match chunk {
            0 => self.first.as_ref().expect("chunk 0 exists"),
            _ => &self.rest[chunk - 1],
        }
    }
}

impl<V> std::ops::IndexMut<usize> for Chunks<V> {
    #[inline]
    fn index_mut(&mut self, chunk: usize) -> &mut Chunk<V> {
        match chunk {
            0 => self.first.as_mut().expect("chunk 0 exists"),
            _ => &mut self.rest[chunk - 1],
        }
    }
}

/// `len` empty slots.
fn empty_chunk<V>(len: usize) -> Box<[Option<V>]> {
    std::iter::repeat_with(|| None).take(len).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window grown a slot at a time starts small, and each chunk after
    /// its first whole one is whole from the start: no row is copied to
    /// grow it. A copy ends where its rows do.
    #[test]
    fn a_long_window_grows_by_whole_chunks() {
        let mut slots: Slots<u32> = Slots::default();
        slots.grow_to(3);
        assert_eq!(slots.capacity(), 4);
        for len in 4..=200 {
            slots.grow_to(len);
            slots.replace(len - 1, len as u32);
            if len > CHUNK {
                assert!(slots.chunks.iter().all(|chunk| chunk.len() == CHUNK));
            }
        }
        assert_eq!(slots.capacity(), 4 * CHUNK);
        let copy = slots.clone();
        assert_eq!(copy.capacity(), 3 * CHUNK + 8);
        assert!(copy.iter().eq(slots.iter()));
    }

    /// A window that empties and fills again takes back the chunk it grew
    /// (the longest freed), short or whole, instead of growing a new one.
    #[test]
    fn an_emptied_window_takes_back_its_chunk() {
        let mut slots: Slots<u32> = Slots::default();
        slots.grow_to(5);
        assert_eq!(slots.capacity(), 8);
        while slots.pop_front().is_some() {}
        assert_eq!(slots.capacity(), 0);
        slots.grow_to(1);
        assert_eq!(slots.capacity(), 8, "the freed chunk of eight, again");
        slots.clear();
        slots.grow_to(70);
        assert_eq!(slots.capacity(), 2 * CHUNK);
        slots.clear();
        // Both whole chunks were freed; the spare is one of them.
        slots.grow_to(2);
        assert_eq!(slots.capacity(), CHUNK);
    }

    /// `Slots` answers as a `VecDeque<Option<u32>>` does, through pops,
    /// pushes at the front, growth, rows put in, taken and dropped, clears
    /// and copies across chunk edges; each chunk's `occupied` bits say
    /// which of its slots hold rows, always.
    #[test]
    fn slots_answer_as_a_deque_does() {
        let mut slots: Slots<u32> = Slots::default();
        let mut model: VecDeque<Option<u32>> = VecDeque::new();
        let mut state = 7u64;
        for round in 0..20_000u32 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match (state >> 33) % 9 {
                0..=2 => {
                    let len = model.len() + ((state >> 40) % 100) as usize;
                    model.resize_with(len, || None);
                    slots.grow_to(len);
                }
                // The empty front slots are dropped as `IdTable` drops them
                // (none when a row is at the front).
                3 => {
                    let mut empty = 0;
                    while model.front() == Some(&None) {
                        model.pop_front();
                        empty += 1;
                    }
                    assert_eq!(slots.drop_empty_front(), empty, "round {round}");
                }
                4 => {
                    assert_eq!(slots.pop_front(), model.pop_front(), "round {round}");
                }
                5 => {
                    model.push_front(None);
                    slots.push_front_empty();
                }
                6 if !model.is_empty() => {
                    let index = (state >> 20) as usize % model.len();
                    let was = model[index].replace(round);
                    assert_eq!(slots.replace(index, round), was, "round {round}");
                }
                // A row taken out, or dropped where it lies, leaves its
                // slot empty, so that runs of empty slots form at the front
                // and inside chunks.
                7 if !model.is_empty() => {
                    let index = (state >> 20) as usize % model.len();
                    let was = model[index].take();
                    if (state >> 45).is_multiple_of(2) {
                        assert_eq!(slots.take(index), was, "round {round}");
                    } else {
                        slots.discard(index);
                    }
                }
                8 if (state >> 50).is_multiple_of(20) => {
                    model.clear();
                    slots.clear();
                }
                // Go on with a copy: laid out afresh (its last chunk ends
                // where the window does), it answers alike.
                8 if (state >> 50).is_multiple_of(3) => {
                    slots = slots.clone();
                    assert_eq!(slots.head, 0);
                    let whole = slots.len / CHUNK;
                    let rest = slots.len % CHUNK;
                    let last = if rest == 0 {
                        0
                    } else {
                        rest.next_power_of_two()
                    };
                    assert_eq!(slots.capacity(), whole * CHUNK + last, "round {round}");
                    // A window of one chunk or none holds it in place: its
                    // copy allocated no deque.
                    if slots.len <= CHUNK {
                        assert!(slots.chunks.rest.is_empty(), "round {round}");
                    }
                }
                _ => {}
            }
            assert_eq!(slots.len(), model.len());
            assert_eq!(slots.get(0), model.front());
            assert!(slots.iter().eq(model.iter()), "round {round}");
            assert_eq!(slots.get(model.len()), None);
            for chunk in slots.chunks.iter() {
                let held = chunk
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, slot)| slot.is_some())
                    .fold(0u64, |bits, (offset, _)| bits | 1 << offset);
                assert_eq!(chunk.occupied, held, "round {round}");
            }
            assert!(slots.chunks.len() <= (slots.head + slots.len).div_ceil(CHUNK) + 1);
        }
    }
}
