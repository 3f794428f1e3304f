//! The hash index of a keyed store: an open-addressing table (linear probing) of `u32` slots,
//! each holding a slab position and, in the bits the position does not need, a tag from the
//! key's hash.
//!
//! One probe sequence is one or two adjacent cache lines, and the tag lets it skip almost every
//! other key without reading the slab, so a lookup touches one random line of the index and
//! then the entry itself. Removal shifts the following slots back instead of leaving tombstones,
//! so a store with heavy key churn keeps the index it had (at most 3/4 full, 4 bytes a slot).

use alloc::vec;
use alloc::vec::Vec;

/// Slot value of an empty slot; occupied slots hold `tag | (position + 1)`.
const EMPTY: u32 = 0;

pub(crate) struct Index {
    slots: Vec<u32>,
    /// The bits of a slot holding `position + 1`; the others hold the tag.
    position_mask: u32,
    len: usize,
}

impl Index {
    /// An index for positions below `max_positions` (at most `u32::MAX`).
    pub(crate) fn new(max_positions: usize) -> Self {
        let position_bits = usize::BITS - max_positions.leading_zeros();
        Self {
            slots: Vec::new(),
            position_mask: u32::MAX >> (32 - position_bits),
            len: 0,
        }
    }

    /// The position `is_key` accepts among those stored under `hash`.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut is_key: impl FnMut(usize) -> bool) -> Option<usize> {
        let tag = self.tag(hash);
        let mut slot = self.home(hash)?;
        loop {
            let value = self.slots[slot];
            if value == EMPTY {
                return None;
            }
            if value & !self.position_mask == tag {
                let position = (value & self.position_mask) as usize - 1;
                if is_key(position) {
                    return Some(position);
                }
            }
            slot = self.next(slot);
        }
    }

    /// Store `position` under `hash`; `hash_of(p)` gives the hash of what is at `p`, to move
    /// entries when the table grows.
    pub(crate) fn insert(&mut self, hash: u64, position: usize, hash_of: impl Fn(usize) -> u64) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow(&hash_of);
        }
        self.place(hash, position);
        self.len += 1;
    }

    /// Drop `position` (stored under `hash`); `hash_of` as for [`Index::insert`].
    pub(crate) fn remove(&mut self, hash: u64, position: usize, hash_of: impl Fn(usize) -> u64) {
        let Some(mut hole) = self.slot_of(hash, position) else {
            return;
        };
        self.len -= 1;
        // Backward shift: pull later entries of the run into the hole when their home slot
        // does not lie (cyclically) between the hole and where they are.
        let mut slot = self.next(hole);
        while self.slots[slot] != EMPTY {
            let home = self.home(hash_of(self.position(slot))).unwrap_or(slot);
            let distance_home = slot.wrapping_sub(home) & self.mask();
            let distance_hole = slot.wrapping_sub(hole) & self.mask();
            if distance_home >= distance_hole {
                self.slots[hole] = self.slots[slot];
                hole = slot;
            }
            slot = self.next(slot);
        }
        self.slots[hole] = EMPTY;
    }

    /// Record that the entry stored under `hash` at position `from` now lives at `to`.
    pub(crate) fn relocate(&mut self, hash: u64, from: usize, to: usize) {
        if let Some(slot) = self.slot_of(hash, from) {
            self.slots[slot] = self.slots[slot] & !self.position_mask | (to as u32 + 1);
        }
    }

    /// Bytes allocated.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * core::mem::size_of::<u32>()
    }

    fn slot_of(&self, hash: u64, position: usize) -> Option<usize> {
        let mut slot = self.home(hash)?;
        let wanted = self.tag(hash) | (position as u32 + 1);
        loop {
            match self.slots[slot] {
                EMPTY => return None,
                value if value == wanted => return Some(slot),
                _ => slot = self.next(slot),
            }
        }
    }

    fn place(&mut self, hash: u64, position: usize) {
        let mut slot = self.home(hash).expect("the index has slots after growing");
        while self.slots[slot] != EMPTY {
            slot = self.next(slot);
        }
        self.slots[slot] = self.tag(hash) | (position as u32 + 1);
    }

    fn grow(&mut self, hash_of: &impl Fn(usize) -> u64) {
        let size = (self.slots.len() * 2).max(8);
        let old = core::mem::replace(&mut self.slots, vec![EMPTY; size]);
        for value in old.into_iter().filter(|&value| value != EMPTY) {
            let position = (value & self.position_mask) as usize - 1;
            self.place(hash_of(position), position);
        }
    }

    /// The high half of the hash, in the bits positions leave free (the table is placed by the
    /// low half).
    fn tag(&self, hash: u64) -> u32 {
        (hash >> 32) as u32 & !self.position_mask
    }

    fn home(&self, hash: u64) -> Option<usize> {
        (!self.slots.is_empty()).then(|| hash as usize & self.mask())
    }

    fn position(&self, slot: usize) -> usize {
        (self.slots[slot] & self.position_mask) as usize - 1
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn next(&self, slot: usize) -> usize {
        (slot + 1) & self.mask()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Few home slots and few tags, so runs are long, wrap around and share tags.
    fn crowded_hash(key: u8) -> u64 {
        u64::from(key % 5) | u64::from(key % 3) << 62 | 0xff
    }

    proptest! {
        /// Inserts and removals against a map, every key looked up after each step.
        #[test]
        fn finds_exactly_what_was_stored(ops in proptest::collection::vec((any::<bool>(), 0..40_u8), 1..400)) {
            let mut index = Index::new(40);
            // Position -> key, like the slab; removal moves the last position into the hole.
            let mut slab: Vec<u8> = Vec::new();
            let mut model: HashMap<u8, usize> = HashMap::new();
            for (insert, key) in ops {
                let hash_of = |slab: &Vec<u8>, p: usize| crowded_hash(slab[p]);
                match (insert, model.get(&key).copied()) {
                    (true, None) => {
                        slab.push(key);
                        index.insert(crowded_hash(key), slab.len() - 1, |p| hash_of(&slab, p));
                        model.insert(key, slab.len() - 1);
                    }
                    (false, Some(position)) => {
                        index.remove(crowded_hash(key), position, |p| hash_of(&slab, p));
                        let last = slab.len() - 1;
                        if position != last {
                            index.relocate(crowded_hash(slab[last]), last, position);
                            model.insert(slab[last], position);
                        }
                        slab.swap_remove(position);
                        model.remove(&key);
                    }
                    _ => {}
                }
                for probe in 0..40_u8 {
                    let found = index.find(crowded_hash(probe), |p| slab[p] == probe);
                    prop_assert_eq!(found, model.get(&probe).copied(), "key {}", probe);
                }
            }
            prop_assert_eq!(index.len, model.len());
        }
    }
}
