//! A keyed limiter over one region of shared memory, for every process that maps it: the
//! workers of one nginx count each key once, exactly as one in-process [`crate::Keyed`] would.
//!
//! The region is anything that reads as a slice of [`AtomicU64`] words (the host maps the
//! memory; this crate has no `unsafe`). It holds a header and `sets` of [`WAYS`] keys each, like a set-associative cache:
//! a key's seeded hash picks its set, and each set has its own lock word, so calls on different
//! keys rarely wait for each other and a hot key only holds up the keys of its set.
//!
//! - **Same answers as in process.** A key's state is the limiter's own state type, with its
//!   arrays in the region ([`crate::storage`]); the algorithm is the one in-process limiters
//!   run. A log keeps room for `min(limit, window_ms)` entries per key, the most it can hold.
//! - **Bounded.** Everything lives in the region: its size fixes how many keys fit
//!   ([`Zone::capacity`]). Keys of up to `max_key_bytes` are stored as they are; longer keys
//!   as a 128-bit keyed digest (SipHash under the region's secret seed), never refused.
//! - **Full.** A new key takes an empty way of its set, else an idle one (its window holds
//!   nothing: reclaimed, no answer changes), else the least recently used one (evicted).
//!   Eviction is per set, so it approximates least-recently-used over the whole region.
//! - **Crash safe.** A lock word names its owner ([`Owner`]); a process killed while holding
//!   one is found dead by the next waiter, which takes the lock and repairs the set: ways whose
//!   key does not match its tag are dropped, states the algorithm cannot have made are emptied
//!   (a half-written log or bucket ring), derived totals are recounted. [`ZoneStats::repairs`]
//!   counts such takeovers.
//! - **Reusable.** A region made for the same layout (algorithm, config, key length, size) is
//!   attached as it is ([`Attached::Reused`]): an nginx reload keeps every key's window.
//!
//! ```
//! use core::sync::atomic::AtomicU64;
//! use slidewin::shared::{Owner, Zone};
//! use slidewin::{Quota, SlidingLog};
//!
//! struct OneProcess;
//! impl Owner for OneProcess {
//!     fn id(&self) -> u64 { 1 }
//!     fn is_alive(&self, _: u64) -> bool { true }
//! }
//!
//! let words: Vec<AtomicU64> = (0..4096).map(|_| AtomicU64::new(0)).collect();
//! let (zone, _) = Zone::<_, SlidingLog, _>::attach(&words, Quota::new(2, 1_000)?, 64, OneProcess, [7, 9])?;
//! assert!(zone.check_at(b"alice", 0, 1)?.allowed);
//! assert!(zone.check_at(b"alice", 10, 1)?.allowed);
//! assert_eq!(zone.check_at(b"alice", 20, 1)?.retry_after_ms, Some(980));
//! assert!(zone.check_at(b"bob", 20, 1)?.allowed);
//! assert_eq!(zone.stats().keys, 2);
//! # Ok::<(), slidewin::Error>(())
//! ```

mod keys;
mod layout;
mod lock;
mod state;
#[cfg(test)]
mod tests;

pub use lock::Owner;
#[cfg(feature = "std")]
pub use lock::ProcessOwner;
pub use state::SharedLimiter;

use core::sync::atomic::{AtomicU64, Ordering};

use crate::clock::check_time;
use crate::{Decision, Error};
use keys::{Key, KeyCodec};
use layout::Layout;
use lock::Taken;

/// Keys per set.
pub const WAYS: usize = 8;
/// Header words of the region.
const HEADER_WORDS: usize = 16;
const MAGIC: u64 = u64::from_le_bytes(*b"slidewn1");
// Header word indices.
const H_MAGIC: usize = 0;
const H_FINGERPRINT: usize = 1;
const H_SEED: usize = 2; // two words

// Words of a set: a header, the ways' tags (0: empty), then the ways.
const S_LOCK: usize = 0;
const S_ALLOWED: usize = 1;
const S_REJECTED: usize = 2;
const S_EVICTIONS: usize = 3;
const S_RECLAIMED: usize = 4;
const S_REPAIRS: usize = 5;
const S_KEYS: usize = 6;
const SET_HEADER: usize = 8;
const S_TAGS: usize = SET_HEADER;

// Words of a way: the key's length word, when it was last used, the key, then the state.
const W_LEN: usize = 0;
const W_USED_MS: usize = 1;
const W_KEY: usize = 2;

/// Whether [`Zone::attach`] found the region ready for this layout or laid it out afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// The region was empty or made for another layout: laid out anew, every key forgotten.
    Fresh,
    /// The region already held this layout: its keys and windows are kept.
    Reused,
}

/// Counters of a region, summed over its sets (for every process that shares it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZoneStats {
    /// Keys held now.
    pub keys: u64,
    /// Keys the region can hold.
    pub capacity: u64,
    /// Live keys dropped to make room.
    pub evictions: u64,
    /// Idle keys (empty window) dropped to make room.
    pub reclaimed: u64,
    /// Locks taken over from a dead process (its set repaired).
    pub repairs: u64,
    /// Calls admitted.
    pub allowed: u64,
    /// Calls refused.
    pub rejected: u64,
}

/// A keyed limiter `L` over a shared region; see the [module docs](self).
pub struct Zone<R, L: SharedLimiter, O: Owner> {
    region: R,
    config: L::Config,
    layout: Layout,
    codec: KeyCodec,
    owner: O,
}

/// One set, locked.
struct Set<'z> {
    words: &'z [AtomicU64],
}

impl Drop for Set<'_> {
    fn drop(&mut self) {
        lock::unlock(&self.words[S_LOCK]);
    }
}

impl Set<'_> {
    fn get(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }
    fn set(&self, i: usize, value: u64) {
        self.words[i].store(value, Ordering::Relaxed);
    }
    fn add(&self, i: usize, n: u64) {
        self.set(i, self.get(i).wrapping_add(n));
    }
}

impl<R: AsRef<[AtomicU64]>, L: SharedLimiter, O: Owner> Zone<R, L, O> {
    /// Bytes one key takes in a region (its share of a set), for sizing: a region of `size`
    /// bytes holds about `size / bytes_per_key` keys.
    pub fn bytes_per_key(config: &L::Config, max_key_bytes: usize) -> Result<usize, Error> {
        let (key_words, state_words) = Layout::per_key::<L>(config, max_key_bytes)?;
        let set_words =
            (SET_HEADER + WAYS + WAYS * (W_KEY + key_words + state_words)).next_multiple_of(8);
        Ok(set_words * 8 / WAYS)
    }

    /// How many keys a region of `size_bytes` holds for `config`: an error naming `size`
    /// when not one set of keys fits, before any memory is mapped.
    pub fn capacity_for(
        config: &L::Config,
        max_key_bytes: usize,
        size_bytes: usize,
    ) -> Result<usize, Error> {
        Ok(Layout::new::<L>(config, max_key_bytes, size_bytes / 8)?.sets * WAYS)
    }

    /// The limiter `config` over `words`, for keys of up to `max_key_bytes` stored as they are.
    /// A region already laid out for the same layout is reused as it is; any other is laid out
    /// anew with `seed` (secret and random: it keys the hashes). Attach before the region is
    /// shared (nginx: in the master, before the workers fork), or from processes that all
    /// attach with the same layout.
    pub fn attach(
        region: R,
        config: L::Config,
        max_key_bytes: usize,
        owner: O,
        seed: [u64; 2],
    ) -> Result<(Self, Attached), Error> {
        let words = region.as_ref();
        let layout = Layout::new::<L>(&config, max_key_bytes, words.len())?;
        let fingerprint = layout.fingerprint::<L>(&config, words.len());
        let header = |i: usize| &words[i];
        let reused = header(H_MAGIC).load(Ordering::Acquire) == MAGIC
            && header(H_FINGERPRINT).load(Ordering::Relaxed) == fingerprint;
        if !reused {
            header(H_MAGIC).store(0, Ordering::Relaxed);
            for word in &words[1..] {
                word.store(0, Ordering::Relaxed);
            }
            header(H_FINGERPRINT).store(fingerprint, Ordering::Relaxed);
            header(H_SEED).store(seed[0], Ordering::Relaxed);
            header(H_SEED + 1).store(seed[1], Ordering::Relaxed);
            header(H_MAGIC).store(MAGIC, Ordering::Release);
        }
        let seed = [0, 1].map(|i| header(H_SEED + i).load(Ordering::Relaxed));
        let codec = KeyCodec::new(seed, layout.key_words * 8);
        let zone = Self {
            region,
            config,
            layout,
            codec,
            owner,
        };
        Ok((
            zone,
            if reused {
                Attached::Reused
            } else {
                Attached::Fresh
            },
        ))
    }

    /// Keys the region holds at most.
    pub fn capacity(&self) -> usize {
        self.layout.sets * WAYS
    }

    /// The limiter's config.
    pub fn config(&self) -> &L::Config {
        &self.config
    }

    /// Decide for `key` at `now_ms` and record `cost` when it fits.
    pub fn check_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        self.decide(key, now_ms, cost, true)
    }

    /// Decide for `key` without recording anything (an unknown key is not stored).
    pub fn peek_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        self.decide(key, now_ms, cost, false)
    }

    /// Give back `cost` recorded for `key` (nothing for an unknown key).
    pub fn uncommit_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        check_time("now_ms", now_ms)?;
        let key = self.codec.key(key);
        let set = self.lock(&key);
        match self.find(&set, &key) {
            Some(way) => L::refund_in(&self.config, self.state(&set, way), now_ms, cost),
            None => Ok(()),
        }
    }

    /// Forget `key`.
    pub fn reset(&self, key: &[u8]) {
        let key = self.codec.key(key);
        let set = self.lock(&key);
        if let Some(way) = self.find(&set, &key) {
            set.set(S_TAGS + way, 0);
            set.add(S_KEYS, u64::MAX);
        }
    }

    /// Counters summed over every set (read without locks: each is exact, the sum is a
    /// moment's view).
    pub fn stats(&self) -> ZoneStats {
        let mut stats = ZoneStats {
            capacity: self.capacity() as u64,
            ..ZoneStats::default()
        };
        for set in 0..self.layout.sets {
            let base = HEADER_WORDS + set * self.layout.set_words;
            let get = |i: usize| self.words()[base + i].load(Ordering::Relaxed);
            stats.keys += get(S_KEYS);
            stats.evictions += get(S_EVICTIONS);
            stats.reclaimed += get(S_RECLAIMED);
            stats.repairs += get(S_REPAIRS);
            stats.allowed += get(S_ALLOWED);
            stats.rejected += get(S_REJECTED);
        }
        stats
    }

    fn decide(&self, key: &[u8], now_ms: i64, cost: u64, commit: bool) -> Result<Decision, Error> {
        check_time("now_ms", now_ms)?;
        let key = self.codec.key(key);
        let set = self.lock(&key);
        let way = match self.find(&set, &key) {
            Some(way) => way,
            // A peek at an unknown key answers for an empty window and stores nothing.
            None if !commit => {
                let mut empty = L::new_state(&self.config);
                return L::decide(&self.config, &mut empty, now_ms, cost, false);
            }
            None => self.insert(&set, &key, now_ms),
        };
        let decision = L::decide_in(&self.config, self.state(&set, way), now_ms, cost, commit)?;
        set.set(self.way(way) + W_USED_MS, now_ms as u64);
        if commit {
            set.add(
                if decision.allowed {
                    S_ALLOWED
                } else {
                    S_REJECTED
                },
                1,
            );
        }
        Ok(decision)
    }

    /// Locks the set of `key`, repairing it first when its last owner died holding it.
    fn words(&self) -> &[AtomicU64] {
        self.region.as_ref()
    }

    fn lock(&self, key: &Key) -> Set<'_> {
        let set = (((key.hash >> 32) * self.layout.sets as u64) >> 32) as usize;
        let base = HEADER_WORDS + set * self.layout.set_words;
        let set = Set {
            words: &self.words()[base..base + self.layout.set_words],
        };
        if lock::lock(&set.words[S_LOCK], &self.owner) == Taken::FromDead {
            self.repair(&set);
        }
        set
    }

    /// First word of `way` within its set.
    fn way(&self, way: usize) -> usize {
        S_TAGS + WAYS + way * self.layout.way_words
    }

    fn state<'s>(&self, set: &Set<'s>, way: usize) -> &'s [AtomicU64] {
        let at = self.way(way) + W_KEY + self.layout.key_words;
        &set.words[at..at + self.layout.state_words]
    }

    fn stored_key<'s>(&self, set: &Set<'s>, way: usize) -> &'s [AtomicU64] {
        let at = self.way(way);
        &set.words[at..at + W_KEY + self.layout.key_words]
    }

    fn find(&self, set: &Set<'_>, key: &Key) -> Option<usize> {
        (0..WAYS).find(|&way| {
            set.get(S_TAGS + way) == key.tag() && key.matches(self.stored_key(set, way))
        })
    }

    /// A way for `key`: an empty one, else an idle one, else the least recently used.
    fn insert(&self, set: &Set<'_>, key: &Key, now_ms: i64) -> usize {
        let empty = (0..WAYS).find(|&way| set.get(S_TAGS + way) == 0);
        let way = empty.unwrap_or_else(|| {
            let idle = (0..WAYS).find(|&w| L::is_idle_in(&self.config, self.state(set, w), now_ms));
            if let Some(way) = idle {
                set.add(S_RECLAIMED, 1);
                return way;
            }
            set.add(S_EVICTIONS, 1);
            let used_ms = |w: usize| set.get(self.way(w) + W_USED_MS) as i64;
            (0..WAYS).min_by_key(|&w| used_ms(w)).unwrap_or(0)
        });
        if empty.is_some() {
            set.add(S_KEYS, 1);
        }
        // The tag goes last: a process that dies half way leaves a way whose key does not
        // match its tag, which the repair drops.
        set.set(S_TAGS + way, 0);
        key.store(self.stored_key(set, way));
        set.set(self.way(way) + W_USED_MS, now_ms as u64);
        L::clear_in(&self.config, self.state(set, way));
        set.set(S_TAGS + way, key.tag());
        way
    }

    /// After a takeover from a dead owner: drop ways whose key does not match its tag, empty
    /// states the algorithm cannot have made, recount the keys.
    fn repair(&self, set: &Set<'_>) {
        let mut keys = 0;
        for way in 0..WAYS {
            let tag = set.get(S_TAGS + way);
            if tag == 0 {
                continue;
            }
            if self.codec.stored_tag(self.stored_key(set, way)) != Some(tag) {
                set.set(S_TAGS + way, 0);
                continue;
            }
            if !L::repair_in(&self.config, self.state(set, way)) {
                L::clear_in(&self.config, self.state(set, way));
            }
            keys += 1;
        }
        set.set(S_KEYS, keys);
        set.add(S_REPAIRS, 1);
    }
}
