//! `Rows`: a dense table by slot, for rows that live as long as the run
//! (every task's row, the checker's mirror of it), whose rows never move
//! once written.

/// Rows per chunk. A power of two, so a slot splits with a shift and a mask.
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A table indexed by a dense 0-based slot, filled in slot order.
///
/// A `Vec` would do the same, until it grows: then every row ever written
/// is copied to a block twice the size, and for a moment both blocks are
/// live. A table that holds a row per task ever made is the largest thing
/// in a long run, so those copies were the run's biggest memory moves and
/// its peak memory. Here rows sit in fixed chunks that are never
/// reallocated: growing adds a chunk and touches nothing already written.
#[derive(Debug)]
pub struct Rows<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Rows<T> {
    fn default() -> Rows<T> {
        Rows {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Rows<T> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends the row of the next slot.
    pub fn push(&mut self, row: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(row),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(row);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    pub fn get(&self, slot: usize) -> Option<&T> {
        self.chunks.get(slot >> CHUNK_BITS)?.get(slot & (CHUNK - 1))
    }

    pub fn get_mut(&mut self, slot: usize) -> Option<&mut T> {
        self.chunks
            .get_mut(slot >> CHUNK_BITS)?
            .get_mut(slot & (CHUNK - 1))
    }

    /// The rows in slot order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> std::ops::Index<usize> for Rows<T> {
    type Output = T;

    fn index(&self, slot: usize) -> &T {
        &self.chunks[slot >> CHUNK_BITS][slot & (CHUNK - 1)]
    }
}

impl<T> std::ops::IndexMut<usize> for Rows<T> {
    fn index_mut(&mut self, slot: usize) -> &mut T {
        &mut self.chunks[slot >> CHUNK_BITS][slot & (CHUNK - 1)]
    }
}

impl<'a, T> IntoIterator for &'a Rows<T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_slots_across_chunks_and_never_move() {
        let mut rows = Rows::default();
        assert!(rows.is_empty());
        for slot in 0..2 * CHUNK {
            rows.push(slot * 10);
        }
        // The next push starts a chunk: nothing already written moves.
        let first: *const usize = &rows[0];
        let last: *const usize = &rows[2 * CHUNK - 1];
        rows.push(2 * CHUNK * 10);
        assert!(std::ptr::eq(first, &rows[0]));
        assert!(std::ptr::eq(last, &rows[2 * CHUNK - 1]));
        let total = 2 * CHUNK + 1;
        assert_eq!(rows.len(), total);
        for slot in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK] {
            assert_eq!(rows[slot], slot * 10);
            assert_eq!(rows.get(slot), Some(&(slot * 10)));
        }
        assert_eq!(rows.get(total), None);
        assert_eq!(rows.get(usize::MAX), None);
        rows[CHUNK] = 7;
        *rows.get_mut(CHUNK + 1).expect("written") = 8;
        assert_eq!(rows.get_mut(total), None);
        let expected: Vec<usize> = (0..total)
            .map(|slot| match slot {
                s if s == CHUNK => 7,
                s if s == CHUNK + 1 => 8,
                s => s * 10,
            })
            .collect();
        assert_eq!(rows.iter().copied().collect::<Vec<_>>(), expected);
        assert_eq!((&rows).into_iter().count(), total);
    }
}
