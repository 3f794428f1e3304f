//! Sliding sum, mean and rate: one compensated sum, read three ways.

use core::marker::PhantomData;

use super::{Accumulator, Sliding, Wide, Window};
use crate::{Error, Value};

/// How a result is read from an accumulator's state `S` over `len` samples of `window`.
pub trait Reading<S> {
    /// Reject windows the reading cannot use.
    fn check(window: Window) -> Result<(), Error> {
        let _ = window;
        Ok(())
    }

    /// The result (`len >= 1`).
    fn read(state: &S, len: usize, window: Window) -> Option<f64>;
}

/// A compensated sum of the window, without drift: each sample that enters or leaves is
/// added with its rounding error kept, and the sum is recomputed from the window after twice
/// as many samples have left as it holds (half an addition per sample, amortised). The error
/// stays within a few units in the last place of the sum of the window's absolute values,
/// however long the stream runs; when a sample far larger than the rest leaves, at once (its
/// rounding residue would otherwise outweigh the sum). Huge finite samples cannot overflow it ([`Wide`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Sum<R> {
    sum: Wide,
    #[cfg_attr(feature = "serde", serde(skip))]
    reading: PhantomData<R>,
}

impl<R: Reading<Wide> + Clone + Default> Accumulator for Sum<R> {
    const RESUMS: bool = true;

    fn check(window: Window) -> Result<(), Error> {
        R::check(window)
    }

    #[inline]
    fn enter(&mut self, x: f64) {
        self.sum.add(x);
    }

    #[inline]
    fn leave(&mut self, x: f64) {
        self.sum.remove(x);
    }

    #[inline]
    fn slide(&mut self, entering: f64, leaving: f64) {
        self.sum.slide(entering, leaving);
    }

    fn replace_newest(&mut self, old: f64, new: f64) {
        self.sum.slide(new, old);
    }

    fn resum(&mut self, samples: (&[f64], &[f64])) {
        self.sum = Wide::of(samples);
    }

    #[inline]
    fn wants_resum(&self, _len: usize) -> bool {
        self.sum.is_lossy()
    }

    #[inline]
    fn value(&self, len: usize, window: Window) -> Option<f64> {
        R::read(&self.sum, len, window)
    }
}

/// Reads the sum itself.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Total;

impl Reading<Wide> for Total {
    fn read(sum: &Wide, _len: usize, _window: Window) -> Option<f64> {
        Some(sum.quotient(1.0))
    }
}

/// `len` as a float: through `i64` (a length is below `isize::MAX`), one instruction on x86-64
/// where `usize` takes six.
#[inline]
pub(super) fn count(len: usize) -> f64 {
    len as i64 as f64
}

/// Reads the mean: the sum over the number of samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Mean;

impl Reading<Wide> for Mean {
    fn read(sum: &Wide, len: usize, _window: Window) -> Option<f64> {
        Some(sum.quotient(count(len)))
    }
}

/// Reads a rate: the sum per second of a time window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PerSecond;

impl Reading<Wide> for PerSecond {
    fn check(window: Window) -> Result<(), Error> {
        match window {
            Window::Time(_) => Ok(()),
            Window::Count(k) => Err(Error::invalid(
                "window",
                "a time window for a rate (not a count)",
                Value::UInt(k as u64),
            )),
        }
    }

    fn read(sum: &Wide, _len: usize, window: Window) -> Option<f64> {
        match window {
            Window::Time(window_ms) => Some(sum.quotient(1.0) * 1_000.0 / window_ms as f64),
            Window::Count(_) => None,
        }
    }
}

/// The sum of the samples in the window.
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingSum, Window};
/// let mut sum = SlidingSum::new(Window::Count(2))?;
/// for x in [1e16, 1.0, 1.0] {
///     sum.push(x)?;
/// }
/// assert_eq!(sum.value(), Some(2.0)); // a plain running sum says 0 here
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingSum = Sliding<Sum<Total>>;

/// The mean of the samples in the window (of what is there, while it fills).
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingMean, Window};
/// let mut mean = SlidingMean::new(Window::Count(3))?;
/// mean.push(1.0)?;
/// mean.push(2.0)?;
/// assert_eq!(mean.value(), Some(1.5));
/// mean.replace_last(5.0)?;
/// assert_eq!(mean.value(), Some(3.0));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingMean = Sliding<Sum<Mean>>;

/// Events (push 1 each) or summed values per second over a time window.
///
/// The sum is divided by the whole window, also while the stream is younger than the window
/// ([`is_full`](super::Aggregate::is_full) says when it no longer is). Like every aggregate, an
/// empty window reads `None`; a panel showing "0/s" writes `value().unwrap_or(0.0)`.
///
/// ```
/// use slidewin::stream::{Aggregate, Rate, Window};
/// let mut rate = Rate::new(Window::Time(2_000))?;
/// for t in [0, 100, 900, 1_500] {
///     rate.push_at(t, 1.0)?;
/// }
/// assert_eq!(rate.value(), Some(2.0)); // 4 events in 2 s
/// assert_eq!(rate.value_at(2_900)?, Some(0.5)); // only t = 1500 is left
/// assert!(Rate::new(Window::Count(10)).is_err());
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type Rate = Sliding<Sum<PerSecond>>;
