//! Live limits: what a controller's rate and a reload of the config make of them, for every
//! store that keeps them ([`crate::shared::LiveLimits`] in shared memory, a Redis hash).
//!
//! ```
//! use slidewin::live::{after_reload, per_second, window_limit};
//!
//! // 12.5 per second as the limit of a 10 s window: rounded up once, within 1..=max_limit.
//! assert_eq!(window_limit(12.5, 10_000, 1_000), 125);
//! assert_eq!(window_limit(0.01, 1_000, 1_000), 1);
//! // And back: 125 per 10 s is 12 a second, never more than the window admits.
//! assert_eq!(per_second(125, 10_000), 12);
//! // Set to 5 and 50 under a config of 10 and 100; the new config changes the first limit only.
//! assert_eq!(&*after_reload(&[20, 100], &[10, 100], &[5, 50]), &[20, 50]);
//! ```

use crate::rule::{Limits, MAX_WINDOWS};

/// `per_second` requests a second as the limit of a window of `window_ms`: rounded up once
/// (so a rate never rounds to a standstill), at least 1, at most `max_limit`.
pub fn window_limit(per_second: f64, window_ms: i64, max_limit: u64) -> u64 {
    // window_ms / 1000 first: a window of whole seconds scales by an exact factor.
    let limit = libm::ceil(per_second * (window_ms as f64 / 1e3));
    // `as` saturates (and takes NaN to 0), so the clamp sees every float.
    (limit as u64).clamp(1, max_limit.max(1))
}

/// A window's `limit` per `window_ms` as a rate a second: rounded down (a rate that never
/// admits more than the window), at least 1. The inverse of [`window_limit`] where it is exact.
pub fn per_second(limit: u64, window_ms: i64) -> u64 {
    let rate = limit as u128 * 1_000 / window_ms.max(1) as u128;
    u64::try_from(rate).unwrap_or(u64::MAX).max(1)
}

/// Whether a window's configured limit replaces its live one when a config is attached: it
/// does when it differs from the configured limit the live one was set under, so a reload that
/// changes a limit applies it, and one that keeps it keeps whatever was set at run time.
pub fn config_wins(configured: u64, set_under: u64) -> bool {
    configured != set_under
}

/// The live limits after a config with `configured` limits is attached to `live` ones that
/// were set under the configured limits `set_under` ([`config_wins`], window by window). With
/// another number of windows (another rule) the configured limits hold.
pub fn after_reload(configured: &[u64], set_under: &[u64], live: &[u64]) -> Limits {
    let n = configured.len().min(MAX_WINDOWS);
    let same_rule = set_under.len() == configured.len() && live.len() == configured.len();
    Limits::from_fn(n, |i| {
        if same_rule && !config_wins(configured[i], set_under[i]) {
            live[i]
        } else {
            configured[i]
        }
    })
}
