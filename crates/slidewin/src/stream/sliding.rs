//! The window machinery, written once: which samples enter and leave a count or time window.
//! What is computed from them is an [`Accumulator`], so every sliding aggregate is a
//! `Sliding<SomeAccumulator>`.

use alloc::collections::VecDeque;

use super::aggregate::{advance, sample};
use super::{Aggregate, Window};
use crate::Error;

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
    /// call, as many samples left or changed as it holds (amortised O(1) per sample), or
    /// when [`wants_resum`](Accumulator::wants_resum) says so.
    fn resum(&mut self, samples: &VecDeque<f64>) {
        let _ = samples;
    }

    /// Whether the running state has lost too much precision to wait for the next resum.
    fn wants_resum(&self, len: usize) -> bool {
        let _ = len;
        false
    }

    /// The result over `len` samples (`len >= 1`) of `window`.
    fn value(&self, len: usize, window: Window) -> Option<f64>;
}

/// A sliding-window aggregate: the samples of a [`Window`] and an [`Accumulator`] over them.
///
/// Memory: the window's samples (and their times, for time windows), plus the accumulator.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Sliding<A> {
    #[cfg_attr(feature = "serde", serde(deserialize_with = "checked_window"))]
    window: Window,
    /// The samples in the window, oldest first.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "finite_samples"))]
    values: VecDeque<f64>,
    /// Their times, for time windows only (empty for count windows).
    times: VecDeque<i64>,
    latest_ms: Option<i64>,
    first_ms: Option<i64>,
    /// Samples that left or changed since the accumulator was last recomputed.
    churn: usize,
    acc: A,
}

impl<A: Accumulator> Sliding<A> {
    /// An empty aggregate over `window`; an error names `k` or `window_ms` when it is invalid.
    pub fn new(window: Window) -> Result<Self, Error> {
        let window = window.check()?;
        A::check(window)?;
        Ok(Self::empty(window))
    }

    fn empty(window: Window) -> Self {
        Self {
            window,
            values: VecDeque::new(),
            times: VecDeque::new(),
            latest_ms: None,
            first_ms: None,
            churn: 0,
            acc: A::default(),
        }
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// The samples in the window, oldest first.
    pub fn samples(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        self.values.iter().copied()
    }

    /// Drop the samples of a time window that are too old at `now_ms`.
    fn evict(&mut self, now_ms: i64) {
        let Window::Time(window_ms) = self.window else {
            return;
        };
        // Before the start of time nothing is too old.
        let Some(cutoff) = now_ms.checked_sub(window_ms) else {
            return;
        };
        while self.times.front().is_some_and(|&t| t <= cutoff) {
            self.times.pop_front();
            if let Some(x) = self.values.pop_front() {
                self.acc.leave(x);
                self.churn += 1;
            }
        }
        if self.values.is_empty() {
            // An empty window starts afresh, without any rounding residue.
            self.acc = A::default();
            self.churn = 0;
        }
    }

    fn resum_when_due(&mut self) {
        let len = self.values.len();
        if A::RESUMS && len > 0 && (self.churn >= len || self.acc.wants_resum(len)) {
            self.acc.resum(&self.values);
            self.churn = 0;
        }
    }
}

impl<A: Accumulator> Aggregate for Sliding<A> {
    fn push_at(&mut self, t_ms: i64, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        advance(&mut self.latest_ms, "t_ms", t_ms)?;
        self.first_ms.get_or_insert(t_ms);
        match self.window {
            Window::Count(k) if self.values.len() == k => {
                self.values.push_back(x);
                if let Some(leaving) = self.values.pop_front() {
                    self.acc.slide(x, leaving);
                    self.churn += 1;
                }
            }
            Window::Count(_) => {
                self.values.push_back(x);
                self.acc.enter(x);
            }
            Window::Time(_) => {
                self.evict(t_ms);
                self.times.push_back(t_ms);
                self.values.push_back(x);
                self.acc.enter(x);
            }
        }
        self.resum_when_due();
        Ok(())
    }

    fn replace_last(&mut self, x: f64) -> Result<(), Error> {
        let x = sample(x)?;
        let newest = self.values.back_mut().ok_or(Error::NoSample {
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

    fn value(&self) -> Option<f64> {
        match self.values.len() {
            0 => None,
            len => self.acc.value(len, self.window),
        }
    }

    fn len(&self) -> usize {
        self.values.len()
    }

    fn is_full(&self) -> bool {
        match self.window {
            Window::Count(k) => self.values.len() == k,
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
        *self = Self::empty(self.window);
    }
}

#[cfg(feature = "serde")]
fn checked_window<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Window, D::Error> {
    let window: Window = serde::Deserialize::deserialize(d)?;
    window.check().map_err(serde::de::Error::custom)
}

#[cfg(feature = "serde")]
fn finite_samples<'de, D: serde::Deserializer<'de>>(d: D) -> Result<VecDeque<f64>, D::Error> {
    let values: VecDeque<f64> = serde::Deserialize::deserialize(d)?;
    match values.iter().find(|x| !x.is_finite()) {
        Some(&x) => Err(serde::de::Error::custom(sample(x).unwrap_err())),
        None => Ok(values),
    }
}
