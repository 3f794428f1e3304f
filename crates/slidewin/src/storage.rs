//! Where a limiter's per-key state keeps its arrays: on the heap for the in-process limiters, or
//! in words of a shared memory region. The algorithms are written once over these traits, so a
//! state in shared memory answers exactly as the same state on the heap.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A fixed array of 64-bit counters.
pub trait Cells {
    /// How many counters.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Counter `i` (`i < len`).
    fn get(&self, i: usize) -> u64;
    /// Sets counter `i` (`i < len`).
    fn set(&mut self, i: usize, value: u64);
    /// Heap bytes held.
    fn heap_bytes(&self) -> usize;
    /// Sets every counter to 0.
    fn clear(&mut self) {
        for i in 0..self.len() {
            self.set(i, 0);
        }
    }
}

impl Cells for Box<[u64]> {
    #[inline]
    fn len(&self) -> usize {
        <[u64]>::len(self)
    }
    #[inline]
    fn get(&self, i: usize) -> u64 {
        self[i]
    }
    #[inline]
    fn set(&mut self, i: usize, value: u64) {
        self[i] = value;
    }
    fn heap_bytes(&self) -> usize {
        <[u64]>::len(self) * core::mem::size_of::<u64>()
    }
    fn clear(&mut self) {
        self.fill(0);
    }
}

/// Words of a shared region, read and written by the one holder of their lock. Every access is
/// atomic (so a reader never tears a word), and `Relaxed`: the lock orders them.
#[derive(Debug, Clone, Copy)]
pub struct SharedCells<'a>(pub(crate) &'a [AtomicU64]);

impl Cells for SharedCells<'_> {
    #[inline]
    fn len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn get(&self, i: usize) -> u64 {
        self.0[i].load(Relaxed)
    }
    #[inline]
    fn set(&mut self, i: usize, value: u64) {
        self.0[i].store(value, Relaxed);
        crate::shared::fault::point();
    }
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// One millisecond of a [`crate::SlidingLog`] that admitted cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub(crate) ms: i64,
    /// Cost admitted through this entry since the state began (wrapping: only differences
    /// between entries in one window are read, and those are at most `limit`).
    pub(crate) through: u64,
}

/// The entries of a log, oldest first: a growable deque on the heap, or a fixed ring in shared
/// memory (sized for the most entries a log can hold, `min(limit, window_ms)`).
pub trait Entries {
    /// How many entries.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Entry `i`, oldest first (`i < len`).
    fn get(&self, i: usize) -> Entry;
    /// Sets the running sum of the newest entry (there is one).
    fn set_back_through(&mut self, through: u64);
    /// Sets entry `i` (`i < len`).
    fn set(&mut self, i: usize, entry: Entry);
    /// Appends a newest entry.
    fn push_back(&mut self, entry: Entry);
    /// Drops the oldest entry (there is one).
    fn pop_front(&mut self);
    /// Drops the newest entry (there is one).
    fn pop_back(&mut self);
    /// Heap bytes held.
    fn heap_bytes(&self) -> usize;
}

impl Entries for VecDeque<Entry> {
    #[inline]
    fn len(&self) -> usize {
        VecDeque::len(self)
    }
    #[inline]
    fn get(&self, i: usize) -> Entry {
        self[i]
    }
    #[inline]
    fn set_back_through(&mut self, through: u64) {
        if let Some(back) = self.back_mut() {
            back.through = through;
        }
    }
    fn set(&mut self, i: usize, entry: Entry) {
        self[i] = entry;
    }
    #[inline]
    fn push_back(&mut self, entry: Entry) {
        VecDeque::push_back(self, entry);
    }
    #[inline]
    fn pop_front(&mut self) {
        VecDeque::pop_front(self);
    }
    #[inline]
    fn pop_back(&mut self) {
        VecDeque::pop_back(self);
    }
    fn heap_bytes(&self) -> usize {
        self.capacity() * core::mem::size_of::<Entry>()
    }
}

/// A fixed ring of entries over [`Cells`] (two cells an entry): `head` is the oldest.
#[derive(Debug, Clone, Copy)]
pub struct Ring<C> {
    pub(crate) cells: C,
    pub(crate) head: usize,
    pub(crate) len: usize,
}

impl<C: Cells> Ring<C> {
    /// How many entries the ring holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.cells.len() / 2
    }

    /// The first cell of entry `i`.
    #[inline]
    fn cell(&self, i: usize) -> usize {
        let slot = self.head + i;
        let cap = self.capacity();
        2 * if slot >= cap { slot - cap } else { slot }
    }
}

impl<C: Cells> Entries for Ring<C> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }
    #[inline]
    fn get(&self, i: usize) -> Entry {
        let at = self.cell(i);
        Entry {
            ms: self.cells.get(at) as i64,
            through: self.cells.get(at + 1),
        }
    }
    #[inline]
    fn set_back_through(&mut self, through: u64) {
        let at = self.cell(self.len - 1);
        self.cells.set(at + 1, through);
    }
    fn set(&mut self, i: usize, entry: Entry) {
        let at = self.cell(i);
        self.cells.set(at, entry.ms as u64);
        self.cells.set(at + 1, entry.through);
    }
    #[inline]
    fn push_back(&mut self, entry: Entry) {
        // A log never holds more than the ring's capacity (see `shared::Layout`).
        debug_assert!(self.len < self.capacity());
        let at = self.cell(self.len);
        self.cells.set(at, entry.ms as u64);
        self.cells.set(at + 1, entry.through);
        self.len += 1;
    }
    #[inline]
    fn pop_front(&mut self) {
        self.head += 1;
        if self.head == self.capacity() {
            self.head = 0;
        }
        self.len -= 1;
    }
    #[inline]
    fn pop_back(&mut self) {
        self.len -= 1;
    }
    fn heap_bytes(&self) -> usize {
        0
    }
}
