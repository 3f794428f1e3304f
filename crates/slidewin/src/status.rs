//! HTTP statuses as the limiters read them: which ones a status list may hold, and what an
//! answer tells of the upstream ([`Class`]) for [`crate::adaptive`]'s counts.
//!
//! ```
//! use slidewin::status::{class_of, last_status, Class};
//!
//! assert_eq!(class_of(200, None), Class::Ok);
//! assert_eq!(class_of(499, Some(200)), Class::Loss);          // the client gave up
//! assert_eq!(class_of(503, Some(503)), Class::Backpressure);
//! // nginx's $upstream_status after a retry and an internal redirect: the last try counts.
//! assert_eq!(last_status("502, 504 : 200"), Some(200));
//! ```

use crate::{Error, Value};

/// What one answer tells of the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Answered (well or not, by the upstream's own account).
    Ok,
    /// Lost: 502 and 504 (no answer in time, or a broken one), 499 (the client gave up).
    Loss,
    /// Pushed back: 429 and 503, the upstream's own "too much".
    Backpressure,
}

impl Class {
    /// The answer's name: "ok", "loss" or "backpressure".
    pub const fn name(self) -> &'static str {
        match self {
            Class::Ok => "ok",
            Class::Loss => "loss",
            Class::Backpressure => "backpressure",
        }
    }
}

/// What an answer with `status` (the one sent to the client) tells, given the last upstream's
/// `upstream` status when one answered. A loss on either side is a loss; backpressure is only
/// the upstream's (a 429 of this server's own limiter says nothing of the upstream).
pub fn class_of(status: u64, upstream: Option<u64>) -> Class {
    let upstream = upstream.unwrap_or(status);
    let lost = |s| matches!(s, 499 | 502 | 504);
    if lost(status) || lost(upstream) {
        Class::Loss
    } else if matches!(upstream, 429 | 503) {
        Class::Backpressure
    } else {
        Class::Ok
    }
}

/// The last status of nginx's `$upstream_status` ("502, 200" after a retry, "504 : 200"
/// across an internal redirect), or `None` when it does not end with one.
pub fn last_status(text: &str) -> Option<u64> {
    let text = text.trim_end();
    let digits = text.len() - text.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let last = &text[text.len() - digits..];
    // 19 digits always fit a u64; a longer run is no status.
    (1..=19)
        .contains(&last.len())
        .then(|| last.parse().ok())
        .flatten()
}

/// `v` as an HTTP status (an integer from 100 to 599), or the error naming `name`.
///
/// ```
/// use slidewin::status::check;
/// assert_eq!(check("status", 503.0), Ok(503));
/// assert_eq!(check("status", 99.0).unwrap_err().to_string(),
///     "status must be an HTTP status (100 to 599), got 99");
/// ```
pub fn check(name: &'static str, v: f64) -> Result<u64, Error> {
    if (100.0..=599.0).contains(&v) && v == libm::trunc(v) {
        Ok(v as u64)
    } else {
        Err(Error::invalid(
            name,
            "an HTTP status (100 to 599)",
            Value::Float(v),
        ))
    }
}
