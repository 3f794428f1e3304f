//! Exponentially weighted moving averages: per sample (`Ewma`) and per elapsed time (`TimeEwma`).

use super::aggregate::{advance, sample};
use super::Aggregate;
use crate::quota::MAX_WINDOW_MS;
use crate::{Error, Value};

/// How much a new sample weighs in an exponentially weighted mean.
pub trait Weighting: Clone {
    /// The share of a sample arriving `elapsed_ms` after the previous time seen (`None` for
    /// the first sample, which is the whole mean).
    fn share(&mut self, elapsed_ms: Option<i64>) -> f64;

    /// `elapsed_ms` pass without a sample.
    fn wait(&mut self, elapsed_ms: i64) {
        let _ = elapsed_ms;
    }

    /// Forget the samples.
    fn reset(&mut self) {}

    /// How many samples the mean needs before it has a value (1 unless seeded by an SMA).
    fn warmup(&self) -> usize {
        1
    }
}

/// An exponentially weighted mean: each sample moves it by its [`Weighting::share`].
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Smoothed<W> {
    weighting: W,
    mean: f64,
    /// The mean before the newest sample, and that sample's share, so it can be corrected.
    before_newest: f64,
    newest_share: f64,
    len: usize,
    latest_ms: Option<i64>,
}

impl<W: Weighting> Smoothed<W> {
    fn with(weighting: W) -> Self {
        Self {
            weighting,
            mean: 0.0,
            before_newest: 0.0,
            newest_share: 0.0,
            len: 0,
            latest_ms: None,
        }
    }

    /// Fold in `x` as the newest sample.
    #[inline]
    fn set_newest(&mut self, x: f64) {
        self.mean = self.before_newest * (1.0 - self.newest_share) + x * self.newest_share;
    }
}

impl<W: Weighting> Aggregate for Smoothed<W> {
    #[inline]
    fn push_at(&mut self, t_ms: i64, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        let previous_ms = self.latest_ms;
        advance(&mut self.latest_ms, "t_ms", t_ms)?;
        let elapsed_ms = previous_ms
            .filter(|_| self.len > 0)
            .map(|p| t_ms.saturating_sub(p));
        self.newest_share = self.weighting.share(elapsed_ms);
        self.before_newest = self.mean;
        self.set_newest(x);
        self.len = self.len.saturating_add(1);
        Ok(())
    }

    fn replace_last(&mut self, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        if self.len == 0 {
            return Err(Error::NoSample {
                name: "replace_last",
            });
        }
        self.set_newest(x);
        Ok(())
    }

    fn advance_to(&mut self, now_ms: i64) -> Result<(), Error> {
        let previous_ms = self.latest_ms;
        advance(&mut self.latest_ms, "now_ms", now_ms)?;
        if let Some(p) = previous_ms {
            self.weighting.wait(now_ms.saturating_sub(p));
        }
        Ok(())
    }

    #[inline]
    fn value(&self) -> Option<f64> {
        (self.len >= self.weighting.warmup()).then_some(self.mean)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_full(&self) -> bool {
        self.len >= self.weighting.warmup()
    }

    fn latest_ms(&self) -> Option<i64> {
        self.latest_ms
    }

    fn clear(&mut self) {
        self.weighting.reset();
        *self = Self::with(self.weighting.clone());
    }
}

/// A fixed share `alpha` in (0, 1] per sample.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(try_from = "f64", into = "f64"))]
pub struct Alpha(f64);

impl TryFrom<f64> for Alpha {
    type Error = Error;
    fn try_from(alpha: f64) -> Result<Self, Error> {
        if alpha > 0.0 && alpha <= 1.0 {
            Ok(Alpha(alpha))
        } else {
            Err(Error::invalid(
                "alpha",
                "a number in (0, 1]",
                Value::Float(alpha),
            ))
        }
    }
}

impl From<Alpha> for f64 {
    fn from(alpha: Alpha) -> f64 {
        alpha.0
    }
}

impl Weighting for Alpha {
    #[inline]
    fn share(&mut self, elapsed_ms: Option<i64>) -> f64 {
        if elapsed_ms.is_some() {
            self.0
        } else {
            1.0
        }
    }
}

/// How an EMA of a period starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Seed {
    /// The first sample is the mean; every later one weighs `2 / (period + 1)` (trading-signals,
    /// pandas' `ewm(span=period, adjust=False)`). A value from the first sample on.
    First,
    /// No value before `period` samples; then the mean of those (their SMA), and every later
    /// sample weighs `2 / (period + 1)` (technicalindicators, TA-Lib).
    Sma,
}

/// The share `2 / (period + 1)` per sample, after a start given by [`Seed`]: with
/// [`Seed::Sma`] the first `period` samples weigh alike (their running mean).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Period {
    period: usize,
    seed: Seed,
    /// Samples folded in, up to `period`.
    seen: usize,
}

impl Period {
    /// A period of `1..=2^32` samples.
    pub fn new(period: u64, seed: Seed) -> Result<Self, Error> {
        match period {
            1..=0x1_0000_0000 => Ok(Self {
                period: period as usize,
                seed,
                seen: 0,
            }),
            _ => Err(Error::invalid(
                "period",
                "an integer in 1..=2^32",
                Value::UInt(period),
            )),
        }
    }
}

impl Weighting for Period {
    #[inline]
    fn share(&mut self, elapsed_ms: Option<i64>) -> f64 {
        self.seen = if elapsed_ms.is_some() { self.seen } else { 0 };
        self.seen = self.seen.saturating_add(1).min(self.period + 1);
        match self.seed {
            Seed::First if self.seen == 1 => 1.0,
            Seed::Sma if self.seen <= self.period => 1.0 / self.seen as f64,
            _ => 2.0 / (self.period as f64 + 1.0),
        }
    }

    fn reset(&mut self) {
        self.seen = 0;
    }

    fn warmup(&self) -> usize {
        match self.seed {
            Seed::First => 1,
            Seed::Sma => self.period,
        }
    }
}

/// A weight that halves every `half_life_ms`: the mean of the samples weighted by
/// `2^(-age / half_life_ms)`. Samples of equal time weigh the same.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct HalfLife {
    #[cfg_attr(feature = "serde", serde(deserialize_with = "checked_half_life"))]
    half_life_ms: i64,
    /// The total weight of the samples so far (the newest weighs 1 when it arrives).
    weight: f64,
}

impl HalfLife {
    /// A half-life in `1..=2^52` ms.
    pub fn new(half_life_ms: i64) -> Result<Self, Error> {
        match half_life_ms {
            1..=MAX_WINDOW_MS => Ok(Self {
                half_life_ms,
                weight: 0.0,
            }),
            _ => Err(Error::invalid(
                "half_life_ms",
                "an integer in 1..=2^52",
                Value::Int(half_life_ms),
            )),
        }
    }
}

impl Weighting for HalfLife {
    fn share(&mut self, elapsed_ms: Option<i64>) -> f64 {
        match elapsed_ms {
            Some(elapsed_ms) => self.wait(elapsed_ms),
            None => self.weight = 0.0,
        }
        self.weight += 1.0;
        1.0 / self.weight
    }

    fn wait(&mut self, elapsed_ms: i64) {
        self.weight *= libm::exp2(-(elapsed_ms as f64) / self.half_life_ms as f64);
    }

    fn reset(&mut self) {
        self.weight = 0.0;
    }
}

#[cfg(feature = "serde")]
fn checked_half_life<'de, D: serde::Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let half_life_ms: i64 = serde::Deserialize::deserialize(d)?;
    HalfLife::new(half_life_ms)
        .map(|_| half_life_ms)
        .map_err(serde::de::Error::custom)
}

/// An exponentially weighted moving average over samples: `mean += alpha * (x - mean)`,
/// starting at the first sample.
///
/// ```
/// use slidewin::stream::{Aggregate, Ewma};
/// let mut ewma = Ewma::new(0.5)?;
/// ewma.push(10.0)?;
/// ewma.push(20.0)?;
/// assert_eq!(ewma.value(), Some(15.0));
/// ewma.replace_last(30.0)?;
/// assert_eq!(ewma.value(), Some(20.0));
/// assert_eq!(Ewma::new(1.5).unwrap_err().to_string(), "alpha must be a number in (0, 1], got 1.5");
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type Ewma = Smoothed<Alpha>;

impl Ewma {
    /// An EWMA giving each new sample the share `alpha` in (0, 1].
    pub fn new(alpha: f64) -> Result<Self, Error> {
        Ok(Self::with(Alpha::try_from(alpha)?))
    }
}

/// An exponential moving average by period, as charting libraries define it: each sample
/// weighs `2 / (period + 1)`, and the start is a [`Seed`] (the first sample, or the SMA of the
/// first `period` samples, with no value before).
///
/// ```
/// use slidewin::stream::{Aggregate, Ema, Seed};
/// let mut ema = Ema::new(3, Seed::Sma)?;
/// ema.push(2.0)?;
/// ema.push(4.0)?;
/// assert_eq!(ema.value(), None); // not before `period` samples
/// ema.push(6.0)?;
/// assert_eq!(ema.value(), Some(4.0)); // the SMA of the first 3
/// ema.push(8.0)?;
/// assert_eq!(ema.value(), Some(6.0)); // 4 + (8 - 4) * 2 / (3 + 1)
/// let mut first = Ema::new(3, Seed::First)?;
/// first.push(2.0)?;
/// assert_eq!(first.value(), Some(2.0));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type Ema = Smoothed<Period>;

impl Ema {
    /// An EMA of `period` samples (`1..=2^32`) started as `seed` says.
    pub fn new(period: u64, seed: Seed) -> Result<Self, Error> {
        Ok(Self::with(Period::new(period, seed)?))
    }
}

/// An exponentially weighted moving average over time, for irregularly spaced samples: a
/// sample's weight halves every `half_life_ms` of its age, whatever arrives meanwhile.
///
/// ```
/// use slidewin::stream::{Aggregate, TimeEwma};
/// let near = |v: Option<f64>, want: f64| (v.unwrap() - want).abs() < 1e-12;
/// let mut ewma = TimeEwma::new(1_000)?;
/// ewma.push_at(0, 10.0)?;
/// ewma.push_at(1_000, 40.0)?; // the first sample now weighs 1/2, the new one 1
/// assert!(near(ewma.value(), 30.0));
/// ewma.push_at(1_000, 10.0)?; // same time: weighs like the other new one
/// assert!(near(ewma.value(), 22.0));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type TimeEwma = Smoothed<HalfLife>;

impl TimeEwma {
    /// A time-weighted EWMA whose weights halve every `half_life_ms` (`1..=2^52`).
    pub fn new(half_life_ms: i64) -> Result<Self, Error> {
        Ok(Self::with(HalfLife::new(half_life_ms)?))
    }
}
