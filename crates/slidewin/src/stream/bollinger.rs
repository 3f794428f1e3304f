//! Bollinger bands: the window's mean, and that mean plus and minus a multiple of its
//! population standard deviation.

use super::{Aggregate, Bands, Moments, PopulationStdDev, Sliding, Window};
use crate::{Error, Value};

/// Bollinger bands over a window: the middle is the mean (the SMA, for a count window), the
/// bounds are `width` population standard deviations away (John Bollinger's definition, which
/// technicalindicators and trading-signals follow; 20 samples and width 2 are the usual
/// choice). [`value`](Aggregate::value) is the middle line, [`bands`](Aggregate::bands) all three.
///
/// ```
/// use slidewin::stream::{Aggregate, Bollinger, Window};
/// let mut bands = Bollinger::new(Window::Count(4), 2.0)?;
/// for x in [1.0, 3.0, 1.0, 3.0] {
///     bands.push(x)?;
/// }
/// let b = bands.bands().unwrap();
/// assert_eq!((b.lower, b.middle, b.upper), (0.0, 2.0, 4.0)); // mean 2, population SD 1
/// # Ok::<(), slidewin::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bollinger {
    moments: Sliding<Moments<PopulationStdDev>>,
    width: f64,
}

impl Bollinger {
    /// Bands `width` (finite, `>= 0`) population standard deviations around the mean of `window`.
    pub fn new(window: Window, width: f64) -> Result<Self, Error> {
        if !(width.is_finite() && width >= 0.0) {
            return Err(Error::invalid(
                "width",
                "a finite number >= 0",
                Value::Float(width),
            ));
        }
        Ok(Self {
            moments: Sliding::new(window)?,
            width,
        })
    }
}

impl Aggregate for Bollinger {
    fn push_at(&mut self, t_ms: i64, x: f64) -> Result<(), Error> {
        self.moments.push_at(t_ms, x)
    }

    fn push(&mut self, x: f64) -> Result<(), Error> {
        self.moments.push(x)
    }

    fn replace_last(&mut self, x: f64) -> Result<(), Error> {
        self.moments.replace_last(x)
    }

    fn advance_to(&mut self, now_ms: i64) -> Result<(), Error> {
        self.moments.advance_to(now_ms)
    }

    fn value(&self) -> Option<f64> {
        self.bands().map(|b| b.middle)
    }

    fn bands(&self) -> Option<Bands> {
        let spread = self.moments.value()? * self.width;
        let middle = self.moments.accumulator().mean(self.moments.len());
        Some(Bands {
            lower: middle - spread,
            middle,
            upper: middle + spread,
        })
    }

    fn len(&self) -> usize {
        self.moments.len()
    }

    fn is_full(&self) -> bool {
        self.moments.is_full()
    }

    fn latest_ms(&self) -> Option<i64> {
        self.moments.latest_ms()
    }

    fn clear(&mut self) {
        self.moments.clear()
    }
}
