//! nginx's `$upstream_response_time` / `$upstream_header_time`: seconds with millisecond
//! digits, one per upstream tried (`"0.010, 0.020"`), groups of an internal redirect apart
//! with a colon (`"0.010, 0.020 : 0.030"`), `-` for a try that got no answer.

/// The total time (ms) of every try: what the request waited on upstreams. `None` for text
/// that is not such a list (or names no time at all: `-` alone).
///
/// ```
/// use slidewin::adaptive::upstream_time_ms;
/// assert_eq!(upstream_time_ms("0.010, 0.020 : 0.030"), Some(60));
/// assert_eq!(upstream_time_ms("1.5"), Some(1_500));
/// assert_eq!(upstream_time_ms("-, 0.004"), Some(4));
/// assert_eq!(upstream_time_ms("-"), None);
/// assert_eq!(upstream_time_ms("0.01x"), None);
/// ```
pub fn upstream_time_ms(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut timed = false;
    for item in text.split([',', ':']) {
        let item = item.trim();
        if item == "-" {
            continue;
        }
        total = total.checked_add(seconds_to_ms(item)?)?;
        timed = true;
    }
    timed.then_some(total)
}

/// `"1.234"` -> 1234 (digits past the third decimal are cut), exactly, with no float.
fn seconds_to_ms(item: &str) -> Option<u64> {
    let (whole, frac) = item.split_once('.').unwrap_or((item, ""));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !(frac.is_empty() || digits(frac)) || whole.len() > 12 {
        return None;
    }
    let ms = frac
        .bytes()
        .chain(core::iter::repeat(b'0'))
        .take(3)
        .fold(0u64, |n, b| n * 10 + u64::from(b - b'0'));
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1_000)?
        .checked_add(ms)
}
