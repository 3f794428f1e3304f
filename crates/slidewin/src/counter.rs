//! # Sliding counter: two fixed windows, the previous one weighted by its overlap
//!
//! Time is cut into fixed windows `[k·window_ms, (k+1)·window_ms)`. The state keeps the cost of
//! the current window and of the one before; at `elapsed` ms into the current window the
//! sliding window is estimated as
//!
//! `ceil(previous · (window_ms - elapsed) / window_ms) + current`
//!
//! as if the previous window's cost had been spread evenly over it. The state is 24 bytes
//! whatever the traffic, and a call is a handful of integer operations.
//!
//! ## Error
//!
//! The estimate is exact for evenly spread traffic. It under-counts when the previous window's
//! cost arrived late in it, so it can over-admit: in any interval of `window_ms` it admits at
//! most `limit + previous · elapsed / window_ms`, which is under `2 · limit`. The worst case is a
//! full window's cost in the last millisecond of one fixed window and another burst near the
//! end of the next: with 100 per 1000 ms, 100 at t = 999 then 99 more at t = 1998, so 199 in
//! `(998, 1998]`. It can also under-admit (refuse early) when the previous window's cost came
//! early. On the bursty random trace of `tests/counter_error.rs` (ten minutes, 58,039 calls
//! offered to 100 per 1000 ms) it admitted 33,952 calls where [`crate::SlidingLog`] admitted
//! 33,337 (+1.8%); 3,813 of them (11%) found more than the limit in the window ending at them,
//! at worst 187. Use it where memory per key matters more than exactness.
//!
//! ```
//! use slidewin::{Limiter, SlidingCounter};
//!
//! let mut limiter = SlidingCounter::new(100, 1_000)?;
//! assert!(limiter.check_at(999, 100)?.allowed);   // a full window at the end of [0, 1000)
//! let refused = limiter.check_at(1_001, 1)?;      // 100 · 999/1000 still counts
//! assert!(!refused.allowed);
//! assert_eq!(refused.retry_after_ms, Some(9));    // at 1010: ceil(100 · 990/1000) = 99
//! assert!(limiter.check_at(1_010, 1)?.allowed);
//! # Ok::<(), slidewin::Error>(())
//! ```

use crate::window::{self, single_key_limiter, Fresh, Window, NEVER};
use crate::{Decision, Error, Quota};

single_key_limiter!(
    /// The sliding-counter limiter for one key; see the [module docs](self).
    SlidingCounter(Quota, CounterState)
);

impl SlidingCounter {
    /// `limit` cost per `window_ms`, estimated from two fixed windows.
    pub fn new(limit: u64, window_ms: i64) -> Result<Self, crate::Error> {
        Ok(crate::Limiter::from_config(Quota::new(limit, window_ms)?))
    }
}

/// The cost of the current fixed window and of the one before, and the newest time seen
/// (which also names the current window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "RawCounterState"))]
pub struct CounterState {
    pub(crate) newest_ms: i64,
    pub(crate) previous: u64,
    pub(crate) current: u64,
}

impl CounterState {
    /// Cost recorded in the fixed window before the current one.
    pub const fn previous(&self) -> u64 {
        self.previous
    }

    /// Cost recorded in the current fixed window.
    pub const fn current(&self) -> u64 {
        self.current
    }

    /// How many fixed windows `stamp_ms` (at most `newest_ms`) is before the current one.
    fn windows_since(&self, quota: &Quota, stamp_ms: i64) -> i64 {
        let window = quota.window_ms();
        self.newest_ms.div_euclid(window) - stamp_ms.div_euclid(window)
    }
}

/// The decision on `cost` for a counter whose two counts are kept elsewhere (a shared
/// dictionary's entries, updated by atomic increments): `previous` and `current` are the costs
/// of the fixed window before the one `now_ms` falls in and of that one, without `cost`. With
/// `commit`, the decision is the one of a call that records `cost` when it fits (its
/// `reset_after_ms` counts it), which the caller does in its own count.
///
/// This is [`SlidingCounter`]'s own decision (both go through the same `Window` code), so a
/// store that keeps only the counts answers exactly as the limiter would.
///
/// ```
/// use slidewin::counter::decide_counts;
/// use slidewin::Quota;
///
/// let quota = Quota::new(100, 1_000)?;
/// // 100 in [0, 1000), nothing yet in [1000, 2000): at 1001, 100 · 999/1000 still counts.
/// let refused = decide_counts(&quota, 100, 0, 1_001, 1, true)?;
/// assert_eq!((refused.allowed, refused.retry_after_ms), (false, Some(9)));
/// let peek = decide_counts(&quota, 100, 0, 1_010, 1, false)?;
/// assert_eq!((peek.allowed, peek.remaining, peek.reset_after_ms), (true, 0, 990));
/// // Recorded, the 1 in [1000, 2000) lasts until the end of the next window.
/// let admitted = decide_counts(&quota, 100, 0, 1_010, 1, true)?;
/// assert_eq!((admitted.allowed, admitted.reset_after_ms), (true, 1_990));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn decide_counts(
    quota: &Quota,
    previous: u64,
    current: u64,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Result<Decision, Error> {
    let mut state = CounterState {
        newest_ms: now_ms,
        previous,
        current,
    };
    window::decide(quota, &mut state, now_ms, cost, commit)
}

/// `a · b / c` (`c` positive), rounded up or down, saturating; in 64 bits when the product
/// fits, since a 128-bit division is a slow library call.
fn mul_div(a: u64, b: u64, c: u64, round_up: bool) -> u64 {
    match a.checked_mul(b) {
        Some(product) if round_up => product.div_ceil(c),
        Some(product) => product / c,
        None => {
            let (product, c) = (a as u128 * b as u128, c as u128);
            let quotient = if round_up {
                product.div_ceil(c)
            } else {
                product / c
            };
            u64::try_from(quotient).unwrap_or(u64::MAX)
        }
    }
}

/// `ceil(count · (window - elapsed) / window)`: the share of `count` the estimate still counts.
fn weighted(count: u64, window_ms: u64, elapsed_ms: u64) -> u64 {
    if count == 0 {
        return 0;
    }
    mul_div(count, window_ms - elapsed_ms, window_ms, true)
}

/// The least `elapsed` at which `weighted(count, window, elapsed) <= at_most` (up to `window`).
/// `ceil(x) <= a` for an integer `a` exactly when `x <= a`, so this is a division, not a search.
fn elapsed_until(count: u64, window_ms: u64, at_most: u64) -> u64 {
    if count == 0 {
        return 0;
    }
    window_ms.saturating_sub(mul_div(at_most, window_ms, count, false).min(window_ms))
}

/// The window's length and how far `t_ms` is into its fixed window.
fn window_and_elapsed(quota: &Quota, t_ms: i64) -> (u64, u64) {
    (
        quota.window_ms() as u64,
        t_ms.rem_euclid(quota.window_ms()) as u64,
    )
}

impl Fresh for CounterState {
    #[inline]
    fn empty(_: &Quota) -> Self {
        Self {
            newest_ms: NEVER,
            previous: 0,
            current: 0,
        }
    }
}

impl Window for CounterState {
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
        let from = self.newest_ms.div_euclid(quota.window_ms());
        let to = now_ms.div_euclid(quota.window_ms());
        if to != from {
            // `from` is at most 2^53, so `from + 1` cannot overflow.
            self.previous = if to == from + 1 { self.current } else { 0 };
            self.current = 0;
        }
        self.newest_ms = now_ms;
    }

    #[inline]
    fn used(&self, quota: &Quota) -> u64 {
        let (window, elapsed) = window_and_elapsed(quota, self.newest_ms);
        weighted(self.previous, window, elapsed).saturating_add(self.current)
    }

    #[inline]
    fn record(&mut self, _: &Quota, cost: u64) {
        self.current = self.current.saturating_add(cost);
    }

    /// From the fixed window the stamp fell in, then the one before (the counts cannot tell
    /// when in a window cost came).
    #[inline]
    fn unrecord_at(&mut self, quota: &Quota, stamp_ms: i64, cost: u64) {
        let from_current = match self.windows_since(quota, stamp_ms) {
            0 => cost.min(self.current),
            1 => 0,
            _ => return, // its window is no longer counted
        };
        self.current -= from_current;
        self.previous = self.previous.saturating_sub(cost - from_current);
    }

    #[inline]
    fn owe_at(&mut self, quota: &Quota, stamp_ms: i64, cost: u64) {
        match self.windows_since(quota, stamp_ms) {
            0 => self.current = self.current.saturating_add(cost),
            1 => self.previous = self.previous.saturating_add(cost),
            _ => {} // its window is no longer counted
        }
    }

    #[inline]
    fn wait_ms(&self, quota: &Quota, at_most: u64) -> u64 {
        let (window, elapsed) = window_and_elapsed(quota, self.newest_ms);
        // Within this window only the previous window's share falls.
        if let Some(room) = at_most.checked_sub(self.current) {
            let at = elapsed_until(self.previous, window, room);
            if at < window {
                return at.saturating_sub(elapsed);
            }
        }
        // In the next window the current one becomes the previous one.
        window - elapsed + elapsed_until(self.current, window, at_most)
    }

    #[inline]
    fn reset_after_ms(&self, quota: &Quota) -> u64 {
        let (window, elapsed) = window_and_elapsed(quota, self.newest_ms);
        if self.current > 0 {
            2 * window - elapsed
        } else if self.previous > 0 {
            window - elapsed
        } else {
            0
        }
    }

    #[inline]
    fn heap_bytes(&self) -> usize {
        0
    }
}

/// The unvalidated form serde reads.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct RawCounterState {
    newest_ms: i64,
    previous: u64,
    current: u64,
}

#[cfg(feature = "serde")]
impl TryFrom<RawCounterState> for CounterState {
    type Error = crate::Error;
    fn try_from(raw: RawCounterState) -> Result<Self, crate::Error> {
        let newest_ms = crate::window::check_newest(raw.newest_ms)?;
        Ok(Self {
            newest_ms,
            previous: raw.previous,
            current: raw.current,
        })
    }
}
