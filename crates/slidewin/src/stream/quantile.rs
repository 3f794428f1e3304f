//! Sliding quantiles (p50, p95, p99, any `q`): exact, O(log k) per sample.

use alloc::collections::BTreeMap;
#[cfg(feature = "serde")]
use alloc::vec::Vec;
use core::cmp::Ordering;

use super::{Accumulator, Sliding, Window};
use crate::{Error, Value};

/// A sample as an ordered key (`f64::total_cmp`; samples are finite, so this is `<`, with
/// `-0.0` before `0.0`).
#[derive(Debug, Clone, Copy)]
struct Key(f64);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A multiset of samples, ordered.
#[derive(Debug, Clone, Default, PartialEq)]
struct Bag {
    counts: BTreeMap<Key, usize>,
    len: usize,
}

impl Bag {
    fn insert(&mut self, x: f64) {
        *self.counts.entry(Key(x)).or_insert(0) += 1;
        self.len += 1;
    }

    /// Remove one `x`, which the bag holds.
    fn remove(&mut self, x: f64) {
        if let Some(count) = self.counts.get_mut(&Key(x)) {
            *count -= 1;
            if *count == 0 {
                self.counts.remove(&Key(x));
            }
            self.len -= 1;
        }
    }

    fn smallest(&self) -> Option<f64> {
        self.counts.first_key_value().map(|(k, _)| k.0)
    }

    fn largest(&self) -> Option<f64> {
        self.counts.last_key_value().map(|(k, _)| k.0)
    }

    #[cfg(feature = "serde")]
    fn iter(&self) -> impl Iterator<Item = f64> + '_ {
        self.counts
            .iter()
            .flat_map(|(k, &n)| core::iter::repeat_n(k.0, n))
    }
}

/// The `q`-quantile of a window, interpolated linearly between the two nearest ranks (the
/// definition of numpy's default `linear` method and of R's type 7): over `n` sorted samples
/// `x[0..n]`, with `h = (n - 1) q`, it is `x[⌊h⌋] + (h - ⌊h⌋) (x[⌊h⌋ + 1] - x[⌊h⌋])`. `q = 0`
/// is the minimum, `q = 1` the maximum, `q = 0.5` the median.
///
/// The window's samples are split into two ordered multisets: the `⌊h⌋ + 1` smallest, and the
/// rest. A sample entering, leaving or being corrected moves at most one sample across, so
/// each costs O(log k) and the two ranks are at the two ends of the split. Exact: the result
/// is computed from two samples of the window, never from an estimate. Memory: a B-tree entry
/// per distinct sample in the window.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(into = "Stored", try_from = "Stored"))]
pub struct Quantile {
    q: f64,
    lower: Bag,
    upper: Bag,
}

impl Default for Quantile {
    /// The median.
    fn default() -> Self {
        Self {
            q: 0.5,
            lower: Bag::default(),
            upper: Bag::default(),
        }
    }
}

impl Quantile {
    /// The accumulator of the `q`-quantile, `q` in `[0, 1]` (0.95 for p95).
    pub fn new(q: f64) -> Result<Self, Error> {
        if (0.0..=1.0).contains(&q) {
            Ok(Self {
                q,
                ..Self::default()
            })
        } else {
            Err(Error::invalid("q", "a number in [0, 1]", Value::Float(q)))
        }
    }

    /// `⌊h⌋` and `h - ⌊h⌋` for `len >= 1` samples.
    fn rank(&self, len: usize) -> (usize, f64) {
        let h = (len - 1) as f64 * self.q;
        let floor = (h as usize).min(len - 1);
        (floor, h - floor as f64)
    }

    /// Add `x` to a side that keeps every sample of `lower` at most every one of `upper`
    /// (which side holds how many is [`rebalance`](Self::rebalance)'s job).
    fn insert(&mut self, x: f64) {
        match self.lower.largest() {
            Some(largest) if Key(x) <= Key(largest) => self.lower.insert(x),
            _ => self.upper.insert(x),
        }
    }

    fn remove(&mut self, x: f64) {
        match self.lower.largest() {
            Some(largest) if Key(x) <= Key(largest) => self.lower.remove(x),
            _ => self.upper.remove(x),
        }
    }

    /// Move samples across until `lower` holds the `⌊h⌋ + 1` smallest.
    fn rebalance(&mut self) {
        let len = self.lower.len + self.upper.len;
        let want = if len == 0 { 0 } else { self.rank(len).0 + 1 };
        while self.lower.len > want {
            let Some(x) = self.lower.largest() else { break };
            self.lower.remove(x);
            self.upper.insert(x);
        }
        while self.lower.len < want {
            let Some(x) = self.upper.smallest() else {
                break;
            };
            self.upper.remove(x);
            self.lower.insert(x);
        }
    }
}

impl Accumulator for Quantile {
    fn enter(&mut self, x: f64) {
        self.insert(x);
        self.rebalance();
    }

    fn leave(&mut self, x: f64) {
        self.remove(x);
        self.rebalance();
    }

    fn replace_newest(&mut self, old: f64, new: f64) {
        self.remove(old);
        self.insert(new);
        self.rebalance();
    }

    fn reset(&mut self) {
        *self = Self {
            q: self.q,
            ..Self::default()
        };
    }

    fn value(&self, len: usize, _window: Window) -> Option<f64> {
        let (_, fraction) = self.rank(len);
        let below = self.lower.largest()?;
        match self.upper.smallest() {
            // Weighted, not `below + f (above - below)`: no overflow between huge samples.
            Some(above) if fraction > 0.0 => Some((1.0 - fraction) * below + fraction * above),
            _ => Some(below),
        }
    }
}

/// The serialised form: `q` and the samples of each side, in order.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename = "Quantile")]
struct Stored {
    q: f64,
    lower: Vec<f64>,
    upper: Vec<f64>,
}

#[cfg(feature = "serde")]
impl From<Quantile> for Stored {
    fn from(quantile: Quantile) -> Self {
        Stored {
            q: quantile.q,
            lower: quantile.lower.iter().collect(),
            upper: quantile.upper.iter().collect(),
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<Stored> for Quantile {
    type Error = Error;
    fn try_from(stored: Stored) -> Result<Self, Error> {
        let mut quantile = Quantile::new(stored.q)?;
        for (side, xs) in [
            (&mut quantile.lower, stored.lower),
            (&mut quantile.upper, stored.upper),
        ] {
            for x in xs {
                side.insert(super::aggregate::sample(x)?);
            }
        }
        quantile.rebalance();
        Ok(quantile)
    }
}

/// The `q`-quantile of the window (p95: `q = 0.95`); see [`Quantile`] for the definition.
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingQuantile, Window};
/// let mut p95 = SlidingQuantile::with_q(Window::Count(100), 0.95)?;
/// for ms in 1..=100 {
///     p95.push(ms as f64)?;
/// }
/// assert_eq!(p95.value(), Some(95.05)); // h = 99 * 0.95 = 94.05: between 95 and 96
/// p95.push(1_000.0)?; // 1 leaves, 1000 enters
/// assert_eq!(p95.value(), Some(96.05));
/// let mut median = SlidingQuantile::with_q(Window::Time(1_000), 0.5)?;
/// median.push_at(0, 3.0)?;
/// median.push_at(10, 1.0)?;
/// assert_eq!(median.value(), Some(2.0));
/// assert_eq!(
///     SlidingQuantile::with_q(Window::Count(3), 1.5).unwrap_err().to_string(),
///     "q must be a number in [0, 1], got 1.5"
/// );
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingQuantile = Sliding<Quantile>;

impl SlidingQuantile {
    /// The `q`-quantile (`q` in `[0, 1]`) over `window`.
    pub fn with_q(window: Window, q: f64) -> Result<Self, Error> {
        Sliding::with(window, Quantile::new(q)?)
    }
}
