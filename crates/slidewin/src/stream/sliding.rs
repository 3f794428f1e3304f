//! The window machinery, written once: which samples enter and leave a count or time window.
//! What is computed from them is an [`Accumulator`], so every sliding aggregate is a
//! `Sliding<SomeAccumulator>`.

use super::aggregate::{advance, sample};
use super::samples::Samples;
use super::{Aggregate, Window};
use crate::Error;

#[cfg(feature = "serde")]
mod stored;

/// What a sliding aggregate computes, told about every sample that enters or leaves.
///
/// Implemented by the accumulators of this module; implement it to add an aggregate that
/// gets both window kinds, `replace_last`, serde and the checks for free.
pub trait Accumulator: Clone + Default {
    /// Whether [`resum`](Accumulator::resum) must run from time to time (compensated sums).
    const RESUMS: bool = false;

    /// Reject windows the aggregate cannot use (a rate needs a time window).
    fn check(window: Window) -> Result<(), Error> {
        let _ = window;
        Ok(())
    }

    /// `x` became the newest sample.
    fn enter(&mut self, x: f64);

    /// `x`, the oldest sample, left (the window still holds at least one sample).
    fn leave(&mut self, x: f64);

    /// `entering` entered and then `leaving` left: a full count window sliding by one.
    #[inline]
    fn slide(&mut self, entering: f64, leaving: f64) {
        self.enter(entering);
        self.leave(leaving);
    }

    /// The newest sample changed from `old` to `new`.
    fn replace_newest(&mut self, old: f64, new: f64);

    /// Recompute from the samples in the window. The window calls it when, since the last
    /// call, twice as many samples left or changed as it holds (amortised O(1) per sample), or
    /// when [`wants_resum`](Accumulator::wants_resum) says so. `samples` is the window, oldest
    /// first, in two parts.
    fn resum(&mut self, samples: (&[f64], &[f64])) {
        let _ = samples;
    }

    /// Whether the running state has lost too much precision to wait for the next resum.
    fn wants_resum(&self, len: usize) -> bool {
        let _ = len;
        false
    }

    /// Forget every sample, keeping the configuration (a quantile's `q`).
    fn reset(&mut self) {
        *self = Self::default();
    }

    /// The result over `len` samples (`len >= 1`) of `window`.
    fn value(&self, len: usize, window: Window) -> Option<f64>;
}

/// A sliding-window aggregate: the samples of a [`Window`] and an [`Accumulator`] over them.
///
/// Memory: the window's samples (and their times, for time windows), plus the accumulator.
#[derive(Debug, Clone, PartialEq)]
pub struct Sliding<A> {
    samples: Samples,
    latest_ms: Option<i64>,
    first_ms: Option<i64>,
    /// Samples that left or changed since the accumulator was last recomputed.
    churn: usize,
    acc: A,
}

impl<A: Accumulator> Sliding<A> {
    /// An empty aggregate over `window`; an error names `k` or `window_ms` when it is invalid.
    pub fn new(window: Window) -> Result<Self, Error> {
        Self::with(window, A::default())
    }

    /// An empty aggregate over `window` computing with `acc`, a configured accumulator
    /// that has seen no sample (as [`SlidingQuantile::with_q`](super::SlidingQuantile::with_q) does).
    pub fn with(window: Window, mut acc: A) -> Result<Self, Error> {
        let window = window.check()?;
        A::check(window)?;
        acc.reset();
        Ok(Self {
            acc,
            ..Self::empty(window)
        })
    }

    fn empty(window: Window) -> Self {
        Self {
            samples: Samples::empty(window),
            latest_ms: None,
            first_ms: None,
            churn: 0,
            acc: A::default(),
        }
    }

    /// The accumulator (for readings beyond [`value`](Aggregate::value), such as a band).
    pub fn accumulator(&self) -> &A {
        &self.acc
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.samples.window()
    }

    /// The samples in the window, oldest first.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.samples.iter()
    }

    /// Drop the samples of a time window that are too old at `now_ms`.
    fn evict(&mut self, now_ms: i64) {
        let mut evicted = false;
        while let Some(x) = self.samples.pop_expired(now_ms) {
            self.acc.leave(x);
            self.churn += 1;
            evicted = true;
        }
        if evicted && self.samples.len() == 0 {
            // An empty window starts afresh, without any rounding residue.
            self.acc.reset();
            self.churn = 0;
        }
    }

    /// Add the checked sample `x`, taken at `t_ms` (evictions done). Always inlined with what
    /// it calls on a full count window's path: in wasm, a call per sample cost more than the
    /// work (cb3fad6's checks for huge samples had pushed these out of line).
    #[inline(always)]
    fn insert(&mut self, t_ms: i64, x: f64) {
        match self.samples.push(t_ms, x) {
            Some(leaving) => {
                self.acc.slide(x, leaving);
                self.churn += 1;
            }
            None => self.acc.enter(x),
        }
        self.resum_when_due();
    }

    #[inline(always)]
    fn resum_when_due(&mut self) {
        let len = self.samples.len();
        // After 2 len changes: the carry's own roundings stay far below an ulp of the sum
        // (tests/stream_drift.rs), at half the cost of recomputing after each len.
        if A::RESUMS && len > 0 && (self.churn >= 2 * len || self.acc.wants_resum(len)) {
            self.resum();
        }
    }

    #[cold]
    #[inline(never)]
    fn resum(&mut self) {
        self.acc.resum(self.samples.as_slices());
        self.churn = 0;
    }
}

impl<A: Accumulator> Aggregate for Sliding<A> {
    #[inline]
    fn push_at(&mut self, t_ms: i64, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        advance(&mut self.latest_ms, "t_ms", t_ms)?;
        self.first_ms.get_or_insert(t_ms);
        self.evict(t_ms);
        self.insert(t_ms, x);
        Ok(())
    }

    fn push(&mut self, x: f64) -> Result<(), Error> {
        match (self.latest_ms, self.first_ms) {
            // Time does not pass: nothing to check, and what was too old is already gone.
            (Some(t_ms), Some(_)) => {
                let x = sample(x)?;
                self.insert(t_ms, x);
                Ok(())
            }
            (latest_ms, _) => self.push_at(latest_ms.unwrap_or(i64::MIN), x),
        }
    }

    fn replace_last(&mut self, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        let newest = self.samples.newest_mut().ok_or(Error::NoSample {
            name: "replace_last",
        })?;
        let old = core::mem::replace(newest, x);
        self.acc.replace_newest(old, x);
        self.churn += 1;
        self.resum_when_due();
        Ok(())
    }

    fn advance_to(&mut self, now_ms: i64) -> Result<(), Error> {
        advance(&mut self.latest_ms, "now_ms", now_ms)?;
        self.evict(now_ms);
        self.resum_when_due();
        Ok(())
    }

    #[inline]
    fn value(&self) -> Option<f64> {
        match self.samples.len() {
            0 => None,
            len => self.acc.value(len, self.window()),
        }
    }

    fn len(&self) -> usize {
        self.samples.len()
    }

    fn is_full(&self) -> bool {
        match self.window() {
            Window::Count(k) => self.samples.len() == k,
            Window::Time(window_ms) => match (self.first_ms, self.latest_ms) {
                (Some(first), Some(latest)) => latest.saturating_sub(first) >= window_ms,
                _ => false,
            },
        }
    }

    fn latest_ms(&self) -> Option<i64> {
        self.latest_ms
    }

    fn clear(&mut self) {
        let mut acc = core::mem::take(&mut self.acc);
        acc.reset();
        *self = Self {
            acc,
            ..Self::empty(self.window())
        };
    }
}
