//! Many limiters behind one bound: key -> limiter state, for per-user and per-route limits.
//!
//! [`Keyed`] keeps the limiter's config once and, per key, only the limiter's compact state
//! (`L::State`), so a million keys cost a few tens of bytes each.
//!
//! ```
//! use slidewin::{Keyed, Quota, SlidingCounter};
//! let config = Quota::new(2, 1_000).unwrap();
//! let mut per_user: Keyed<SlidingCounter, String> = Keyed::new(config, 10_000).unwrap();
//! assert!(per_user.check_at("alice", 0, 1).unwrap().allowed);
//! assert!(per_user.check_at("alice", 10, 1).unwrap().allowed);
//! assert!(!per_user.check_at("alice", 20, 1).unwrap().allowed);
//! assert!(per_user.check_at("bob", 20, 1).unwrap().allowed); // every key has its own window
//! assert_eq!(per_user.len(), 2);
//! assert_eq!(
//!     Keyed::<SlidingCounter>::new(config, 0).unwrap_err().to_string(),
//!     "max_keys must be a positive integer below 2^32, got 0"
//! );
//! ```
//!
//! Memory is bounded by `max_keys`:
//!
//! - **Idle keys are reclaimed first.** A key whose window has emptied holds nothing, so
//!   dropping it changes no answer. When the store is full it sweeps such keys out
//!   (at most once per `max_keys / 8` new keys, so the sweep costs O(1) amortised per call);
//!   the eviction hand below also takes any idle key it passes.
//! - **Then the least recently used key is evicted, approximately:** eviction is CLOCK
//!   (second chance), which approximates LRU. A key used since the hand last passed it is
//!   spared once. Evicting a live key forgets its window, so it starts afresh: size
//!   `max_keys` above your number of concurrently active keys. [`KeyedStats::evictions`]
//!   counts evictions.
//!
//! ```
//! use slidewin::{Keyed, Quota, SlidingCounter};
//! let mut store = Keyed::<SlidingCounter>::new(Quota::new(10, 1_000)?, 2)?;
//! store.check_at(&1, 0, 1)?;
//! store.check_at(&2, 0, 1)?;
//! store.check_at(&3, 2_000, 1)?; // full, but 1 and 2 are idle by now: both reclaimed
//! store.check_at(&4, 2_000, 1)?;
//! assert_eq!((store.stats().reclaimed, store.stats().evictions), (2, 0));
//! store.check_at(&5, 2_000, 1)?; // full of live keys: one is evicted
//! assert_eq!((store.len(), store.stats().evictions), (2, 1));
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! Keys are hashed with a secret random seed ([`KeyHasher`]), so attacker-chosen keys cannot
//! be made to collide. For byte-string keys, [`Keyed::with_max_key_bytes`] bounds each key's
//! bytes too: longer keys are kept as a 16-byte seeded digest. [`ShardedKeyed`] (feature `std`) is the `Send + Sync` form, with one
//! lock per shard.
//!
//! ## Memory
//!
//! Per key: the entry `(K, L::State)` (32 bytes for `u64` keys and
//! [`SlidingCounter`](crate::SlidingCounter)), 4-byte index slots kept 3/8 to 3/4 full
//! (5.3 to 10.7 bytes), and one bit. [`Keyed::bytes_estimate`] adds these up with the heap the
//! states own (a [`SlidingLog`](crate::SlidingLog)'s entries). 1,000,000 `u64` keys of a
//! `Keyed<SlidingCounter>` measured 40.6 bytes each in resident memory (BENCHMARKS.md).
//! A `Vec<u8>` key adds its heap text: at most `max(max_key_bytes, 16)` bytes with
//! [`Keyed::with_max_key_bytes`] (plus the allocator's rounding), otherwise the key's length.
//!
//! A dropped key forgets everything, including the newest time it saw: the limiters read a
//! clock that stepped back as that newest time, which a dropped key no longer has.

mod bytes;
mod hasher;
mod index;
#[cfg(feature = "std")]
mod sharded;
mod slots;

pub use hasher::KeyHasher;
#[cfg(feature = "std")]
pub use sharded::ShardedKeyed;

use crate::reservation::Amend;
use crate::{Decision, Error, Limiter, Value};
use alloc::borrow::ToOwned;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use slots::Slots;

/// Counters of a keyed store since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyedStats {
    /// Keys held now.
    pub keys: usize,
    /// Live keys dropped to make room (their windows were forgotten).
    pub evictions: u64,
    /// Idle keys dropped (their windows were empty, so nothing was lost).
    pub reclaimed: u64,
    /// Committing calls ([`Keyed::check_at`]) that were allowed.
    pub allowed: u64,
    /// Committing calls that were refused.
    pub rejected: u64,
}

/// Key -> limiter state with at most `max_keys` keys; see the [module docs](self).
pub struct Keyed<L: Limiter, K = u64, S = KeyHasher> {
    config: L::Config,
    hasher: S,
    slots: Slots<K, L::State>,
    max_keys: usize,
    stats: KeyedStats,
    /// Sum of `L::heap_bytes` over the held states, kept up to date on every change.
    state_heap_bytes: usize,
    /// New keys since the last sweep for idle keys; sweeps wait for `max_keys / 8` of them.
    new_since_sweep: usize,
    /// Byte-string keys longer than this are kept as a digest ([`Keyed::with_max_key_bytes`]).
    max_key_bytes: usize,
}

#[cfg(feature = "std")]
impl<L: Limiter, K: Hash + Eq> Keyed<L, K, KeyHasher> {
    /// A store of at most `max_keys` keys (`1..2^32`), hashing with a fresh random seed.
    pub fn new(config: L::Config, max_keys: usize) -> Result<Self, Error> {
        Self::with_hasher(config, max_keys, KeyHasher::default())
    }
}

impl<L: Limiter, K: Hash + Eq, S: BuildHasher> Keyed<L, K, S> {
    /// A store of at most `max_keys` keys (`1..2^32`) hashing with `hasher`; seed it randomly.
    pub fn with_hasher(config: L::Config, max_keys: usize, hasher: S) -> Result<Self, Error> {
        check_max_keys("max_keys", max_keys)?;
        Ok(Self {
            config,
            hasher,
            slots: Slots::new(max_keys),
            max_keys,
            stats: KeyedStats::default(),
            state_heap_bytes: 0,
            new_since_sweep: max_keys,
            max_key_bytes: usize::MAX,
        })
    }

    /// Decide whether `cost` fits `key`'s window at `now_ms`, and record it when it does.
    /// A key is created only when something is recorded.
    pub fn check_at<Q>(&mut self, key: &Q, now_ms: i64, cost: u64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.check_hashed(self.hasher.hash_one(key), key, now_ms, cost)
    }

    /// Decide like [`Keyed::check_at`] without recording anything or creating the key.
    pub fn peek_at<Q>(&mut self, key: &Q, now_ms: i64, cost: u64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.peek_hashed(self.hasher.hash_one(key), key, now_ms, cost)
    }

    /// Give back `cost` recorded earlier for `key`, the newest first; an unknown key has
    /// nothing to refund.
    pub fn uncommit_at<Q>(&mut self, key: &Q, now_ms: i64, cost: u64) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.amend_hashed(
            self.hasher.hash_one(key),
            key,
            (now_ms, None),
            Amend::GiveBack(cost),
        )
    }

    /// Forget `key` entirely.
    pub fn reset<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.reset_hashed(self.hasher.hash_one(key), key)
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys held at once.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The config every key's limiter uses.
    pub fn config(&self) -> &L::Config {
        &self.config
    }

    /// Bytes this store holds: its own size, its tables' allocations and the heap the limiter
    /// states own. Heap owned by the keys themselves (a `String` key's text) is not counted.
    pub fn bytes_estimate(&self) -> usize {
        core::mem::size_of::<Self>() + self.allocated_bytes()
    }

    /// [`Keyed::bytes_estimate`] less the struct itself.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.allocated_bytes() + self.state_heap_bytes
    }

    /// Counters since the store was made.
    pub fn stats(&self) -> KeyedStats {
        KeyedStats {
            keys: self.len(),
            ..self.stats
        }
    }

    #[inline]
    pub(crate) fn check_hashed<Q>(
        &mut self,
        hash: u64,
        key: &Q,
        now_ms: i64,
        cost: u64,
    ) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.decide_hashed(hash, key, now_ms, true, |config, state, commit| {
            L::decide(config, state, now_ms, cost, commit)
        })
    }

    pub(crate) fn peek_hashed<Q>(
        &mut self,
        hash: u64,
        key: &Q,
        now_ms: i64,
        cost: u64,
    ) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.peek_hashed_by(hash, key, |config, state, commit| {
            L::decide(config, state, now_ms, cost, commit)
        })
    }

    /// A check (`commit`) or a peek whose decision `decide` makes over the key's state and its
    /// `commit` (e.g. a [`crate::rule::Rule`] under a caller's limits).
    #[inline]
    pub(crate) fn decide_hashed<Q>(
        &mut self,
        hash: u64,
        key: &Q,
        now_ms: i64,
        commit: bool,
        decide: impl Fn(&L::Config, &mut L::State, bool) -> Result<Decision, Error>,
    ) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if !commit {
            return self.peek_hashed_by(hash, key, decide);
        }
        let decision = match self.slots.find(hash, key) {
            Some(position) => self.update_state(position, |c, s| decide(c, s, true))?,
            None => {
                let mut state = L::new_state(&self.config);
                let decision = decide(&self.config, &mut state, true)?;
                // An idle state is a fresh one: keep only states that recorded something.
                if !L::is_idle(&self.config, &state, now_ms) {
                    self.insert(hash, key.to_owned(), state, now_ms);
                }
                decision
            }
        };
        if decision.allowed {
            self.stats.allowed += 1;
        } else {
            self.stats.rejected += 1;
        }
        Ok(decision)
    }

    fn peek_hashed_by<Q>(
        &mut self,
        hash: u64,
        key: &Q,
        decide: impl Fn(&L::Config, &mut L::State, bool) -> Result<Decision, Error>,
    ) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        match self.slots.find(hash, key) {
            Some(position) => self.update_state(position, |c, s| decide(c, s, false)),
            None => decide(&self.config, &mut L::new_state(&self.config), false),
        }
    }

    pub(crate) fn amend_hashed<Q>(
        &mut self,
        hash: u64,
        key: &Q,
        (now_ms, stamp_ms): (i64, Option<i64>),
        amend: Amend,
    ) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let amend = |config: &L::Config, state: &mut L::State| {
            L::amend(config, state, now_ms, stamp_ms, amend)
        };
        match self.slots.find(hash, key) {
            Some(position) => self.update_state(position, amend),
            // Still judge the arguments, so a bad call fails the same for every key.
            None => amend(&self.config, &mut L::new_state(&self.config)),
        }
    }

    pub(crate) fn reset_hashed<Q>(&mut self, hash: u64, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(position) = self.slots.find(hash, key) {
            let (_, state) = self.slots.remove(position, &self.hasher);
            self.state_heap_bytes -= L::heap_bytes(&state);
        }
    }

    /// Run `change` on the state at `position`, keeping the heap total true.
    #[inline]
    fn update_state<T>(
        &mut self,
        position: usize,
        change: impl FnOnce(&L::Config, &mut L::State) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let state = self.slots.state_mut(position);
        let before = L::heap_bytes(state);
        let result = change(&self.config, state);
        self.state_heap_bytes = self.state_heap_bytes - before + L::heap_bytes(state);
        result
    }

    fn insert(&mut self, hash: u64, key: K, state: L::State, now_ms: i64) {
        if self.len() == self.max_keys {
            self.make_room(now_ms);
        }
        self.state_heap_bytes += L::heap_bytes(&state);
        self.slots
            .insert(hash, key, state, self.max_keys, &self.hasher);
        self.new_since_sweep += 1;
    }

    /// Free one slot at least: idle keys first, then the CLOCK victim.
    fn make_room(&mut self, now_ms: i64) {
        let config = &self.config;
        let idle = |state: &L::State| L::is_idle(config, state, now_ms);
        let (stats, heap) = (&mut self.stats, &mut self.state_heap_bytes);
        if self.new_since_sweep >= self.max_keys / 8 {
            self.new_since_sweep = 0;
            self.slots.remove_all(idle, &self.hasher, |state| {
                stats.reclaimed += 1;
                *heap -= L::heap_bytes(state);
            });
            if self.slots.len() < self.max_keys {
                return;
            }
        }
        let ((_, state), live) = self.slots.remove_by_clock(idle, &self.hasher);
        *heap -= L::heap_bytes(&state);
        if live {
            stats.evictions += 1;
        } else {
            stats.reclaimed += 1;
        }
    }
}

/// The bounds and counters; keys and states are not listed.
impl<L: Limiter, K: Hash + Eq, S: BuildHasher> core::fmt::Debug for Keyed<L, K, S>
where
    L::Config: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Keyed")
            .field("config", &self.config)
            .field("max_keys", &self.max_keys)
            .field("stats", &self.stats())
            .finish()
    }
}

/// `max_keys` (or a per-shard bound) must be in `1..2^32`: slab positions are `u32`.
fn check_max_keys(name: &'static str, max_keys: usize) -> Result<(), Error> {
    if max_keys == 0 || u32::try_from(max_keys).is_err() {
        return Err(Error::invalid(
            name,
            "a positive integer below 2^32",
            Value::UInt(max_keys as u64),
        ));
    }
    Ok(())
}

#[cfg(all(test, feature = "std"))]
mod tests;
