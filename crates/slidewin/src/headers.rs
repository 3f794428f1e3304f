//! What a [`Decision`] tells the client, as HTTP header values: one rendering for every door
//! (the OpenResty layer, a native nginx module, a store that decides elsewhere), so the same
//! trace gives the same bytes wherever it is answered.
//!
//! Three styles:
//! - [`Style::Draft`]: the IETF draft (draft-ietf-httpapi-ratelimit-headers):
//!   `RateLimit-Policy: "api";q=10;w=1, "api-1h";q=1000;w=3600` (every window of the rule) and
//!   `RateLimit: "api-1h";r=0;t=1800` (the window the decision describes).
//! - [`Style::XRateLimit`]: `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//!   `X-RateLimit-Reset` (UTC epoch seconds), as GitHub sends them.
//! - [`Style::None`]: no header at all; [`render`] still gives the `Retry-After` value, for a
//!   refusal's body that states the wait.
//!
//! Every time goes out in whole seconds rounded up ([`seconds_up`]): a client that waits what
//! it was told is never early.
//!
//! ```
//! use slidewin::headers::{render, Field, Policy, PolicyWindow, Style, Value};
//! use slidewin::Decision;
//!
//! let policy = Policy::new(&[
//!     PolicyWindow { name: "api", limit: 10, window_ms: 1_000 },
//!     PolicyWindow { name: "api-1h", limit: 1_000, window_ms: 3_600_000 },
//! ]);
//! assert_eq!(policy.value(), r#""api";q=10;w=1, "api-1h";q=1000;w=3600"#);
//!
//! let refused = Decision {
//!     allowed: false, limit: 1_000, remaining: 0, retry_after_ms: Some(1_799_001),
//!     reset_after_ms: 3_000_000, window: 1,
//! };
//! let mut values = Vec::new();
//! render(Style::Draft, &policy, &refused, 0, &mut |field, value: Value| {
//!     values.push((field, value.to_string()));
//! });
//! assert_eq!(values, [
//!     (Field::RateLimit, r#""api-1h";r=0;t=1800"#.to_string()),
//!     (Field::RetryAfter, "1800".to_string()),
//! ]);
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::rule::Rule;
use crate::window_name::WindowNames;
use crate::Decision;

/// Milliseconds as whole seconds, rounded up: the one rounding of every header.
pub const fn seconds_up(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// Which headers describe a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// `RateLimit-Policy` and `RateLimit`, the IETF draft's.
    Draft,
    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset`.
    XRateLimit,
    /// No header at all (the wait is still rendered, for a body).
    None,
}

impl Style {
    /// The style a config names: `"draft"`, `"x-ratelimit"` or `"none"` (`"off"` in nginx's
    /// words).
    pub fn from_name(name: &str) -> Option<Style> {
        match name {
            "draft" => Some(Style::Draft),
            "x-ratelimit" => Some(Style::XRateLimit),
            "none" | "off" => Some(Style::None),
            _ => None,
        }
    }

    /// Whether an admitted answer carries headers (a refusal carries `Retry-After` always).
    pub const fn sends_headers(self) -> bool {
        !matches!(self, Style::None)
    }

    /// Whether answers carry `RateLimit-Policy`.
    pub const fn sends_policy(self) -> bool {
        matches!(self, Style::Draft)
    }
}

/// One header a decision is answered with (besides `RateLimit-Policy`, the same for every
/// decision of one version of the limits: [`Policy::value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `RateLimit`.
    RateLimit,
    /// `Retry-After`, only when refused and the cost can fit some day.
    RetryAfter,
    /// `X-RateLimit-Limit`.
    XLimit,
    /// `X-RateLimit-Remaining`.
    XRemaining,
    /// `X-RateLimit-Reset`.
    XReset,
}

impl Field {
    /// Every field, in the order [`render`] writes them.
    pub const ALL: [Field; 5] = [
        Field::RateLimit,
        Field::RetryAfter,
        Field::XLimit,
        Field::XRemaining,
        Field::XReset,
    ];

    /// The header's name.
    pub const fn name(self) -> &'static str {
        match self {
            Field::RateLimit => "RateLimit",
            Field::RetryAfter => "Retry-After",
            Field::XLimit => "X-RateLimit-Limit",
            Field::XRemaining => "X-RateLimit-Remaining",
            Field::XReset => "X-RateLimit-Reset",
        }
    }
}

/// A window as the policy names it.
#[derive(Debug, Clone, Copy)]
pub struct PolicyWindow<'a> {
    /// The window's name in both headers (a structured-field string: no `"` or `\`).
    pub name: &'a str,
    /// Its limit under this policy.
    pub limit: u64,
    /// Its length.
    pub window_ms: u64,
}

/// A rule's windows under one set of limits: the `RateLimit-Policy` value, made once per
/// version of the limits, and each window's name for `RateLimit`.
#[derive(Debug, Clone)]
pub struct Policy {
    value: String,
    names: Vec<String>,
    /// [`Policy::values_bytes`], for the longest name.
    values_bytes: usize,
}

impl Default for Policy {
    /// No window: room for the values of a window whose name is empty.
    fn default() -> Self {
        Policy::new(&[])
    }
}

impl Policy {
    /// The policy of `windows`, in the rule's order.
    pub fn new(windows: &[PolicyWindow<'_>]) -> Policy {
        let mut value = String::new();
        for (i, w) in windows.iter().enumerate() {
            let separator = if i == 0 { "" } else { ", " };
            // Writing to a String cannot fail.
            let _ = write!(
                value,
                "{separator}\"{}\";q={};w={}",
                w.name,
                w.limit,
                seconds_up(w.window_ms)
            );
        }
        Policy {
            value,
            names: windows.iter().map(|w| String::from(w.name)).collect(),
            values_bytes: windows.iter().map(|w| w.name.len()).max().unwrap_or(0) + 8 + 4 * 20,
        }
    }

    /// The policy of `rule` under `limits`, its windows called as `names` calls them.
    pub fn of_rule(rule: &Rule, limits: &[u64], names: &WindowNames) -> Policy {
        let named: Vec<String> = (rule.windows().iter().enumerate())
            .map(|(i, w)| names.name(i, w.window_ms()))
            .collect();
        Policy::of_named(rule, limits, &named)
    }

    /// The policy of `rule` under `limits`, window `i` called `named[i]` (names completed
    /// already, as [`WindowNames::name`] gives them).
    pub fn of_named(rule: &Rule, limits: &[u64], named: &[String]) -> Policy {
        let windows: Vec<PolicyWindow<'_>> = (rule.windows().iter().zip(named).zip(limits))
            .map(|((w, name), &limit)| PolicyWindow {
                name,
                limit,
                window_ms: w.window_ms() as u64,
            })
            .collect();
        Policy::new(&windows)
    }

    /// The `RateLimit-Policy` value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The most bytes [`write_values`] writes for one decision: `RateLimit`'s quoted name and
    /// `";r=;t="` (8 bytes), and four numbers of at most 20 digits (`RateLimit`'s two and
    /// `Retry-After`, or x-ratelimit's three and `Retry-After`).
    pub fn values_bytes(&self) -> usize {
        self.values_bytes
    }

    /// The name of window `window` (0-based), or `""` past the rule's windows.
    pub fn name(&self, window: usize) -> &str {
        self.names.get(window).map_or("", String::as_str)
    }
}

/// When the window a decision describes is empty (admitted, or never admitted) or admits the
/// call again (refused): the `t` of `RateLimit` and the base of `X-RateLimit-Reset`.
pub fn until_ms(decision: &Decision) -> u64 {
    match (decision.allowed, decision.retry_after_ms) {
        (false, Some(wait_ms)) => wait_ms,
        _ => decision.reset_after_ms,
    }
}

/// One header value as [`render`] gives it: written into bytes by [`write_value`] (no
/// `core::fmt`: this runs for every request a binding answers), or shown through `Display`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// A number (`X-RateLimit-*`, `Retry-After`).
    Number(u64),
    /// `RateLimit`'s `"<name>";r=<remaining>;t=<seconds>`.
    RateLimit {
        /// The window's name (a structured-field string: no `"` or `\`).
        name: &'a str,
        /// What the window has left.
        remaining: u64,
        /// Seconds until it empties or admits the call again.
        t: u64,
    },
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Value::Number(n) => write!(f, "{n}"),
            Value::RateLimit { name, remaining, t } => write!(f, "\"{name}\";r={remaining};t={t}"),
        }
    }
}

/// Hands `sink` each header value `decision` is answered with in `style` (`policy`: the rule's
/// windows under the limits decided with; `now_ms`: the clock the decision was made at, for
/// `X-RateLimit-Reset`). `Retry-After` comes only with a refusal that can be admitted later.
pub fn render<'p, S>(
    style: Style,
    policy: &'p Policy,
    decision: &Decision,
    now_ms: i64,
    sink: &mut S,
) where
    S: FnMut(Field, Value<'p>),
{
    let t_ms = until_ms(decision);
    match style {
        Style::None => {}
        Style::Draft => sink(
            Field::RateLimit,
            Value::RateLimit {
                name: policy.name(decision.window),
                remaining: decision.remaining,
                t: seconds_up(t_ms),
            },
        ),
        Style::XRateLimit => {
            let reset_ms = u64::try_from(now_ms).unwrap_or(0).saturating_add(t_ms);
            sink(Field::XLimit, Value::Number(decision.limit));
            sink(Field::XRemaining, Value::Number(decision.remaining));
            sink(Field::XReset, Value::Number(seconds_up(reset_ms)));
        }
    }
    if let (false, Some(wait_ms)) = (decision.allowed, decision.retry_after_ms) {
        sink(Field::RetryAfter, Value::Number(seconds_up(wait_ms)));
    }
}

impl Value<'_> {
    /// Bytes [`write_value`] writes: a binding sizes the host's buffer with it.
    pub fn len(&self) -> usize {
        match *self {
            Value::Number(n) => digits(n),
            // `"` name `";r=` remaining `;t=` t
            Value::RateLimit { name, remaining, t } => {
                name.len() + 8 + digits(remaining) + digits(t)
            }
        }
    }

    /// Whether the value writes no bytes (never: a number has a digit).
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Writes `value` (what [`render`] gives a sink) into the start of `buf`, without allocating:
/// the bytes a binding hands to its host ([`Value::len`] of them), or `None` when `buf` is
/// shorter.
pub fn write_value<'b>(buf: &'b mut [u8], value: Value<'_>) -> Option<&'b [u8]> {
    let out = buf.get_mut(..value.len())?;
    match value {
        Value::Number(n) => write_number(out, n),
        Value::RateLimit { name, remaining, t } => {
            let (quoted, rest) = out.split_at_mut(name.len() + 5);
            quoted[0] = b'"';
            quoted[1..=name.len()].copy_from_slice(name.as_bytes());
            quoted[name.len() + 1..].copy_from_slice(b"\";r=");
            let (remaining_digits, rest) = rest.split_at_mut(digits(remaining));
            write_number(remaining_digits, remaining);
            rest[..3].copy_from_slice(b";t=");
            write_number(&mut rest[3..], t);
        }
    }
    Some(out)
}

/// The values [`render`] gives for one decision, written one after another into `buf` by
/// [`write_value`]: `sink` gets each field with its bytes, in order. False when `buf` is
/// shorter than [`Policy::values_bytes`] and a value did not fit (`sink` got those before).
///
/// ```
/// use slidewin::headers::{write_values, Field, Policy, PolicyWindow, Style};
/// use slidewin::Decision;
///
/// let policy = Policy::new(&[PolicyWindow { name: "api", limit: 10, window_ms: 1_000 }]);
/// let refused = Decision {
///     allowed: false, limit: 10, remaining: 0, retry_after_ms: Some(400),
///     reset_after_ms: 1_000, window: 0,
/// };
/// let mut buf = vec![0; policy.values_bytes()];
/// let mut values = Vec::new();
/// let fit = write_values(Style::Draft, &policy, &refused, 0, &mut buf, |field, value| {
///     values.push((field, value.to_vec()))
/// });
/// assert!(fit);
/// assert_eq!(values, [
///     (Field::RateLimit, br#""api";r=0;t=1"#.to_vec()),
///     (Field::RetryAfter, b"1".to_vec()),
/// ]);
/// ```
#[inline]
pub fn write_values<'b>(
    style: Style,
    policy: &Policy,
    decision: &Decision,
    now_ms: i64,
    buf: &'b mut [u8],
    mut sink: impl FnMut(Field, &'b mut [u8]),
) -> bool {
    let mut free = buf;
    let mut fit = true;
    render(style, policy, decision, now_ms, &mut |field, value| {
        let rest = core::mem::take(&mut free);
        let Some(len) = write_value(rest, value).map(<[u8]>::len) else {
            fit = false;
            return;
        };
        let (written, rest) = rest.split_at_mut(len);
        free = rest;
        sink(field, written);
    });
    fit
}

/// Decimal digits of `n`: the bit length's estimate of log10, corrected by one comparison.
fn digits(n: u64) -> usize {
    let bits = 64 - (n | 1).leading_zeros() as usize;
    let estimate = (bits * 1233) >> 12; // 1233 / 4096 ~ log10(2)
    estimate + usize::from(n | 1 >= POWERS_OF_TEN[estimate])
}

/// 10^0 to 10^19: every power of ten a u64 holds.
const POWERS_OF_TEN: [u64; 20] = {
    let mut powers = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        powers[i] = powers[i - 1] * 10;
        i += 1;
    }
    powers
};

/// `n` in decimal into all of `out` (exactly its [`digits`] long), from the last digit, four
/// at a time (one division by 10,000), then two, then one.
fn write_number(out: &mut [u8], mut n: u64) {
    let pair = |p: usize| [PAIRS[2 * p], PAIRS[2 * p + 1]];
    let mut at = out.len();
    while at >= 4 {
        let four = (n % 10_000) as usize;
        n /= 10_000;
        let [a, b] = pair(four / 100);
        let [c, d] = pair(four % 100);
        out[at - 4..at].copy_from_slice(&[a, b, c, d]);
        at -= 4;
    }
    if at >= 2 {
        out[at - 2..at].copy_from_slice(&pair((n % 100) as usize));
        n /= 100;
        at -= 2;
    }
    if at == 1 {
        out[0] = b'0' + n as u8;
    }
}

/// "00" to "99", one pair per two bytes.
const PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    fn rendered(style: Style, decision: &Decision, now_ms: i64) -> Vec<(Field, String)> {
        let policy = Policy::new(&[PolicyWindow {
            name: "api",
            limit: 10,
            window_ms: 1_500,
        }]);
        let mut out = Vec::new();
        render(style, &policy, decision, now_ms, &mut |f, v: Value| {
            out.push((f, v.to_string()))
        });
        out
    }

    const ADMITTED: Decision = Decision {
        allowed: true,
        limit: 10,
        remaining: 7,
        retry_after_ms: Some(0),
        reset_after_ms: 1_001,
        window: 0,
    };

    #[test]
    fn an_admission_says_when_its_window_empties_rounded_up() {
        assert_eq!(
            rendered(Style::Draft, &ADMITTED, 5_000),
            vec![(Field::RateLimit, "\"api\";r=7;t=2".to_string())]
        );
        assert_eq!(
            rendered(Style::XRateLimit, &ADMITTED, 5_000),
            vec![
                (Field::XLimit, "10".to_string()),
                (Field::XRemaining, "7".to_string()),
                (Field::XReset, "7".to_string()),
            ]
        );
        assert!(rendered(Style::None, &ADMITTED, 5_000).is_empty());
    }

    #[test]
    fn a_refusal_says_when_it_admits_again_and_never_has_no_retry_after() {
        let refused = Decision {
            allowed: false,
            remaining: 0,
            retry_after_ms: Some(1),
            ..ADMITTED
        };
        assert_eq!(
            rendered(Style::Draft, &refused, 0),
            vec![
                (Field::RateLimit, "\"api\";r=0;t=1".to_string()),
                (Field::RetryAfter, "1".to_string()),
            ]
        );
        let never = Decision {
            retry_after_ms: None,
            ..refused
        };
        assert_eq!(
            rendered(Style::Draft, &never, 0),
            vec![(Field::RateLimit, "\"api\";r=0;t=2".to_string())]
        );
        assert_eq!(
            rendered(Style::None, &refused, 0),
            vec![(Field::RetryAfter, "1".to_string())]
        );
    }

    #[test]
    fn numbers_up_to_2_pow_53_are_written_as_digits() {
        let policy = Policy::new(&[PolicyWindow {
            name: "a",
            limit: 1 << 53,
            window_ms: 1,
        }]);
        assert_eq!(policy.value(), "\"a\";q=9007199254740992;w=1");
        assert_eq!(policy.name(3), "");
    }

    #[test]
    fn a_value_is_written_into_the_buffer_or_refused_whole() {
        let mut buf = [0u8; 8];
        assert_eq!(write_value(&mut buf, Value::Number(42)), Some(&b"42"[..]));
        assert_eq!(write_value(&mut buf, Value::Number(1_000_000_000)), None);
        let rate_limit = Value::RateLimit {
            name: "a",
            remaining: 1,
            t: 2,
        };
        assert_eq!(write_value(&mut buf, rate_limit), None);
        assert_eq!(
            write_value(&mut [0u8; 11], rate_limit),
            Some(&br#""a";r=1;t=2"#[..])
        );
    }

    #[test]
    fn values_written_together_are_the_rendered_ones_or_none_fit_past_the_buffer() {
        let policy = Policy::new(&[
            PolicyWindow {
                name: "api",
                limit: 10,
                window_ms: 1_500,
            },
            PolicyWindow {
                name: "api-1h-with-a-long-name",
                limit: u64::MAX,
                window_ms: 3_600_000,
            },
        ]);
        let refused = Decision {
            allowed: false,
            limit: u64::MAX,
            remaining: u64::MAX,
            retry_after_ms: Some(u64::MAX),
            reset_after_ms: u64::MAX,
            window: 1,
        };
        for style in [Style::Draft, Style::XRateLimit, Style::None] {
            for d in [ADMITTED, refused] {
                let mut expected = Vec::new();
                render(style, &policy, &d, i64::MAX, &mut |f, v: Value| {
                    expected.push((f, v.to_string()))
                });
                let mut buf = vec![0; policy.values_bytes()];
                let mut got = Vec::new();
                let fit = write_values(style, &policy, &d, i64::MAX, &mut buf, |f, v| {
                    got.push((f, String::from_utf8(v.to_vec()).unwrap()))
                });
                assert!(fit, "{style:?} {d:?}");
                assert_eq!(got, expected, "{style:?} {d:?}");
                if expected.is_empty() {
                    continue;
                }
                // One byte short of all of them: the last one does not fit.
                let total: usize = expected.iter().map(|(_, v)| v.len()).sum();
                let mut short = vec![0; total - 1];
                let mut before_last = 0;
                let fit = write_values(style, &policy, &d, i64::MAX, &mut short, |_, _| {
                    before_last += 1
                });
                assert!(!fit, "{style:?} {d:?}");
                assert_eq!(before_last, expected.len() - 1, "{style:?} {d:?}");
            }
        }
    }

    #[test]
    fn written_values_are_the_displayed_ones() {
        // Every count of digits, at both of its ends.
        let powers = (0..20).map(|k| 10u64.pow(k));
        let edges = powers.flat_map(|p| [p - 1, p, p + 1]);
        let numbers = edges.chain([1 << 53, u64::MAX / 10, u64::MAX]);
        let mut buf = [0u8; 64];
        for n in numbers {
            for value in [
                Value::Number(n),
                Value::RateLimit {
                    name: "api-1h",
                    remaining: n,
                    t: n,
                },
            ] {
                let written = write_value(&mut buf, value).expect("fits");
                assert_eq!(written, value.to_string().as_bytes(), "{value:?}");
                assert_eq!(value.len(), written.len(), "{value:?}");
            }
        }
    }
}
