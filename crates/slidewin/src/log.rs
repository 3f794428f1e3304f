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

use crate::storage::{Entries, Entry};
use crate::window::{single_key_limiter, Fresh, Window, NEVER};
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

/// The log of one key: entries oldest first (on the heap, or in a ring of shared memory),
/// what expired before them, the newest time seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogState<E = VecDeque<Entry>> {
    pub(crate) entries: E,
    /// The running sum at the front of the log: what expired or was never recorded.
    pub(crate) expired: u64,
    pub(crate) newest_ms: i64,
}

impl<E: Entries> LogState<E> {
    /// The number of milliseconds holding cost (the log's length).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log holds nothing.
    pub fn is_empty(&self) -> bool {
        Entries::is_empty(&self.entries)
    }

    /// Cost admitted up to `through`, counted from the front of the log.
    fn since_front(&self, through: u64) -> u64 {
        through.wrapping_sub(self.expired)
    }

    /// The running sum just before entry `i`.
    fn through_before(&self, i: usize) -> u64 {
        i.checked_sub(1)
            .map_or(self.expired, |i| self.entries.get(i).through)
    }

    /// The newest entry, if any.
    fn back(&self) -> Option<Entry> {
        let len = self.entries.len();
        len.checked_sub(1).map(|i| self.entries.get(i))
    }

    /// Milliseconds from the newest time until `entry` leaves the window.
    fn expires_in(&self, quota: &Quota, entry: &Entry) -> u64 {
        (entry.ms + quota.window_ms() - self.newest_ms) as u64
    }
}

impl Fresh for LogState {
    #[inline]
    fn empty(_: &Quota) -> Self {
        Self {
            entries: VecDeque::new(),
            expired: 0,
            newest_ms: NEVER,
        }
    }
}

impl<E: Entries> Window for LogState<E> {
    type Config = Quota;

    #[inline]
    fn limit(quota: &Quota) -> u64 {
        quota.limit()
    }

    #[inline]
    fn newest_ms(&self) -> i64 {
        self.newest_ms
    }

    #[inline]
    fn advance(&mut self, quota: &Quota, now_ms: i64) {
        let oldest_kept = now_ms - quota.window_ms();
        while !Entries::is_empty(&self.entries) {
            let front = self.entries.get(0);
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
        self.back().map_or(0, |back| self.since_front(back.through))
    }

    #[inline]
    fn record(&mut self, _: &Quota, cost: u64) {
        match self.back() {
            Some(back) if back.ms == self.newest_ms => self
                .entries
                .set_back_through(back.through.wrapping_add(cost)),
            back => {
                let through = back.map_or(self.expired, |b| b.through);
                self.entries.push_back(Entry {
                    ms: self.newest_ms,
                    through: through.wrapping_add(cost),
                });
            }
        }
    }

    /// Entries at or before the stamp are capped at what they keep; entries that keep
    /// nothing are dropped and the later ones move down over them, each written after the
    /// one before it and the length last, so a process that dies on the way leaves only
    /// entries that repeat one already counted or count more than the truth (a repair skips
    /// the former: `shared::state`).
    #[inline]
    fn unrecord_at(&mut self, _: &Quota, stamp_ms: i64, cost: u64) {
        let len = self.entries.len();
        let mut end = len;
        while end > 0 && self.entries.get(end - 1).ms > stamp_ms {
            end -= 1;
        }
        let Some(stamped) = end.checked_sub(1).map(|i| self.entries.get(i)) else {
            return;
        };
        let given = cost.min(self.since_front(stamped.through));
        if given == 0 {
            return;
        }
        // What entries up to the stamp hold after it, counted from the front.
        let kept = self.since_front(stamped.through) - given;
        // The first entry that ends above `kept`: it keeps what is left, those after it none.
        let mut first = end - 1;
        while first > 0 && self.since_front(self.entries.get(first - 1).through) > kept {
            first -= 1;
        }
        let mut dropped = first..end;
        if self.since_front(self.through_before(first)) < kept {
            let entry = self.entries.get(first);
            let through = self.expired.wrapping_add(kept);
            self.entries.set(first, Entry { through, ..entry });
            dropped.start += 1;
        }
        let gone = dropped.len();
        for i in end..len {
            let entry = self.entries.get(i);
            let through = entry.through.wrapping_sub(given);
            self.entries.set(i - gone, Entry { through, ..entry });
        }
        for _ in 0..gone {
            self.entries.pop_back();
        }
    }

    /// Into the stamp's entry (a reservation's: the oldest entry after the stamp when it is
    /// gone, the newest when none is; a new one in an empty log): it and every entry after it
    /// count the debt, written from the newest back, so a process that dies on the way leaves
    /// a log counting more, never less.
    fn owe_at(&mut self, quota: &Quota, stamp_ms: i64, cost: u64) {
        if stamp_ms <= self.newest_ms - quota.window_ms() {
            return; // the stamp left the window
        }
        let len = self.entries.len();
        if len == 0 {
            let through = self.expired.wrapping_add(cost);
            self.entries.push_back(Entry {
                ms: stamp_ms,
                through,
            });
            return;
        }
        let mut first = len;
        while first > 0 && self.entries.get(first - 1).ms >= stamp_ms {
            first -= 1;
        }
        for i in (first.min(len - 1)..len).rev() {
            let entry = self.entries.get(i);
            let through = entry.through.wrapping_add(cost);
            self.entries.set(i, Entry { through, ..entry });
        }
    }

    // Always inlined: out of line it costs a rule of several logs ~15 instructions a refusal.
    #[inline(always)]
    fn wait_ms(&self, quota: &Quota, at_most: u64) -> u64 {
        let need = self.used(quota) - at_most;
        let frees_enough = |entry: &Entry| self.since_front(entry.through) >= need;
        let len = self.entries.len();
        if len == 0 {
            return 0;
        }
        // The oldest entry is usually enough (answered from the entry already read); else a
        // binary search for the first that is.
        let front = self.entries.get(0);
        if frees_enough(&front) {
            return self.expires_in(quota, &front);
        }
        let (mut lo, mut hi) = (1, len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if frees_enough(&self.entries.get(mid)) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo == len {
            return 0;
        }
        self.expires_in(quota, &self.entries.get(lo))
    }

    #[inline]
    fn reset_after_ms(&self, quota: &Quota) -> u64 {
        self.back().map_or(0, |back| self.expires_in(quota, &back))
    }

    #[inline]
    fn heap_bytes(&self) -> usize {
        self.entries.heap_bytes()
    }
}

#[cfg(feature = "serde")]
crate::window::serde_via_raw!(LogState, RawLogState);

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
