//! The aggregates over a whole slice at once: `n - k + 1` results, one per full window.

use alloc::vec::Vec;

use super::{Accumulator, Aggregate, Ewma, Extreme, Mean, Sliding, Sum, Total, Window};
use crate::Error;

/// The aggregate of every window of `k` consecutive samples of `xs`, in order (empty when
/// `xs` is shorter than `k`).
pub fn sliding<A: Accumulator>(xs: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    let mut aggregate = Sliding::<A>::new(Window::Count(k))?;
    let mut out = Vec::with_capacity((xs.len() + 1).saturating_sub(k));
    for &x in xs {
        aggregate.push(x)?;
        if aggregate.is_full() {
            out.extend(aggregate.value());
        }
    }
    Ok(out)
}

/// The maximum of every window of `k` samples.
///
/// ```
/// use slidewin::stream::sliding_max;
/// let xs = [1.0, 3.0, -1.0, -3.0, 5.0, 3.0, 6.0, 7.0];
/// assert_eq!(sliding_max(&xs, 3)?, [3.0, 3.0, 5.0, 5.0, 6.0, 7.0]);
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn sliding_max(xs: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    sliding::<Extreme<true>>(xs, k)
}

/// The minimum of every window of `k` samples.
///
/// ```
/// use slidewin::stream::sliding_min;
/// let xs = [1.0, 3.0, -1.0, -3.0, 5.0, 3.0, 6.0, 7.0];
/// assert_eq!(sliding_min(&xs, 3)?, [-1.0, -3.0, -3.0, -3.0, 3.0, 3.0]);
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn sliding_min(xs: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    sliding::<Extreme<false>>(xs, k)
}

/// The compensated sum of every window of `k` samples.
pub fn sliding_sum(xs: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    sliding::<Sum<Total>>(xs, k)
}

/// The mean of every window of `k` samples.
///
/// ```
/// use slidewin::stream::sliding_mean;
/// assert_eq!(sliding_mean(&[1.0, 2.0, 3.0, 4.0], 2)?, [1.5, 2.5, 3.5]);
/// assert_eq!(sliding_mean(&[1.0], 0).unwrap_err().to_string(), "k must be a positive integer, got 0");
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn sliding_mean(xs: &[f64], k: usize) -> Result<Vec<f64>, Error> {
    sliding::<Sum<Mean>>(xs, k)
}

/// The EWMA after each sample of `xs` (`xs.len()` results).
///
/// ```
/// use slidewin::stream::ewma;
/// assert_eq!(ewma(&[10.0, 20.0, 20.0], 0.5)?, [10.0, 15.0, 17.5]);
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn ewma(xs: &[f64], alpha: f64) -> Result<Vec<f64>, Error> {
    let mut ewma = Ewma::new(alpha)?;
    let mut out = Vec::with_capacity(xs.len());
    for &x in xs {
        ewma.push(x)?;
        out.extend(ewma.value());
    }
    Ok(out)
}
