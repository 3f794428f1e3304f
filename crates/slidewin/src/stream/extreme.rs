//! Sliding maximum and minimum: a two-stack queue, amortised O(1) per sample, branch-free on
//! random data.

use alloc::vec::Vec;

use super::{Accumulator, Sliding, Window};

/// The running maximum (`LARGEST = true`) or minimum of a window.
///
/// The samples before the newest form a queue kept as two stacks: `back` holds the later ones
/// as they came, with their extreme in `back_best`; `front[oldest..]` holds, for each earlier
/// one, the extreme from it to the end of the front part (its suffix extreme). A sample leaving
/// moves `oldest` on; when the front part is used up, `back` becomes it, its values replaced
/// by their suffix extremes in place (each sample is turned over once: amortised O(1)). Unlike
/// a monotonic deque, no data-dependent loop runs per sample, so random data costs no branch
/// mispredictions (half the time per sample in `benches/stream.rs`).
///
/// The newest sample stays outside the stacks, so
/// [`replace_last`](super::Aggregate::replace_last) is O(1) whichever way it corrects. Every
/// step selects one of two values, so the result is always the value of a sample in the
/// window. Memory: one entry per sample in the window.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Extreme<const LARGEST: bool> {
    front: Vec<f64>,
    oldest: usize,
    back: Vec<f64>,
    back_best: f64,
    newest: Option<f64>,
}

impl<const LARGEST: bool> Extreme<LARGEST> {
    /// What no finite sample beats (finite itself, so the state serialises to JSON).
    const NOTHING: f64 = if LARGEST { f64::MIN } else { f64::MAX };

    #[inline(always)]
    fn best(a: f64, b: f64) -> f64 {
        match LARGEST {
            true if a > b => a,
            false if a < b => a,
            _ => b,
        }
    }
}

impl<const LARGEST: bool> Default for Extreme<LARGEST> {
    fn default() -> Self {
        Self {
            front: Vec::new(),
            oldest: 0,
            back: Vec::new(),
            back_best: Self::NOTHING,
            newest: None,
        }
    }
}

impl<const LARGEST: bool> Accumulator for Extreme<LARGEST> {
    #[inline]
    fn enter(&mut self, x: f64) {
        if let Some(committed) = self.newest.replace(x) {
            self.back.push(committed);
            self.back_best = Self::best(self.back_best, committed);
        }
    }

    #[inline]
    fn leave(&mut self, _x: f64) {
        if self.oldest == self.front.len() {
            let mut best = Self::NOTHING;
            for x in self.back.iter_mut().rev() {
                best = Self::best(*x, best);
                *x = best;
            }
            core::mem::swap(&mut self.front, &mut self.back);
            self.back.clear();
            self.back_best = Self::NOTHING;
            self.oldest = 0;
        }
        // Past the end only when the newest sample itself leaves; the window then starts afresh.
        self.oldest += 1;
    }

    fn replace_newest(&mut self, _old: f64, new: f64) {
        self.newest = Some(new);
    }

    #[inline]
    fn value(&self, _len: usize, _window: Window) -> Option<f64> {
        let front_best = self
            .front
            .get(self.oldest)
            .copied()
            .unwrap_or(Self::NOTHING);
        let committed = Self::best(front_best, self.back_best);
        self.newest.map(|newest| Self::best(committed, newest))
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
