//! A limiter's per-key state laid out in words of a shared region, read as the very state type
//! the in-process limiter uses (its arrays through [`crate::storage`]), so the algorithm in
//! shared memory is the one in `window.rs`, not a copy.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::clock::check_time;
use crate::storage::{Cells, Entries, Ring, SharedCells};
use crate::window::{self, Window, NEVER};
use crate::{BucketQuota, BucketState, CounterState, Decision, Error, Limiter, LogState, Quota};
use crate::{BucketWindow, SlidingCounter, SlidingLog};

/// A limiter whose per-key state can live in a fixed number of words of shared memory, for
/// [`super::Zone`]. Implemented by [`SlidingLog`], [`BucketWindow`] and [`SlidingCounter`].
pub trait SharedLimiter: Limiter {
    /// Words one key's state takes for `config` (a log: room for `min(limit, window_ms)`
    /// entries, the most it can hold).
    fn state_words(config: &Self::Config) -> Result<usize, Error>;
    /// The algorithm and config as words, so a region made for another config is not reused.
    fn fingerprint(config: &Self::Config) -> [u64; 4];
    /// [`Limiter::decide`] on the state in `words`.
    fn decide_in(
        config: &Self::Config,
        words: &[AtomicU64],
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error>;
    /// [`Limiter::refund`] on the state in `words`.
    fn refund_in(
        config: &Self::Config,
        words: &[AtomicU64],
        now_ms: i64,
        cost: u64,
    ) -> Result<(), Error>;
    /// [`Limiter::is_idle`] of the state in `words`.
    fn is_idle_in(config: &Self::Config, words: &[AtomicU64], now_ms: i64) -> bool;
    /// Empties the state in `words`.
    fn clear_in(config: &Self::Config, words: &[AtomicU64]);
    /// Whether the state in `words` is one the algorithm can have made (checked after a
    /// process died while writing it); derived fields are recomputed on the way.
    fn repair_in(config: &Self::Config, words: &[AtomicU64]) -> bool;
}

/// A state read from words: loaded before a call, stored after it.
trait View<'a>: Window + Sized {
    fn load(config: &Self::Config, words: &'a [AtomicU64]) -> Self;
    fn store(&self, words: &'a [AtomicU64]);
}

fn get(words: &[AtomicU64], i: usize) -> u64 {
    words[i].load(Relaxed)
}

fn set(words: &[AtomicU64], i: usize, value: u64) {
    words[i].store(value, Relaxed);
}

fn decide_view<'a, V: View<'a>>(
    config: &V::Config,
    words: &'a [AtomicU64],
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Result<Decision, Error> {
    let mut view = V::load(config, words);
    let decision = window::decide(config, &mut view, now_ms, cost, commit)?;
    view.store(words);
    Ok(decision)
}

fn refund_view<'a, V: View<'a>>(
    config: &V::Config,
    words: &'a [AtomicU64],
    now_ms: i64,
    cost: u64,
) -> Result<(), Error> {
    let mut view = V::load(config, words);
    window::refund(config, &mut view, now_ms, cost)?;
    view.store(words);
    Ok(())
}

fn idle_view<'a, V: View<'a>>(config: &V::Config, words: &'a [AtomicU64], now_ms: i64) -> bool {
    window::is_idle(config, &V::load(config, words), now_ms)
}

/// A `newest_ms` word that a call can have written: [`NEVER`] or a valid time.
fn valid_time(word: u64) -> bool {
    word as i64 == NEVER || check_time("newest_ms", word as i64).is_ok()
}

/// Implements [`SharedLimiter`] for `$limiter` over its state's [`View`].
macro_rules! shared_limiter {
    ($limiter:ty, $config:ty, $view:ty) => {
        impl SharedLimiter for $limiter {
            fn state_words(config: &$config) -> Result<usize, Error> {
                <$view>::words(config)
            }
            fn fingerprint(config: &$config) -> [u64; 4] {
                <$view>::fingerprint(config)
            }
            fn decide_in(
                config: &$config,
                words: &[AtomicU64],
                now_ms: i64,
                cost: u64,
                commit: bool,
            ) -> Result<Decision, Error> {
                decide_view::<$view>(config, words, now_ms, cost, commit)
            }
            fn refund_in(
                config: &$config,
                words: &[AtomicU64],
                now_ms: i64,
                cost: u64,
            ) -> Result<(), Error> {
                refund_view::<$view>(config, words, now_ms, cost)
            }
            fn is_idle_in(config: &$config, words: &[AtomicU64], now_ms: i64) -> bool {
                idle_view::<$view>(config, words, now_ms)
            }
            fn clear_in(config: &$config, words: &[AtomicU64]) {
                <$view>::clear(config, words)
            }
            fn repair_in(config: &$config, words: &[AtomicU64]) -> bool {
                <$view>::repair(config, words)
            }
        }
    };
}

// Counter: [newest_ms, previous, current].
impl CounterState {
    fn words(_: &Quota) -> Result<usize, Error> {
        Ok(3)
    }
    fn fingerprint(quota: &Quota) -> [u64; 4] {
        [1, quota.limit(), quota.window_ms() as u64, 0]
    }
    fn clear(_: &Quota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        set(words, 1, 0);
        set(words, 2, 0);
    }
    fn repair(_: &Quota, words: &[AtomicU64]) -> bool {
        valid_time(get(words, 0))
    }
}

impl<'a> View<'a> for CounterState {
    fn load(_: &Quota, words: &'a [AtomicU64]) -> Self {
        Self {
            newest_ms: get(words, 0) as i64,
            previous: get(words, 1),
            current: get(words, 2),
        }
    }
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.previous);
        set(words, 2, self.current);
    }
}
shared_limiter!(SlidingCounter, Quota, CounterState);

// Log: [newest_ms, expired, head, len], then a ring of `min(limit, window_ms)` entries.
type SharedLog<'a> = LogState<Ring<SharedCells<'a>>>;
const LOG_HEADER: usize = 4;

impl SharedLog<'_> {
    fn words(quota: &Quota) -> Result<usize, Error> {
        let entries = quota.limit().min(quota.window_ms() as u64);
        let words = entries
            .checked_mul(2)
            .and_then(|w| usize::try_from(w + LOG_HEADER as u64).ok());
        words.ok_or(Error::invalid(
            "limit",
            "at most 2^61 with a window that long",
            crate::Value::UInt(quota.limit()),
        ))
    }
    fn fingerprint(quota: &Quota) -> [u64; 4] {
        [2, quota.limit(), quota.window_ms() as u64, 0]
    }
    fn clear(_: &Quota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        for i in 1..LOG_HEADER {
            set(words, i, 0);
        }
    }
    fn repair(quota: &Quota, words: &[AtomicU64]) -> bool {
        let cap = (words.len() - LOG_HEADER) / 2;
        let (head, len) = (get(words, 2), get(words, 3));
        if !valid_time(get(words, 0)) || head >= cap as u64 || len > cap as u64 {
            return false;
        }
        let log = SharedLog::load(quota, words);
        let (mut after, mut before) = (i64::MIN, log.expired);
        (0..log.entries.len()).all(|i| {
            let entry = log.entries.get(i);
            let cost = entry.through.wrapping_sub(before);
            let ok = entry.ms > after && entry.ms <= log.newest_ms && cost > 0;
            (after, before) = (entry.ms, entry.through);
            ok && entry.through.wrapping_sub(log.expired) <= quota.limit()
        })
    }
}

impl<'a> View<'a> for SharedLog<'a> {
    fn load(_: &Quota, words: &'a [AtomicU64]) -> Self {
        LogState {
            entries: Ring {
                cells: SharedCells(&words[LOG_HEADER..]),
                head: get(words, 2) as usize,
                len: get(words, 3) as usize,
            },
            expired: get(words, 1),
            newest_ms: get(words, 0) as i64,
        }
    }
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.expired);
        set(words, 2, self.entries.head as u64);
        set(words, 3, self.entries.len as u64);
    }
}
shared_limiter!(SlidingLog, Quota, SharedLog<'_>);

// Buckets: [newest_ms, head_start_ms, head, newest_used, total], then the ring of counters.
type SharedBuckets<'a> = BucketState<SharedCells<'a>>;
const BUCKETS_HEADER: usize = 5;

impl SharedBuckets<'_> {
    fn words(config: &BucketQuota) -> Result<usize, Error> {
        Ok(BUCKETS_HEADER + config.buckets() as usize + 1)
    }
    fn fingerprint(config: &BucketQuota) -> [u64; 4] {
        let (limit, window_ms) = (config.limit(), config.window_ms() as u64);
        [3, limit, window_ms, config.bucket_ms() as u64]
    }
    fn clear(_: &BucketQuota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        set(words, 1, NEVER as u64);
        for i in 2..words.len() {
            set(words, i, 0);
        }
    }
    fn repair(config: &BucketQuota, words: &[AtomicU64]) -> bool {
        let slots = (words.len() - BUCKETS_HEADER) as u64;
        let (newest_ms, head_start_ms) = (get(words, 0), get(words, 1));
        let placed = head_start_ms as i64 <= newest_ms as i64;
        if !valid_time(newest_ms) || !valid_time(head_start_ms) || !placed {
            return false;
        }
        if get(words, 2) >= slots || get(words, 3) >= slots {
            return false;
        }
        // The total is derived: a process that died between a counter and the total left
        // them apart, so recount it.
        let state = SharedBuckets::load(config, words);
        let total =
            (0..state.counts.len()).fold(0u64, |t, i| t.saturating_add(state.counts.get(i)));
        set(words, 4, total);
        true
    }
}

impl<'a> View<'a> for SharedBuckets<'a> {
    fn load(_: &BucketQuota, words: &'a [AtomicU64]) -> Self {
        BucketState {
            counts: SharedCells(&words[BUCKETS_HEADER..]),
            head: get(words, 2) as usize,
            newest_used: get(words, 3) as usize,
            total: get(words, 4),
            head_start_ms: get(words, 1) as i64,
            newest_ms: get(words, 0) as i64,
        }
    }
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.head_start_ms as u64);
        set(words, 2, self.head as u64);
        set(words, 3, self.newest_used as u64);
        set(words, 4, self.total);
    }
}
shared_limiter!(BucketWindow, BucketQuota, SharedBuckets<'_>);
