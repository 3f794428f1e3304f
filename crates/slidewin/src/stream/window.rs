//! Which samples an aggregate looks at: the last `k`, or those of the last `window_ms`.

use crate::quota::MAX_WINDOW_MS;
use crate::{Error, Value};

/// The window of a sliding aggregate, checked by every constructor.
///
/// ```
/// use slidewin::stream::Window;
/// assert_eq!(Window::count(1_000), Ok(Window::Count(1_000)));
/// assert_eq!(
///     Window::Time(-5).check().unwrap_err().to_string(),
///     "window_ms must be a positive integer, got -5"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Window {
    /// The last `k` samples (`k >= 1`).
    Count(usize),
    /// The samples with `t > now_ms - window_ms` (`1 <= window_ms <= 2^52`).
    Time(i64),
}

impl Window {
    /// `Window::Count(k)` from a host integer, checked (and not truncated on 32-bit targets).
    pub fn count(k: u64) -> Result<Self, Error> {
        match usize::try_from(k) {
            Ok(k) => Window::Count(k).check(),
            Err(_) => Err(Error::invalid("k", "at most usize::MAX", Value::UInt(k))),
        }
    }

    /// `Window::Time(window_ms)`, checked.
    pub fn time(window_ms: i64) -> Result<Self, Error> {
        Window::Time(window_ms).check()
    }

    /// The window itself when valid, else an error naming `k` or `window_ms`.
    pub fn check(self) -> Result<Self, Error> {
        match self {
            Window::Count(0) => Err(Error::invalid("k", "a positive integer", Value::UInt(0))),
            Window::Time(ms) if ms <= 0 => Err(Error::invalid(
                "window_ms",
                "a positive integer",
                Value::Int(ms),
            )),
            Window::Time(ms) if ms > MAX_WINDOW_MS => {
                Err(Error::invalid("window_ms", "at most 2^52", Value::Int(ms)))
            }
            _ => Ok(self),
        }
    }
}
