//! Errors: every one names the argument, what it must be, and the value it got.

#[cfg(feature = "calendar")]
use alloc::{boxed::Box, string::String};
use core::fmt;

/// The value an argument had, kept in its own type so messages print it exactly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A signed integer (times, windows).
    Int(i64),
    /// An unsigned integer (limits, costs, counts).
    UInt(u64),
    /// A float (samples, alpha).
    Float(f64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// What went wrong, with the argument's name and value.
///
/// ```
/// use slidewin::{Error, Value};
/// let e = Error::invalid("window_ms", "a positive integer", Value::Int(-5));
/// assert_eq!(e.to_string(), "window_ms must be a positive integer, got -5");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// An argument outside its domain.
    InvalidArgument {
        /// The argument's name as the caller wrote it (`limit`, `window_ms`, `cost`, ...).
        name: &'static str,
        /// What it must be, completing "`name` must be ...".
        expected: &'static str,
        /// The value it had.
        got: Value,
    },
    /// A timestamp earlier than the newest one already in a time window.
    OutOfOrder {
        /// The argument's name (`t_ms`, `now_ms`).
        name: &'static str,
        /// The newest timestamp already recorded.
        newest_ms: i64,
        /// The timestamp given.
        got_ms: i64,
    },
    /// A shared region too small for one set of keys of its limiter.
    RegionTooSmall {
        /// Bytes one set of keys needs with the region's header.
        needed: u64,
        /// The region's size in bytes.
        got: u64,
    },
    /// A region of rules ([`crate::shared::Directory`]) with no free run of pages that large.
    NoRoom {
        /// Bytes the rule needs.
        needed: u64,
        /// The largest free run of pages, in bytes.
        largest_free: u64,
        /// Bytes of pages in all.
        size: u64,
    },
    /// A rule of a [`crate::shared::Directory`] that was removed while a process still used it.
    RuleRemoved,
    /// An operation that needs a sample (`replace_last`) on an empty stream aggregate.
    NoSample {
        /// The operation's name.
        name: &'static str,
    },
    /// Bytes or text that are not what they must be (TZif data, a POSIX TZ string, a time
    /// zone's name), with what was found in them. With the `calendar` feature only: its text
    /// costs every binary that formats errors ~2 KB, which the WebAssembly package, with no
    /// calendars, does not pay.
    ///
    /// ```
    /// use slidewin::Error;
    /// let e = Error::malformed("zone", "a name without \"..\"", "\"../etc/passwd\"");
    /// assert_eq!(e.to_string(), "zone must be a name without \"..\", got \"../etc/passwd\"");
    /// ```
    #[cfg(feature = "calendar")]
    Malformed {
        /// The argument's name (`tzif`, `tzif footer`, `zone`).
        name: &'static str,
        /// What it must be, completing "`name` must be ...".
        expected: &'static str,
        /// What was found, as it is printed (quoted when it is text). A `Box<str>`: as a
        /// `String`, the largest variant, it held `Error`'s tag in its capacity, which made
        /// decisions' code larger and rules ~10% slower (BENCHMARKS.md, `limiter_calls`).
        got: Box<str>,
    },
}

impl Error {
    /// An [`Error::InvalidArgument`].
    pub const fn invalid(name: &'static str, expected: &'static str, got: Value) -> Self {
        Error::InvalidArgument {
            name,
            expected,
            got,
        }
    }

    /// An [`Error::Malformed`].
    #[cfg(feature = "calendar")]
    pub fn malformed(name: &'static str, expected: &'static str, got: impl Into<String>) -> Self {
        Error::Malformed {
            name,
            expected,
            got: got.into().into_boxed_str(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidArgument {
                name,
                expected,
                got,
            } => {
                write!(f, "{name} must be {expected}, got {got}")
            }
            Error::OutOfOrder {
                name,
                newest_ms,
                got_ms,
            } => write!(
                f,
                "{name} must not be earlier than the newest sample ({newest_ms}), got {got_ms}"
            ),
            Error::RegionTooSmall { needed, got } => write!(
                f,
                "size must be at least {needed} bytes (8 keys of this limit, window and \
                 max_key_bytes), got {got}"
            ),
            Error::NoRoom {
                needed,
                largest_free,
                size,
            } => write!(
                f,
                "size must be at most the zone's largest free space ({largest_free} of {size} \
                 bytes) for this rule, got {needed}: remove rules or make the zone larger"
            ),
            Error::RuleRemoved => write!(f, "the rule was removed from its zone"),
            Error::NoSample { name } => write!(f, "{name} needs a sample, the window is empty"),
            #[cfg(feature = "calendar")]
            Error::Malformed {
                name,
                expected,
                got,
            } => write!(f, "{name} must be {expected}, got {got}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
