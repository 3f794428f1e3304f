//! The set-associative table every keyed region is: a header ([`super::region`]), then sets
//! of [`WAYS`] ways, each set a lock word and its payload's counters, the ways' tags, then the
//! ways (a key's length word, its last use, the key, then the payload). One [`Table`] for
//! [`super::Zone`], [`super::Inflight`] and [`super::Leases`], each only its [`Payload`]: the
//! cut of a region ([`Cut`]), a key's set, locking a set with the repair after a dead owner
//! (torn keys dropped, then the payload's), finding a key, taking a way for a new one (empty,
//! idle, else as the payload says; its tag written last), walking the sets, summing counters.

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

/// What a table's ways hold after their keys, as the table calls on it: a [`super::Zone`]'s
/// windows, an [`super::Inflight`]'s slots, a [`super::Leases`]' lease and settle list.
pub(crate) trait Payload {
    /// Whether `way`, holding a key, holds nothing that matters at `now_ms`: a new key may
    /// take it.
    fn is_idle(&self, set: &Set<'_>, way: usize, now_ms: i64) -> bool;
    /// No way of `set` is empty or idle at `now_ms`: the way a new key takes (its key
    /// evicted), or none (the new key is refused).
    fn full(&self, set: &Set<'_>, now_ms: i64) -> Option<usize>;
    /// Empties `way`'s payload for a new key at `now_ms`.
    fn clear(&self, set: &Set<'_>, way: usize, now_ms: i64);
    /// After a takeover from a dead owner, once the keys half written were dropped: repairs
    /// the ways (`held`: those that still hold a key), recounts the set's counters and counts
    /// the repair.
    fn repair(&self, set: &Set<'_>, held: [bool; WAYS]);
}

/// How a new key found its way ([`Table::insert`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vacancy {
    /// An empty way.
    Empty,
    /// The way of an idle key.
    Idle,
    /// The way [`Payload::full`] gave.
    Full,
}

/// A key's set, locked, and the key's way in it.
pub(crate) struct Locked<'t, 'k> {
    pub(crate) set: Set<'t>,
    pub(crate) key: Key<'k>,
    /// The way holding the key, if one does.
    pub(crate) way: Option<usize>,
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

    /// Locks set `index`, repairing it first when its last owner died holding it: the keys
    /// half written dropped, then `payload`'s repair.
    pub(crate) fn lock_index<'t>(&'t self, index: usize, payload: &impl Payload) -> Set<'t> {
        let base = self.cut.header + index * self.cut.set_words;
        let set = Set {
            words: &self.words()[base..base + self.cut.set_words],
        };
        if lock::lock(&set.words[S_LOCK], &self.owner) == Taken::FromDead {
            let held = self.drop_torn_keys(&set);
            payload.repair(&set, held);
        }
        set
    }

    /// `key` as the region keeps it, its set locked ([`Table::lock_index`]) and its way.
    pub(crate) fn seek<'t, 'k>(&'t self, key: &'k [u8], payload: &impl Payload) -> Locked<'t, 'k> {
        let key = self.codec.key(key);
        let index = (((key.hash >> 32) * self.cut.sets as u64) >> 32) as usize;
        let set = self.lock_index(index, payload);
        let way = self.find(&set, &key);
        Locked { set, key, way }
    }

    /// [`Table::seek`], with a way taken for `key` at `now_ms` when it holds none
    /// ([`Table::insert`]; none when the set is full and `payload` refuses new keys).
    pub(crate) fn seek_or_insert<'t, 'k>(
        &'t self,
        key: &'k [u8],
        now_ms: i64,
        payload: &impl Payload,
    ) -> Locked<'t, 'k> {
        let mut at = self.seek(key, payload);
        if at.way.is_none() {
            at.way = self
                .insert(&at.set, &at.key, now_ms, payload)
                .map(|(way, _)| way);
        }
        at
    }

    /// Sets `sets` in turn that `wanted` picks (by their index: it may read their counters,
    /// [`Table::totals`]), each locked as [`Table::lock_index`] does until the next is.
    pub(crate) fn walk<'t, P: Payload>(
        &'t self,
        sets: Range<usize>,
        payload: &'t P,
        mut wanted: impl FnMut(usize) -> bool + 't,
    ) -> impl Iterator<Item = Set<'t>> + 't {
        sets.filter(move |&index| wanted(index))
            .map(move |index| self.lock_index(index, payload))
    }

    /// The ways of `set` that hold a key.
    pub(crate) fn held<'s>(&self, set: &'s Set<'_>) -> impl Iterator<Item = usize> + 's {
        (0..WAYS).filter(|&way| set.get(S_TAGS + way) != 0)
    }

    /// The stored key (length word, last use, key words) of `way`.
    pub(crate) fn stored_key<'s>(&self, set: &Set<'s>, way: usize) -> &'s [AtomicU64] {
        let at = self.cut.way(way);
        &set.words[at..at + W_KEY + self.cut.key_words]
    }

    /// The way holding `key`.
    fn find(&self, set: &Set<'_>, key: &Key) -> Option<usize> {
        let (tag, tags) = (key.tag(), &set.words[S_TAGS..S_TAGS + WAYS]);
        (0..WAYS).find(|&way| {
            tags[way].load(Ordering::Relaxed) == tag && key.matches(self.stored_key(set, way))
        })
    }

    /// A way for `key`, new at `now_ms`: the first empty one, else the first idle one, else
    /// the one [`Payload::full`] gives (none: the key is refused), given to the key with its
    /// payload cleared. The tag goes last: a process that dies half way leaves a way whose key
    /// does not match its tag, which the repair drops.
    pub(crate) fn insert(
        &self,
        set: &Set<'_>,
        key: &Key,
        now_ms: i64,
        payload: &impl Payload,
    ) -> Option<(usize, Vacancy)> {
        let empty = (0..WAYS).find(|&way| set.get(S_TAGS + way) == 0);
        let (way, vacancy) = match empty {
            Some(way) => (way, Vacancy::Empty),
            None => match (0..WAYS).find(|&way| payload.is_idle(set, way, now_ms)) {
                Some(way) => (way, Vacancy::Idle),
                None => (payload.full(set, now_ms)?, Vacancy::Full),
            },
        };
        set.set(S_TAGS + way, 0);
        key.store(self.stored_key(set, way));
        self.touch(set, way, now_ms);
        payload.clear(set, way, now_ms);
        set.set(S_TAGS + way, key.tag());
        Some((way, vacancy))
    }

    /// Drops the key of `way`.
    pub(crate) fn forget(&self, set: &Set<'_>, way: usize) {
        set.set(S_TAGS + way, 0);
    }

    /// Marks `way` used at `now_ms`.
    pub(crate) fn touch(&self, set: &Set<'_>, way: usize, now_ms: i64) {
        set.set(self.cut.way(way) + W_USED_MS, now_ms as u64);
    }

    /// The least recently used way of `set`.
    pub(crate) fn least_recently_used(&self, set: &Set<'_>) -> usize {
        let used_ms = |way: usize| set.get(self.cut.way(way) + W_USED_MS);
        (0..WAYS).min_by_key(|&way| used_ms(way)).unwrap_or(0)
    }

    /// Drops the ways whose key does not match its tag (a key half written by a process that
    /// died): which ways hold a key now.
    fn drop_torn_keys(&self, set: &Set<'_>) -> [bool; WAYS] {
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
