//! The storage under [`super::Keyed`]: a slab of `(key, state)` entries, a hash [`Index`] of
//! slab positions, and a CLOCK hand with one "referenced" bit per entry.
//!
//! Per key this costs the entry itself, 4-byte index slots (the index is 3/8 to 3/4 full), and
//! one bit; the limiter's config lives once in the store.

use super::index::Index;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};

/// Entries, their index, and the CLOCK state. Positions are `u32` to keep the index small,
/// which is why a store holds at most `u32::MAX` keys.
pub(crate) struct Slots<K, St> {
    entries: Vec<(K, St)>,
    index: Index,
    referenced: Vec<u64>,
    hand: usize,
}

impl<K: Hash + Eq, St> Slots<K, St> {
    /// Storage for at most `max_keys` entries (at most `u32::MAX`).
    pub(crate) fn new(max_keys: usize) -> Self {
        Self {
            entries: Vec::new(),
            index: Index::new(max_keys),
            referenced: Vec::new(),
            hand: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The position of `key` (whose hash is `hash`), marking it recently used.
    #[inline]
    pub(crate) fn find<Q>(&mut self, hash: u64, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let entries = &self.entries;
        let found = self
            .index
            .find(hash, |position| entries[position].0.borrow() == key)?;
        self.referenced[found / 64] |= 1 << (found % 64);
        Some(found)
    }

    pub(crate) fn state_mut(&mut self, position: usize) -> &mut St {
        &mut self.entries[position].1
    }

    /// Add an entry for a key not present; the caller keeps `len() < max_keys`.
    pub(crate) fn insert(
        &mut self,
        hash: u64,
        key: K,
        state: St,
        max_keys: usize,
        hasher: &impl BuildHasher,
    ) {
        let position = self.entries.len();
        if position == self.entries.capacity() {
            // Double, but never past max_keys: a full store holds no spare capacity.
            self.entries
                .reserve_exact(position.max(4).min(max_keys - position));
        }
        self.entries.push((key, state));
        if position % 64 == 0 {
            self.referenced.push(0);
        }
        self.referenced[position / 64] |= 1 << (position % 64);
        let entries = &self.entries;
        self.index
            .insert(hash, position, |p| hasher.hash_one(&entries[p].0));
    }

    /// Remove the entry at `position`; the last entry moves into its place.
    pub(crate) fn remove(&mut self, position: usize, hasher: &impl BuildHasher) -> (K, St) {
        let entries = &self.entries;
        let hash_of = |p: usize| hasher.hash_one(&entries[p].0);
        self.index.remove(hash_of(position), position, hash_of);
        let last = entries.len() - 1;
        if position != last {
            self.index.relocate(hash_of(last), last, position);
            let last_bit = self.referenced[last / 64] >> (last % 64) & 1;
            self.referenced[position / 64] &= !(1 << (position % 64));
            self.referenced[position / 64] |= last_bit << (position % 64);
        }
        self.referenced[last / 64] &= !(1 << (last % 64));
        if last % 64 == 0 {
            self.referenced.pop();
        }
        self.entries.swap_remove(position)
    }

    /// Remove every entry `idle` holds true for, returning them through `removed`.
    pub(crate) fn remove_all(
        &mut self,
        mut idle: impl FnMut(&St) -> bool,
        hasher: &impl BuildHasher,
        mut removed: impl FnMut(&St),
    ) {
        // Downwards, so the entry swapped into a freed position has already been looked at.
        for position in (0..self.entries.len()).rev() {
            if idle(&self.entries[position].1) {
                removed(&self.remove(position, hasher).1);
            }
        }
    }

    /// Advance the CLOCK hand until it frees one entry: an `idle` one wherever the hand meets it,
    /// else the first one not used since the hand last passed. Returns the entry and whether it
    /// was live (an eviction). The store must not be empty.
    pub(crate) fn remove_by_clock(
        &mut self,
        mut idle: impl FnMut(&St) -> bool,
        hasher: &impl BuildHasher,
    ) -> ((K, St), bool) {
        loop {
            if self.hand >= self.entries.len() {
                self.hand = 0;
            }
            let position = self.hand;
            if idle(&self.entries[position].1) {
                return (self.remove(position, hasher), false);
            }
            let (word, bit) = (position / 64, 1 << (position % 64));
            if self.referenced[word] & bit == 0 {
                return (self.remove(position, hasher), true);
            }
            self.referenced[word] &= !bit;
            self.hand += 1;
        }
    }

    /// The keys held, in no particular order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.iter().map(|(key, _)| key)
    }

    /// Bytes this storage allocated (entries' own heap not included).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.entries.capacity() * core::mem::size_of::<(K, St)>()
            + self.index.allocated_bytes()
            + self.referenced.capacity() * core::mem::size_of::<u64>()
    }
}
