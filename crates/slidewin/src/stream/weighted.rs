//! The weighted moving average (WMA): the newest of `n` samples weighs `n`, the oldest 1.

use super::{Accumulator, Compensated, Sliding, Window};

/// Compensated sums of the window's samples and of the samples times their weights.
///
/// A sample entering gets weight `n` (the window's new length); one leaving lowers every
/// other weight by one, which is subtracting the plain sum. The sums are recomputed from the
/// window after twice as many samples have left as it holds (no drift), at once when a
/// sample far larger than the window's scale has been in it since, and while they are not
/// finite (a sample so large that `n x` overflows: the value is then ±∞ or NaN
/// until it has left, and exact again from then on).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Weighted {
    sum: Compensated,
    weighted: Compensated,
    len: usize,
    /// The largest magnitude entered since the last recomputation.
    peak: f64,
}

fn weight(n: usize) -> f64 {
    n as i64 as f64
}

impl Accumulator for Weighted {
    const RESUMS: bool = true;

    fn enter(&mut self, x: f64) {
        self.len += 1;
        self.peak = self.peak.max(x.abs());
        self.sum.add(x);
        self.weighted.add(weight(self.len) * x);
    }

    fn leave(&mut self, x: f64) {
        self.weighted.subtract(&self.sum);
        self.sum.add(-x);
        self.len -= 1;
    }

    fn replace_newest(&mut self, old: f64, new: f64) {
        self.peak = self.peak.max(new.abs());
        self.sum.slide(new, old);
        self.weighted.add(weight(self.len) * new);
        self.weighted.add(-(weight(self.len) * old));
    }

    fn resum(&mut self, (older, newer): (&[f64], &[f64])) {
        *self = Self::default();
        older.iter().chain(newer).for_each(|&x| self.enter(x));
    }

    fn wants_resum(&self, len: usize) -> bool {
        // The rounding errors are those of the largest sample since the recomputation: when
        // it dwarfs the window's own scale, recompute so they stay within the window's.
        let scale = self.sum.value().abs() + self.weighted.value().abs() / weight(len);
        !scale.is_finite() || self.peak > 256.0 * scale
    }

    fn value(&self, len: usize, _window: Window) -> Option<f64> {
        let n = weight(len);
        Some(self.weighted.value() / (n * (n + 1.0) / 2.0))
    }
}

/// The weighted moving average of the window: weights `1, 2, ..., n` from the oldest sample
/// to the newest (over a partial window, of what is there).
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingWma, Window};
/// let mut wma = SlidingWma::new(Window::Count(3))?;
/// for x in [1.0, 2.0, 3.0, 4.0] {
///     wma.push(x)?;
/// }
/// assert_eq!(wma.value(), Some((2.0 + 2.0 * 3.0 + 3.0 * 4.0) / 6.0));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingWma = Sliding<Weighted>;
