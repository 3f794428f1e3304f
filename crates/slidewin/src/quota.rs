//! Quotas: how much cost a window admits, validated once.
//!
//! ```
//! use slidewin::Quota;
//! let q = Quota::new(100, 1_000).unwrap();
//! assert_eq!((q.limit(), q.window_ms()), (100, 1_000));
//! assert_eq!(
//!     Quota::new(100, -5).unwrap_err().to_string(),
//!     "window_ms must be a positive integer, got -5"
//! );
//! ```

use crate::{Error, Value};

/// The largest window: about 146 years, so `now_ms + window_ms` never overflows near real times.
pub const MAX_WINDOW_MS: i64 = 1 << 52;

/// `limit` cost per `window_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "RawQuota"))]
pub struct Quota {
    limit: u64,
    window_ms: i64,
}

impl Quota {
    /// A quota; `limit` must be positive, `window_ms` in `1..=MAX_WINDOW_MS`.
    pub fn new(limit: u64, window_ms: i64) -> Result<Self, Error> {
        if limit == 0 {
            return Err(Error::invalid(
                "limit",
                "a positive integer",
                Value::UInt(limit),
            ));
        }
        if window_ms <= 0 {
            return Err(Error::invalid(
                "window_ms",
                "a positive integer",
                Value::Int(window_ms),
            ));
        }
        if window_ms > MAX_WINDOW_MS {
            return Err(Error::invalid(
                "window_ms",
                "at most 2^52",
                Value::Int(window_ms),
            ));
        }
        Ok(Self { limit, window_ms })
    }

    /// Cost admitted per window.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The window's length in milliseconds.
    pub const fn window_ms(&self) -> i64 {
        self.window_ms
    }
}

/// The unvalidated form serde reads, so a deserialised quota is checked like a new one.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct RawQuota {
    limit: u64,
    window_ms: i64,
}

#[cfg(feature = "serde")]
impl TryFrom<RawQuota> for Quota {
    type Error = Error;
    fn try_from(raw: RawQuota) -> Result<Self, Error> {
        Quota::new(raw.limit, raw.window_ms)
    }
}
