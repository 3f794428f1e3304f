//! The set-associative table every keyed region is: a header, then sets of [`WAYS`] ways,
//! each set a lock word and its payload's counters, the ways' tags, then the ways (a key's
//! length word, its last use, the key, then the payload). One piece for [`super::Zone`],
//! [`super::Inflight`] and [`super::Leases`]: laying a region out ([`attach_header`]), a key's
//! set ([`set_of`]), locking a set with a repair after a dead owner ([`lock_set`]), finding a
//! key and dropping torn ones ([`Set`]), summing counters ([`set_totals`]).

use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};

use super::fault;
use super::keys::{Key, KeyCodec, W_KEY};
use super::lock::{self, Owner, Taken};
use crate::Error;

/// Keys per set.
pub const WAYS: usize = 8;

/// A fresh secret seed for a new region's hashes, from the process's random source.
#[cfg(feature = "std")]
pub fn random_seed() -> [u64; 2] {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new();
    [random.hash_one(1_u8), random.hash_one(2_u8)]
}
/// The room a region may give each key, in bytes (`max_key_bytes`): from a long key's
/// 16-byte digest to 64 KiB.
pub const KEY_BYTES: core::ops::RangeInclusive<usize> = 16..=65_536;

/// `max_key_bytes` checked against [`KEY_BYTES`], for every kind of region.
pub(crate) fn check_key_bytes(max_key_bytes: usize) -> Result<(), Error> {
    if KEY_BYTES.contains(&max_key_bytes) {
        return Ok(());
    }
    let got = crate::Value::UInt(max_key_bytes as u64);
    Err(Error::invalid("max_key_bytes", "from 16 to 65536", got))
}

// Header words every table begins with: the magic, the layout's fingerprint, the seed.
pub(crate) const H_MAGIC: usize = 0;
pub(crate) const H_FINGERPRINT: usize = 1;
pub(crate) const H_SEED: usize = 2; // two words

// Words of a set: its lock, then words its payload counts in (SET_HEADER in all), the ways'
// tags (0: empty), then the ways.
pub(crate) const S_LOCK: usize = 0;
pub(crate) const SET_HEADER: usize = 8;
pub(crate) const S_TAGS: usize = SET_HEADER;

// Words of a way after the key's length word: when it was last used, then the key, then
// the payload (keys.rs: W_LEN, W_KEY).
pub(crate) const W_USED_MS: usize = 1;

/// Whether [`super::Zone::attach`] found the region ready for this layout or laid it out afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// The region was empty or made for another layout: laid out anew, every key forgotten.
    Fresh,
    /// The region already held this layout: its keys and windows are kept.
    Reused,
}

/// The magic word while one caller lays a region out: this bit and the caller's owner id.
const LAYING_OUT: u64 = 1 << 63;

/// The header of a region: laid out afresh for `magic` and `fingerprint` (every word of the
/// region zeroed, `seed` stored) unless it holds them already; how, and the region's seed.
/// Callers attaching at once are safe: one claims the layout in the magic word and the others
/// wait for it (taking the claim over when its owner died), so none zeroes a region another
/// has started to use.
pub(crate) fn attach_header(
    words: &[AtomicU64],
    magic: u64,
    fingerprint: u64,
    seed: [u64; 2],
    owner: &impl Owner,
) -> (Attached, [u64; 2]) {
    let attached = loop {
        let seen = words[H_MAGIC].load(Ordering::Acquire);
        if seen == magic && words[H_FINGERPRINT].load(Ordering::Relaxed) == fingerprint {
            break Attached::Reused;
        }
        if seen & LAYING_OUT != 0 && owner.is_alive(seen & !LAYING_OUT) {
            owner.pause();
            continue;
        }
        let claim = LAYING_OUT | owner.id();
        let claimed =
            words[H_MAGIC].compare_exchange(seen, claim, Ordering::Acquire, Ordering::Relaxed);
        if claimed.is_err() {
            continue;
        }
        for word in &words[1..] {
            word.store(0, Ordering::Relaxed);
        }
        words[H_FINGERPRINT].store(fingerprint, Ordering::Relaxed);
        words[H_SEED].store(seed[0], Ordering::Relaxed);
        words[H_SEED + 1].store(seed[1], Ordering::Relaxed);
        words[H_MAGIC].store(magic, Ordering::Release);
        break Attached::Fresh;
    };
    let seed = [0, 1].map(|i| words[H_SEED + i].load(Ordering::Relaxed));
    (attached, seed)
}

/// Counters `fields` of sets `sets`, summed (read without locks: each is exact, the sum is a
/// moment's view); sets of `set_words` follow `header` words.
pub(crate) fn set_totals<const N: usize>(
    words: &[AtomicU64],
    header: usize,
    set_words: usize,
    sets: Range<usize>,
    fields: [usize; N],
) -> [u64; N] {
    let mut totals = [0; N];
    for set in sets {
        let base = header + set * set_words;
        for (total, field) in totals.iter_mut().zip(fields) {
            *total += words[base + field].load(Ordering::Relaxed);
        }
    }
    totals
}

/// The set `key` lives in, of `sets`: the high half of its hash, scaled.
pub(crate) fn set_of(key: &Key, sets: usize) -> usize {
    (((key.hash >> 32) * sets as u64) >> 32) as usize
}

/// Locks set `index` of `words` (sets of `set_words` after `header` words) for `owner`,
/// calling `repair` on it first when its last owner died holding it.
pub(crate) fn lock_set<'w>(
    words: &'w [AtomicU64],
    (header, set_words): (usize, usize),
    index: usize,
    owner: &impl Owner,
    repair: impl FnOnce(&Set<'w>),
) -> Set<'w> {
    let base = header + index * set_words;
    let set = Set {
        words: &words[base..base + set_words],
    };
    if lock::lock(&set.words[S_LOCK], owner) == Taken::FromDead {
        repair(&set);
    }
    set
}

/// One set, locked.
pub(crate) struct Set<'z> {
    pub(crate) words: &'z [AtomicU64],
}

impl Drop for Set<'_> {
    fn drop(&mut self) {
        lock::unlock(&self.words[S_LOCK]);
    }
}

impl<'z> Set<'z> {
    pub(crate) fn get(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }
    pub(crate) fn set(&self, i: usize, value: u64) {
        self.words[i].store(value, Ordering::Relaxed);
        fault::point();
    }
    pub(crate) fn add(&self, i: usize, n: u64) {
        self.set(i, self.get(i).wrapping_add(n));
    }
    /// The stored key (length word, last use, key words) of `way`, in ways of `way_words`
    /// with room for `key_words`.
    pub(crate) fn stored_key(
        &self,
        way: usize,
        way_words: usize,
        key_words: usize,
    ) -> &'z [AtomicU64] {
        let at = S_TAGS + WAYS + way * way_words;
        &self.words[at..at + W_KEY + key_words]
    }
    /// Drops the ways whose key does not match its tag (a key half written by a process that
    /// died): which ways hold a key now.
    pub(crate) fn drop_torn_keys(
        &self,
        codec: &KeyCodec,
        way_words: usize,
        key_words: usize,
    ) -> [bool; WAYS] {
        core::array::from_fn(|way| {
            let tag = self.get(S_TAGS + way);
            let torn = codec.stored_tag(self.stored_key(way, way_words, key_words)) != Some(tag);
            if tag != 0 && torn {
                self.set(S_TAGS + way, 0);
            }
            tag != 0 && !torn
        })
    }
    /// The way holding `key`, in ways of `way_words` with room for `key_words`.
    pub(crate) fn find(&self, key: &Key, way_words: usize, key_words: usize) -> Option<usize> {
        let (tag, tags) = (key.tag(), &self.words[S_TAGS..S_TAGS + WAYS]);
        (0..WAYS).find(|&way| {
            tags[way].load(Ordering::Relaxed) == tag
                && key.matches(self.stored_key(way, way_words, key_words))
        })
    }
}
