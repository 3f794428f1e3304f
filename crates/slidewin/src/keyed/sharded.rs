//! [`ShardedKeyed`]: the keyed store for many threads, one lock per shard.

use super::{check_max_keys, KeyHasher, Keyed, KeyedStats};
use crate::reservation::Amend;
use crate::{Decision, Error, Limiter, Value};
use alloc::borrow::ToOwned;
use alloc::vec::Vec;
use core::borrow::Borrow;
use core::hash::{BuildHasher, Hash};
use std::sync::{Mutex, MutexGuard};

/// A [`Keyed`] split into shards by key hash, each behind its own `Mutex`, so threads working
/// on different keys rarely wait for each other. `Send + Sync` when the keys, states and
/// hasher are `Send`.
///
/// `max_keys` is split over the shards (they differ by at most one); each shard evicts on
/// its own, so the bound on the whole store holds exactly.
///
/// ```
/// use slidewin::{Quota, ShardedKeyed, SlidingCounter};
/// use std::sync::Arc;
/// let config = Quota::new(100, 1_000).unwrap();
/// let store = Arc::new(ShardedKeyed::<SlidingCounter>::new(config, 10_000, 8).unwrap());
/// let workers: Vec<_> = (0..2_u64)
///     .map(|t| {
///         let store = Arc::clone(&store);
///         std::thread::spawn(move || {
///             (0..50).filter(|&i| store.check_at(&(t * 1_000 + i % 5), i as i64, 1).unwrap().allowed).count()
///         })
///     })
///     .collect();
/// let allowed: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
/// assert_eq!((allowed, store.len()), (100, 10));
/// ```
pub struct ShardedKeyed<L: Limiter, K = u64, S = KeyHasher> {
    shards: Vec<Shard<Keyed<L, K, S>>>,
    config: L::Config,
    hasher: S,
    max_keys: usize,
}

impl<L: Limiter, K: Hash + Eq> ShardedKeyed<L, K, KeyHasher> {
    /// At most `max_keys` keys over `shards` shards (`1..=max_keys`), hashing with a random seed.
    pub fn new(config: L::Config, max_keys: usize, shards: usize) -> Result<Self, Error> {
        Self::with_hasher(config, max_keys, shards, KeyHasher::default())
    }
}

impl<L: Limiter, K: Hash + Eq, S: BuildHasher + Clone> ShardedKeyed<L, K, S> {
    /// [`ShardedKeyed::new`] hashing with `hasher`.
    pub fn with_hasher(
        config: L::Config,
        max_keys: usize,
        shards: usize,
        hasher: S,
    ) -> Result<Self, Error> {
        check_max_keys("max_keys", max_keys)?;
        if shards == 0 || shards > max_keys {
            return Err(Error::invalid(
                "shards",
                "between 1 and max_keys",
                Value::UInt(shards as u64),
            ));
        }
        let shards = (0..shards)
            .map(|i| {
                let bound = max_keys / shards + usize::from(i < max_keys % shards);
                Keyed::with_hasher(config.clone(), bound, hasher.clone())
                    .map(|keyed| Shard(Mutex::new(keyed)))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            shards,
            config,
            hasher,
            max_keys,
        })
    }

    /// [`Keyed::check_at`].
    pub fn check_at<Q>(&self, key: &Q, now_ms: i64, cost: u64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (hash, mut shard) = self.shard(key);
        shard.check_hashed(hash, key, now_ms, cost)
    }

    /// [`Keyed::peek_at`].
    pub fn peek_at<Q>(&self, key: &Q, now_ms: i64, cost: u64) -> Result<Decision, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, mut shard) = self.shard(key);
        shard.peek_hashed(hash, key, now_ms, cost)
    }

    /// [`Keyed::uncommit_at`].
    pub fn uncommit_at<Q>(&self, key: &Q, now_ms: i64, cost: u64) -> Result<(), Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, mut shard) = self.shard(key);
        shard.amend_hashed(hash, key, (now_ms, None), Amend::GiveBack(cost))
    }

    /// [`Keyed::reset`].
    pub fn reset<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, mut shard) = self.shard(key);
        shard.reset_hashed(hash, key)
    }

    /// Keys held (shards are read one after another, so under traffic this is a snapshot
    /// of a moving total).
    pub fn len(&self) -> usize {
        self.each_shard().map(|shard| shard.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys held at once, over all shards.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The config every key's limiter uses.
    pub fn config(&self) -> &L::Config {
        &self.config
    }

    /// Shard count.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// [`Keyed::bytes_estimate`] for the whole store: this struct, the shards' slots and
    /// what each shard allocated.
    pub fn bytes_estimate(&self) -> usize {
        let allocated: usize = self.each_shard().map(|shard| shard.allocated_bytes()).sum();
        core::mem::size_of::<Self>()
            + self.shards.capacity() * core::mem::size_of::<Shard<Keyed<L, K, S>>>()
            + allocated
    }

    /// [`Keyed::stats`] summed over the shards.
    pub fn stats(&self) -> KeyedStats {
        self.each_shard().fold(KeyedStats::default(), |sum, shard| {
            let s = shard.stats();
            KeyedStats {
                keys: sum.keys + s.keys,
                evictions: sum.evictions + s.evictions,
                reclaimed: sum.reclaimed + s.reclaimed,
                allowed: sum.allowed + s.allowed,
                rejected: sum.rejected + s.rejected,
            }
        })
    }

    /// The key's hash and its locked shard. The shard comes from hash bits 25..57 (as a
    /// fraction, times the shard count): the shard's own table places keys by the low bits
    /// (below 2^25 buckets) and tags them with the top 7, so neither loses any spread.
    #[inline]
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> (u64, MutexGuard<'_, Keyed<L, K, S>>) {
        let hash = self.hasher.hash_one(key);
        let index = ((hash >> 25 & 0xffff_ffff) * self.shards.len() as u64) >> 32;
        (hash, self.shards[index as usize].lock())
    }

    fn each_shard(&self) -> impl Iterator<Item = MutexGuard<'_, Keyed<L, K, S>>> {
        self.shards.iter().map(Shard::lock)
    }
}

/// The bounds and counters; keys and states are not listed.
impl<L: Limiter, K: Hash + Eq, S: BuildHasher + Clone> core::fmt::Debug for ShardedKeyed<L, K, S>
where
    L::Config: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShardedKeyed")
            .field("config", &self.config)
            .field("max_keys", &self.max_keys)
            .field("shards", &self.shards.len())
            .field("stats", &self.stats())
            .finish()
    }
}

/// One shard's lock, on cache lines of its own: a thread taking one shard's lock does not
/// invalidate the line another thread needs for its neighbour.
#[repr(align(128))]
struct Shard<T>(Mutex<T>);

impl<T> Shard<T> {
    /// The shard's lock. A panic while it was held cannot leave a shard half-changed in a way
    /// that breaks later calls (each change is one state update), so a poisoned lock is used
    /// as is.
    fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
