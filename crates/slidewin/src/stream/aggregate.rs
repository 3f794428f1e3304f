//! The one trait every stream aggregate implements, and the input checks they share.

use crate::{Error, Value};

/// A streaming aggregate: samples go in with [`push_at`](Aggregate::push_at), the current
/// result comes out of [`value`](Aggregate::value).
///
/// Times are integer milliseconds from one clock and never go backwards: a `t_ms` or `now_ms`
/// earlier than [`latest_ms`](Aggregate::latest_ms) is [`Error::OutOfOrder`]. Equal times are
/// fine. Samples must be finite: NaN or ±∞ is [`Error::InvalidArgument`] naming `x`, and the
/// aggregate is left as it was (a bad sample never poisons the window).
///
/// The trait is object safe, so a binding can hold any aggregate as `Box<dyn Aggregate>`.
pub trait Aggregate {
    /// Add sample `x` taken at `t_ms`.
    fn push_at(&mut self, t_ms: i64, x: f64) -> Result<(), Error>;

    /// Add sample `x` at the latest time seen: time does not pass. Meant for count windows
    /// and [`Ewma`](crate::stream::Ewma), where only the order matters. Before any timed call
    /// the sample has the earliest time, so a time window drops it at the first timed call.
    fn push(&mut self, x: f64) -> Result<(), Error> {
        self.push_at(self.latest_ms().unwrap_or(i64::MIN), x)
    }

    /// Correct the newest sample to `x` in place (a live candle, a still-open time bucket),
    /// in O(1). [`Error::NoSample`] when there is none.
    fn replace_last(&mut self, x: f64) -> Result<(), Error>;

    /// Let time pass to `now_ms` without a sample: a time window drops what got too old.
    fn advance_to(&mut self, now_ms: i64) -> Result<(), Error>;

    /// The aggregate of the samples in the window, as of [`latest_ms`](Aggregate::latest_ms);
    /// over a partial window, the aggregate of what is there; `None` when it cannot be
    /// defined (no sample; one sample for a sample variance).
    fn value(&self) -> Option<f64>;

    /// The band around the value, for aggregates that have one ([`Bollinger`](crate::stream::Bollinger));
    /// `None` for the others and while the value is `None`.
    fn bands(&self) -> Option<Bands> {
        None
    }

    /// [`advance_to`](Aggregate::advance_to) `now_ms`, then [`value`](Aggregate::value).
    fn value_at(&mut self, now_ms: i64) -> Result<Option<f64>, Error> {
        self.advance_to(now_ms)?;
        Ok(self.value())
    }

    /// How many samples the window holds (for EWMAs: how many were folded in).
    fn len(&self) -> usize;

    /// Whether the window holds no sample.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the window is complete: `k` samples in a count window; in a time window, at
    /// least `window_ms` watched since the first sample (nothing of it predates the stream).
    /// EWMAs are full from their first sample on.
    fn is_full(&self) -> bool;

    /// The latest time seen (by `push_at` or `advance_to`), `None` before any.
    fn latest_ms(&self) -> Option<i64>;

    /// Forget every sample and time, keeping the configuration.
    fn clear(&mut self);
}

/// A band: a middle line with a lower and an upper bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bands {
    /// The lower bound.
    pub lower: f64,
    /// The middle line (the aggregate's value).
    pub middle: f64,
    /// The upper bound.
    pub upper: f64,
}

/// `x` when it is a usable sample (finite), else an error naming `x`.
pub(crate) fn sample(x: f64) -> Result<f64, Error> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(Error::invalid("x", "a finite number", Value::Float(x)))
    }
}

/// Move `latest` to `t_ms` unless that would go back in time.
pub(crate) fn advance(
    latest: &mut Option<i64>,
    name: &'static str,
    t_ms: i64,
) -> Result<(), Error> {
    match *latest {
        Some(newest_ms) if t_ms < newest_ms => Err(Error::OutOfOrder {
            name,
            newest_ms,
            got_ms: t_ms,
        }),
        _ => {
            *latest = Some(t_ms);
            Ok(())
        }
    }
}
