//! The one clock: integer milliseconds.
//!
//! ```
//! use slidewin::{Clock, ManualClock};
//! let clock = ManualClock::new(1_000);
//! clock.advance(250);
//! assert_eq!(clock.now_ms(), 1_250);
//! ```

use core::sync::atomic::{AtomicI64, Ordering};

use crate::{Error, Value};

/// The earliest time accepted: -2^53 ms (about 285,000 years before 1970).
pub const MIN_TIME_MS: i64 = -(1 << 53);
/// The latest time accepted: 2^53 ms. Every time in range is exact in a Lua or JS number, and
/// far enough from `i64`'s ends that adding a window (at most 2^52) never overflows.
pub const MAX_TIME_MS: i64 = 1 << 53;

/// `t_ms` when it lies in `MIN_TIME_MS..=MAX_TIME_MS`, otherwise an error naming `name`.
///
/// ```
/// use slidewin::clock::check_time;
/// assert_eq!(check_time("now_ms", 5), Ok(5));
/// assert_eq!(
///     check_time("now_ms", i64::MAX).unwrap_err().to_string(),
///     "now_ms must be between -2^53 and 2^53, got 9223372036854775807"
/// );
/// ```
pub fn check_time(name: &'static str, t_ms: i64) -> Result<i64, Error> {
    if (MIN_TIME_MS..=MAX_TIME_MS).contains(&t_ms) {
        Ok(t_ms)
    } else {
        Err(Error::invalid(
            name,
            "between -2^53 and 2^53",
            Value::Int(t_ms),
        ))
    }
}

/// A source of time in integer milliseconds.
pub trait Clock {
    /// The current time in milliseconds.
    fn now_ms(&self) -> i64;
}

/// Wall-clock milliseconds since the Unix epoch (the same scale as Redis `TIME` and `Date.now()`).
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[cfg(feature = "std")]
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        use std::time::{SystemTime, UNIX_EPOCH};
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => since.as_millis() as i64,
            // A wall clock set before 1970: negative milliseconds, still one scale.
            Err(before) => -(before.duration().as_millis() as i64),
        }
    }
}

/// A clock that moves only when told to: for tests and replays. Shareable across threads.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub const fn new(now_ms: i64) -> Self {
        Self {
            now_ms: AtomicI64::new(now_ms),
        }
    }

    /// Set the reading (may go backwards, to test how callers cope).
    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Move the reading by `delta_ms` (negative steps back).
    pub fn advance(&self, delta_ms: i64) {
        self.now_ms.fetch_add(delta_ms, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::Relaxed)
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ms(&self) -> i64 {
        (**self).now_ms()
    }
}
