//! The set-associative table every keyed region is: a header, then sets of [`WAYS`] ways,
//! each set a lock word and its payload's counters, the ways' tags, then the ways (a key's
//! length word, its last use, the key, then the payload). One [`Table`] for
//! [`super::Zone`], [`super::Inflight`] and [`super::Leases`], each only its payload: the cut
//! of a region ([`Cut`]), laying it out (its header: [`super::region`]), a key's set,
//! locking a set with the payload's repair after a dead owner, finding a key, taking a way
//! for a new one (its tag written last), dropping torn keys, summing counters.

use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};

use super::fault;
use super::keys::{Key, KeyCodec, W_KEY};
use super::lock::{self, Owner, Taken};
use super::region::{self, Attached, Header};
use crate::Error;

/// Keys per set.
pub const WAYS: usize = 8;

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

// Words of a set: its lock, then words its payload counts in (SET_HEADER in all), the ways'
// tags (0: empty), then the ways.
pub(crate) const S_LOCK: usize = 0;
pub(crate) const SET_HEADER: usize = 8;
pub(crate) const S_TAGS: usize = SET_HEADER;

// Words of a way after the key's length word: when it was last used, then the key, then
// the payload (keys.rs: W_LEN, W_KEY).
pub(crate) const W_USED_MS: usize = 1;

/// How a region is cut: `header` words, then `sets` sets of [`WAYS`] ways on 64-byte lines,
/// each way a key (`key_words` after its length and last-use words) and `payload_words`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cut {
    pub(crate) header: usize,
    pub(crate) key_words: usize,
    pub(crate) way_words: usize,
    pub(crate) set_words: usize,
    pub(crate) sets: usize,
}

impl Cut {
    /// The cut of `region_words` for keys of `max_key_bytes`: an error when not one set fits.
    pub(crate) fn new(
        header: usize,
        max_key_bytes: usize,
        payload_words: usize,
        region_words: usize,
    ) -> Result<Self, Error> {
        check_key_bytes(max_key_bytes)?;
        let cut = Self::of(header, max_key_bytes, payload_words);
        let sets = region_words.saturating_sub(header) / cut.set_words;
        if sets == 0 {
            return Err(Error::RegionTooSmall {
                needed: ((header + cut.set_words) * 8) as u64,
                got: (region_words * 8) as u64,
            });
        }
        Ok(Self {
            sets: sets.min(u32::MAX as usize),
            ..cut
        })
    }

    /// The cut's shape, with no sets.
    fn of(header: usize, max_key_bytes: usize, payload_words: usize) -> Self {
        let key_words = max_key_bytes.div_ceil(8);
        let way_words = W_KEY + key_words + payload_words;
        Self {
            header,
            key_words,
            way_words,
            // Sets start on 64-byte lines, so two sets never share one.
            set_words: (SET_HEADER + WAYS + WAYS * way_words).next_multiple_of(8),
            sets: 0,
        }
    }

    /// Bytes a region needs to hold at least `keys` keys.
    pub(crate) fn bytes_for(
        header: usize,
        max_key_bytes: usize,
        payload_words: usize,
        keys: usize,
    ) -> usize {
        let cut = Self::of(header, max_key_bytes, payload_words);
        (header + keys.div_ceil(WAYS).max(1) * cut.set_words) * 8
    }

    /// Bytes one key takes (its share of a set).
    pub(crate) fn bytes_per_key(
        header: usize,
        max_key_bytes: usize,
        payload_words: usize,
    ) -> usize {
        Self::of(header, max_key_bytes, payload_words).set_words * 8 / WAYS
    }

    /// The fingerprint of a region of `region_words` cut so for a payload that `payload`
    /// describes: those words, then the key's words, the sets and the region's size.
    pub(crate) fn fingerprint(
        &self,
        payload: impl IntoIterator<Item = u64>,
        region_words: usize,
    ) -> u64 {
        let cut = [self.key_words, self.sets, region_words].map(|n| n as u64);
        region::fingerprint(payload.into_iter().chain(cut))
    }

    /// Keys the region holds at once.
    pub(crate) fn capacity(&self) -> usize {
        self.sets * WAYS
    }

    /// The first word of `way` within its set.
    pub(crate) fn way(&self, way: usize) -> usize {
        S_TAGS + WAYS + way * self.way_words
    }

    /// The first word of `way`'s payload within its set.
    pub(crate) fn payload(&self, way: usize) -> usize {
        self.way(way) + W_KEY + self.key_words
    }
}

/// A table over a region: its cut, the owner its locks name, its keys' codec.
pub(crate) struct Table<R, O> {
    pub(crate) region: R,
    pub(crate) owner: O,
    pub(crate) codec: KeyCodec,
    pub(crate) cut: Cut,
    /// The region's secret seed (it keys the hashes).
    pub(crate) seed: [u64; 2],
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Table<R, O> {
    /// The table over `region`, laid out afresh for `magic` and `fingerprint` (every word
    /// zeroed, `seed` stored) unless it holds them already ([`region::attach`]).
    pub(crate) fn attach(
        region: R,
        cut: Cut,
        layout: (u64, u64),
        seed: [u64; 2],
        owner: O,
    ) -> (Self, Attached) {
        let (attached, seed) = region::attach(region.as_ref(), layout, seed, &owner);
        (Self::new(region, cut, seed, owner), attached)
    }

    /// The table over `region` laid out already for `magic` and `fingerprint` (by another
    /// module of the process); else the fingerprint it holds, nothing written.
    pub(crate) fn open(region: R, cut: Cut, layout: (u64, u64), owner: O) -> Result<Self, u64> {
        let seed = region::open(region.as_ref(), layout)?;
        Ok(Self::new(region, cut, seed, owner))
    }

    fn new(region: R, cut: Cut, seed: [u64; 2], owner: O) -> Self {
        let codec = KeyCodec::new(seed, cut.key_words * 8);
        Self {
            region,
            owner,
            codec,
            cut,
            seed,
        }
    }

    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.region.as_ref()
    }

    /// The region's header: its settings and counters for every process.
    pub(crate) fn header(&self) -> Header<'_> {
        Header {
            words: &self.words()[..self.cut.header],
        }
    }

    /// Locks the set of `key`, calling `repair` on it first when its last owner died holding it.
    pub(crate) fn lock<'a>(&'a self, key: &Key, repair: impl FnOnce(&Set<'a>)) -> Set<'a> {
        let index = (((key.hash >> 32) * self.cut.sets as u64) >> 32) as usize;
        self.lock_index(index, repair)
    }

    /// Locks set `index`, calling `repair` on it first when its last owner died holding it.
    pub(crate) fn lock_index<'a>(&'a self, index: usize, repair: impl FnOnce(&Set<'a>)) -> Set<'a> {
        let base = self.cut.header + index * self.cut.set_words;
        let set = Set {
            words: &self.words()[base..base + self.cut.set_words],
        };
        if lock::lock(&set.words[S_LOCK], &self.owner) == Taken::FromDead {
            repair(&set);
        }
        set
    }

    /// The stored key (length word, last use, key words) of `way`.
    pub(crate) fn stored_key<'s>(&self, set: &Set<'s>, way: usize) -> &'s [AtomicU64] {
        let at = self.cut.way(way);
        &set.words[at..at + W_KEY + self.cut.key_words]
    }

    /// The way holding `key`.
    pub(crate) fn find(&self, set: &Set<'_>, key: &Key) -> Option<usize> {
        let (tag, tags) = (key.tag(), &set.words[S_TAGS..S_TAGS + WAYS]);
        (0..WAYS).find(|&way| {
            tags[way].load(Ordering::Relaxed) == tag && key.matches(self.stored_key(set, way))
        })
    }

    /// Gives `way` to `key` at `now_ms`, `clear` emptying its payload. The tag goes last: a
    /// process that dies half way leaves a way whose key does not match its tag, which the
    /// repair drops.
    pub(crate) fn take(
        &self,
        set: &Set<'_>,
        way: usize,
        key: &Key,
        now_ms: i64,
        clear: impl FnOnce(),
    ) {
        set.set(S_TAGS + way, 0);
        key.store(self.stored_key(set, way));
        set.set(self.cut.way(way) + W_USED_MS, now_ms as u64);
        clear();
        set.set(S_TAGS + way, key.tag());
    }

    /// When `way` was last used.
    pub(crate) fn used_ms(&self, set: &Set<'_>, way: usize) -> u64 {
        set.get(self.cut.way(way) + W_USED_MS)
    }

    /// Marks `way` used at `now_ms`.
    pub(crate) fn touch(&self, set: &Set<'_>, way: usize, now_ms: i64) {
        set.set(self.cut.way(way) + W_USED_MS, now_ms as u64);
    }

    /// The least recently used way of `set`.
    pub(crate) fn least_recently_used(&self, set: &Set<'_>) -> usize {
        (0..WAYS).min_by_key(|&w| self.used_ms(set, w)).unwrap_or(0)
    }

    /// Drops the ways whose key does not match its tag (a key half written by a process that
    /// died): which ways hold a key now.
    pub(crate) fn drop_torn_keys(&self, set: &Set<'_>) -> [bool; WAYS] {
        core::array::from_fn(|way| {
            let tag = set.get(S_TAGS + way);
            let torn = self.codec.stored_tag(self.stored_key(set, way)) != Some(tag);
            if tag != 0 && torn {
                set.set(S_TAGS + way, 0);
            }
            tag != 0 && !torn
        })
    }

    /// Counters `fields` of sets `sets`, summed (read without locks: each is exact, the sum
    /// is a moment's view).
    pub(crate) fn totals<const N: usize>(
        &self,
        fields: [usize; N],
        sets: Range<usize>,
    ) -> [u64; N] {
        let mut totals = [0; N];
        for set in sets {
            let base = self.cut.header + set * self.cut.set_words;
            for (total, field) in totals.iter_mut().zip(fields) {
                *total += self.words()[base + field].load(Ordering::Relaxed);
            }
        }
        totals
    }
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

impl Set<'_> {
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
}
