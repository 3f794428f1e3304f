//! # Sliding log: exact
//!
//! In every half-open interval `(t - window_ms, t]` the admitted cost never exceeds `limit`,
//! and every answer is exact: `retry_after_ms` is the wait until the same call fits if nothing
//! else arrives, `reset_after_ms` the wait until the window is empty.
//!
//! The log keeps one entry per millisecond that admitted cost, so a burst in one millisecond is
//! one entry and the log never holds more than `min(limit, window_ms)` entries. Each entry
//! stores the cost admitted *through* it (a running sum), so the window's total is one
//! subtraction, expiry pops from the front (amortised O(1)), and the wait for a refused call is
//! a binary search for the first entry whose expiry frees enough (O(log n), O(1) in the common
//! case where the oldest entry is enough).
//!
//! ```
//! use slidewin::{Limiter, SlidingLog};
//!
//! let mut limiter = SlidingLog::new(100, 1_000)?;
//! assert!(limiter.check_at(999, 100)?.allowed);
//! let refused = limiter.check_at(1_001, 1)?;
//! assert!(!refused.allowed);
//! assert_eq!(refused.retry_after_ms, Some(998)); // the burst at 999 leaves the window at 1999
//! assert_eq!(limiter.check_at(1_999, 100)?.remaining, 0);
//! # Ok::<(), slidewin::Error>(())
//! ```

use alloc::collections::VecDeque;

use crate::window::{single_key_limiter, Window, NEVER};
use crate::Quota;

single_key_limiter!(
    /// The exact sliding-log limiter for one key; see the [module docs](self).
    SlidingLog(Quota, LogState)
);

impl SlidingLog {
    /// `limit` cost per `window_ms`, exactly.
    pub fn new(limit: u64, window_ms: i64) -> Result<Self, crate::Error> {
        Ok(crate::Limiter::from_config(Quota::new(limit, window_ms)?))
    }
}

/// One millisecond that admitted cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    ms: i64,
    /// Cost admitted through this entry since the state began (wrapping: only differences
    /// between entries in one window are read, and those are at most `limit`).
    through: u64,
}

/// The log of one key: entries oldest first, what expired before them, the newest time seen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(into = "RawLogState", try_from = "RawLogState")
)]
pub struct LogState {
    entries: VecDeque<Entry>,
    /// The running sum at the front of the log: what expired or was never recorded.
    expired: u64,
    newest_ms: i64,
}

impl LogState {
    /// The number of milliseconds holding cost (the log's length).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Cost admitted up to `through`, counted from the front of the log.
    fn since_front(&self, through: u64) -> u64 {
        through.wrapping_sub(self.expired)
    }

    /// The running sum just before the newest entry.
    fn before_back(&self) -> u64 {
        let len = self.entries.len();
        len.checked_sub(2)
            .map_or(self.expired, |i| self.entries[i].through)
    }

    /// Milliseconds from the newest time until `entry` leaves the window.
    fn expires_in(&self, quota: &Quota, entry: &Entry) -> u64 {
        (entry.ms + quota.window_ms() - self.newest_ms) as u64
    }
}

impl Window for LogState {
    type Config = Quota;

    #[inline]
    fn limit(quota: &Quota) -> u64 {
        quota.limit()
    }

    #[inline]
    fn empty(_: &Quota) -> Self {
        Self {
            entries: VecDeque::new(),
            expired: 0,
            newest_ms: NEVER,
        }
    }

    #[inline]
    fn newest_ms(&self) -> i64 {
        self.newest_ms
    }

    #[inline]
    fn advance(&mut self, quota: &Quota, now_ms: i64) {
        let oldest_kept = now_ms - quota.window_ms();
        while let Some(front) = self.entries.front() {
            if front.ms > oldest_kept {
                break;
            }
            self.expired = front.through;
            self.entries.pop_front();
        }
        self.newest_ms = now_ms;
    }

    #[inline]
    fn used(&self, _: &Quota) -> u64 {
        self.entries
            .back()
            .map_or(0, |back| self.since_front(back.through))
    }

    #[inline]
    fn record(&mut self, _: &Quota, cost: u64) {
        match self.entries.back_mut() {
            Some(back) if back.ms == self.newest_ms => {
                back.through = back.through.wrapping_add(cost)
            }
            _ => {
                let through = self.entries.back().map_or(self.expired, |b| b.through);
                let through = through.wrapping_add(cost);
                self.entries.push_back(Entry {
                    ms: self.newest_ms,
                    through,
                });
            }
        }
    }

    #[inline]
    fn unrecord(&mut self, quota: &Quota, cost: u64) {
        let keep = self.used(quota).saturating_sub(cost);
        while !self.entries.is_empty() && self.since_front(self.before_back()) >= keep {
            self.entries.pop_back();
        }
        if let Some(back) = self.entries.back_mut() {
            back.through = self.expired.wrapping_add(keep);
        }
    }

    #[inline]
    fn wait_ms(&self, quota: &Quota, at_most: u64) -> u64 {
        let need = self.used(quota) - at_most;
        let frees_enough = |e: &Entry| self.since_front(e.through) >= need;
        let first = match self.entries.front() {
            Some(front) if frees_enough(front) => Some(front),
            _ => self
                .entries
                .get(self.entries.partition_point(|e| !frees_enough(e))),
        };
        first.map_or(0, |entry| self.expires_in(quota, entry))
    }

    #[inline]
    fn reset_after_ms(&self, quota: &Quota) -> u64 {
        self.entries
            .back()
            .map_or(0, |back| self.expires_in(quota, back))
    }

    #[inline]
    fn heap_bytes(&self) -> usize {
        self.entries.capacity() * core::mem::size_of::<Entry>()
    }
}

/// A log snapshot as serde writes it: `(ms, cost)` pairs, oldest first.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct RawLogState {
    newest_ms: i64,
    entries: alloc::vec::Vec<(i64, u64)>,
}

#[cfg(feature = "serde")]
impl From<LogState> for RawLogState {
    fn from(state: LogState) -> Self {
        let mut before = state.expired;
        let entries = state.entries.iter().map(|e| {
            let cost = e.through.wrapping_sub(before);
            before = e.through;
            (e.ms, cost)
        });
        Self {
            newest_ms: state.newest_ms,
            entries: entries.collect(),
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<RawLogState> for LogState {
    type Error = crate::Error;
    fn try_from(raw: RawLogState) -> Result<Self, crate::Error> {
        use crate::{clock::check_time, Error, Value};
        let newest_ms = crate::window::check_newest(raw.newest_ms)?;
        let mut entries = VecDeque::with_capacity(raw.entries.len());
        let mut through = 0u64;
        let mut after = i64::MIN;
        for (ms, cost) in raw.entries {
            let ms = check_time("entries.ms", ms)?;
            if ms <= after || ms > newest_ms {
                let expected = "increasing and not after newest_ms";
                return Err(Error::invalid("entries.ms", expected, Value::Int(ms)));
            }
            if cost == 0 {
                return Err(Error::invalid(
                    "entries.cost",
                    "a positive integer",
                    Value::UInt(0),
                ));
            }
            through = through.checked_add(cost).ok_or(Error::invalid(
                "entries.cost",
                "a total that fits in 64 bits",
                Value::UInt(cost),
            ))?;
            after = ms;
            entries.push_back(Entry { ms, through });
        }
        Ok(Self {
            entries,
            expired: 0,
            newest_ms,
        })
    }
}
