//! Sliding variance and standard deviation, stable on data with a large mean.

use core::marker::PhantomData;

use super::compensated::pow2;
use super::{Accumulator, Compensated, Reading, Sliding, Wide, Window};

/// A deviation this large may overflow the sum of squares: see [`Moments`].
const HUGE_DEVIATION: f64 = pow2(480);

/// Compensated sums of the deviations from a shift and of their squares.
///
/// The shift is moved to the window's mean at every recomputation, so the deviations stay
/// small (and, for samples within a factor two of the shift, exact): values around 1e9 with a
/// spread of 1e-2 keep their variance to full precision. When the mean wanders so far from the
/// shift that subtracting would cancel more than 4 bits, the sums are recomputed at once.
///
/// Huge finite samples never leave a wrong finite value behind: while a sample deviates from
/// the shift by `2^480` or more, the sums are recomputed from the window after every change
/// (O(window) per sample, only then), around the window's mean; the result is ±∞ only when
/// the true one is beyond `f64`, and exact again once such samples have left.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Moments<R> {
    shift: f64,
    deviations: Compensated,
    squares: Compensated,
    /// Samples with a huge deviation entered since the last recomputation.
    huge: usize,
    #[cfg_attr(feature = "serde", serde(skip))]
    reading: PhantomData<R>,
}

impl<R> Moments<R> {
    /// The mean of the `len` samples.
    pub fn mean(&self, len: usize) -> f64 {
        self.shift + self.deviations.value() / len as f64
    }

    /// The sum of squared deviations from the mean, `n` times the population variance.
    fn squared_spread(&self, len: usize) -> f64 {
        let deviations = self.deviations.value();
        if !self.squares.value().is_finite() {
            return f64::INFINITY;
        }
        (self.squares.value() - deviations * (deviations / len as f64)).max(0.0)
    }
}

impl<R: Reading<Self> + Clone + Default> Accumulator for Moments<R> {
    const RESUMS: bool = true;

    fn enter(&mut self, x: f64) {
        let deviation = x - self.shift;
        if deviation.abs() >= HUGE_DEVIATION {
            self.huge += 1;
        }
        self.deviations.add(deviation);
        self.squares.add(deviation * deviation);
    }

    fn leave(&mut self, x: f64) {
        let deviation = x - self.shift;
        self.deviations.add(-deviation);
        self.squares.add(-(deviation * deviation));
    }

    fn replace_newest(&mut self, old: f64, new: f64) {
        self.leave(old);
        self.enter(new);
    }

    fn resum(&mut self, (older, newer): (&[f64], &[f64])) {
        let len = older.len() + newer.len();
        let mut shift = self.mean(len);
        if self.huge > 0 || !shift.is_finite() {
            // Huge deviations are only meaningful from the window's best mean.
            shift = Wide::of((older, newer)).quotient(len as f64);
        }
        *self = Self {
            shift,
            ..Self::default()
        };
        older.iter().chain(newer).for_each(|&x| self.enter(x));
    }

    fn wants_resum(&self, len: usize) -> bool {
        self.huge > 0
            || self.squares.is_lossy()
            || self.squared_spread(len) * 16.0 < self.squares.value()
    }

    fn value(&self, len: usize, window: Window) -> Option<f64> {
        R::read(self, len, window)
    }
}

/// Reads the sample variance (divided by `n - 1`; `None` for one sample).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleVariance;

/// Reads the population variance (divided by `n`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PopulationVariance;

/// Reads the sample standard deviation (`None` for one sample).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SampleStdDev;

/// Reads the population standard deviation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PopulationStdDev;

/// The variance of `len` samples: over `n - 1` (sample) or `n` (population).
fn variance<R>(moments: &Moments<R>, len: usize, sample: bool) -> Option<f64> {
    let divisor = if sample {
        len.checked_sub(1).filter(|&d| d > 0)?
    } else {
        len
    };
    Some(moments.squared_spread(len) / divisor as f64)
}

impl<R> Reading<Moments<R>> for SampleVariance {
    fn read(moments: &Moments<R>, len: usize, _window: Window) -> Option<f64> {
        variance(moments, len, true)
    }
}

impl<R> Reading<Moments<R>> for PopulationVariance {
    fn read(moments: &Moments<R>, len: usize, _window: Window) -> Option<f64> {
        variance(moments, len, false)
    }
}

impl<R> Reading<Moments<R>> for SampleStdDev {
    fn read(moments: &Moments<R>, len: usize, _window: Window) -> Option<f64> {
        variance(moments, len, true).map(libm::sqrt)
    }
}

impl<R> Reading<Moments<R>> for PopulationStdDev {
    fn read(moments: &Moments<R>, len: usize, _window: Window) -> Option<f64> {
        variance(moments, len, false).map(libm::sqrt)
    }
}

/// The sample variance of the window (`None` until it holds two samples).
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingVariance, Window};
/// let mut var = SlidingVariance::new(Window::Count(4))?;
/// let spread = 1.0 / 128.0; // exact at 1e9, so the true variance is exact too
/// for x in [1e9 + spread, 1e9 - spread, 1e9 + spread, 1e9 - spread] {
///     var.push(x)?;
/// }
/// assert_eq!(var.value(), Some(4.0 * spread * spread / 3.0)); // no cancellation around 1e9
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingVariance = Sliding<Moments<SampleVariance>>;

/// The population variance of the window.
pub type SlidingPopulationVariance = Sliding<Moments<PopulationVariance>>;

/// The sample standard deviation of the window (`None` until it holds two samples).
pub type SlidingStdDev = Sliding<Moments<SampleStdDev>>;

/// The population standard deviation of the window.
pub type SlidingPopulationStdDev = Sliding<Moments<PopulationStdDev>>;
