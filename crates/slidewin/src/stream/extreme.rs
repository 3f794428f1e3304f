//! Sliding maximum and minimum: a monotonic deque, amortised O(1) per sample.

use alloc::collections::VecDeque;

use super::{Accumulator, Sliding, Window};

/// The running maximum (`LARGEST = true`) or minimum of a window.
///
/// `candidates` holds the committed samples (all but the newest) that may still become the
/// extreme, from the oldest, in an order where none beats an earlier one. Each sample enters
/// and leaves it at most once. The newest sample stays out of it, so
/// [`replace_last`](super::Aggregate::replace_last) is O(1) whichever way it corrects.
/// A sample only evicts candidates it strictly beats, so equal values each keep their own
/// entry and the result is always the value of a sample in the window.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Extreme<const LARGEST: bool> {
    candidates: VecDeque<f64>,
    newest: Option<f64>,
}

impl<const LARGEST: bool> Extreme<LARGEST> {
    #[inline(always)]
    fn beats(a: f64, b: f64) -> bool {
        if LARGEST {
            a > b
        } else {
            a < b
        }
    }
}

impl<const LARGEST: bool> Accumulator for Extreme<LARGEST> {
    #[inline]
    fn enter(&mut self, x: f64) {
        if let Some(committed) = self.newest.replace(x) {
            while self
                .candidates
                .back()
                .is_some_and(|&c| Self::beats(committed, c))
            {
                self.candidates.pop_back();
            }
            self.candidates.push_back(committed);
        }
    }

    #[inline]
    fn leave(&mut self, x: f64) {
        // The oldest sample is the front candidate, or was evicted by a later one that beats it
        // (and then the front beats it too, so it cannot compare equal).
        if self.candidates.front() == Some(&x) {
            self.candidates.pop_front();
        }
    }

    fn replace_newest(&mut self, _old: f64, new: f64) {
        self.newest = Some(new);
    }

    #[inline]
    fn value(&self, _len: usize, _window: Window) -> Option<f64> {
        match (self.candidates.front(), self.newest) {
            (Some(&c), Some(n)) if Self::beats(c, n) => Some(c),
            (_, Some(n)) => Some(n),
            (c, None) => c.copied(),
        }
    }
}

/// The largest sample in the window.
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingMax, Window};
/// let mut max = SlidingMax::new(Window::Count(3))?;
/// let mut out = Vec::new();
/// for x in [1.0, 3.0, -1.0, -3.0, 5.0, 3.0, 6.0, 7.0] {
///     max.push(x)?;
///     out.push(max.value());
/// }
/// assert_eq!(out[2..], [Some(3.0), Some(3.0), Some(5.0), Some(5.0), Some(6.0), Some(7.0)]);
/// max.replace_last(0.0)?; // the newest sample was corrected: the window is [3, 6, 0]
/// assert_eq!(max.value(), Some(6.0));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingMax = Sliding<Extreme<true>>;

/// The smallest sample in the window.
///
/// ```
/// use slidewin::stream::{Aggregate, SlidingMin, Window};
/// let mut min = SlidingMin::new(Window::Time(1_000))?;
/// min.push_at(0, 4.0)?;
/// min.push_at(500, 9.0)?;
/// assert_eq!(min.value(), Some(4.0));
/// assert_eq!(min.value_at(1_000)?, Some(9.0)); // the sample of t = 0 is 1 s old: gone
/// assert_eq!(min.value_at(1_500)?, None);
/// # Ok::<(), slidewin::Error>(())
/// ```
pub type SlidingMin = Sliding<Extreme<false>>;
