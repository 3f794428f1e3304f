//! Where a window keeps its samples: a count window in a ring of `k` slots, a time window in
//! deques of samples and times.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use super::Window;

/// The samples of a window, oldest first, and the window itself.
#[derive(Debug, Clone)]
pub(super) enum Samples {
    /// The last `k` samples. `slots` fills up to `k`; from then on each new sample takes the
    /// slot of the oldest, which is `slots[oldest]` (one store and one index step per sample,
    /// no growth check, no modulo).
    Count {
        k: usize,
        slots: Vec<f64>,
        oldest: usize,
    },
    /// The samples of the last `window_ms` and their times, oldest first.
    Time {
        window_ms: i64,
        values: VecDeque<f64>,
        times: VecDeque<i64>,
    },
}

/// Equal when they hold the same samples (and times) in the same order, wherever a ring starts.
impl PartialEq for Samples {
    fn eq(&self, other: &Self) -> bool {
        self.window() == other.window()
            && self.iter().eq(other.iter())
            && self.times().eq(other.times())
    }
}

impl Samples {
    /// No sample yet, for a checked `window`.
    pub(super) fn empty(window: Window) -> Self {
        match window {
            Window::Count(k) => Samples::Count {
                k,
                slots: Vec::new(),
                oldest: 0,
            },
            Window::Time(window_ms) => Samples::Time {
                window_ms,
                values: VecDeque::new(),
                times: VecDeque::new(),
            },
        }
    }

    /// `values` (oldest first) taken at `times`, or `None` when a count window gets more than `k`.
    #[cfg(feature = "serde")]
    pub(super) fn of(window: Window, values: VecDeque<f64>, times: VecDeque<i64>) -> Option<Self> {
        match window {
            Window::Count(k) if values.len() <= k => Some(Samples::Count {
                k,
                slots: values.into(),
                oldest: 0,
            }),
            Window::Count(_) => None,
            Window::Time(window_ms) => Some(Samples::Time {
                window_ms,
                values,
                times,
            }),
        }
    }

    pub(super) fn window(&self) -> Window {
        match *self {
            Samples::Count { k, .. } => Window::Count(k),
            Samples::Time { window_ms, .. } => Window::Time(window_ms),
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        match self {
            Samples::Count { slots, .. } => slots.len(),
            Samples::Time { values, .. } => values.len(),
        }
    }

    /// The samples, oldest first, in two parts.
    pub(super) fn as_slices(&self) -> (&[f64], &[f64]) {
        match self {
            Samples::Count { slots, oldest, .. } => {
                let (newer, older) = slots.split_at(*oldest);
                (older, newer)
            }
            Samples::Time { values, .. } => values.as_slices(),
        }
    }

    /// The samples, oldest first.
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = f64> + '_ {
        let (older, newer) = self.as_slices();
        (0..self.len()).map(move |i| {
            let sample = older.get(i).or_else(|| newer.get(i - older.len()));
            sample.copied().unwrap_or_default()
        })
    }

    /// Their times, oldest first (none for a count window).
    pub(super) fn times(&self) -> impl Iterator<Item = i64> + '_ {
        let times = match self {
            Samples::Count { .. } => None,
            Samples::Time { times, .. } => Some(times.iter().copied()),
        };
        times.into_iter().flatten()
    }

    /// Add `x`, taken at `t_ms`; the sample that left, when a full count window slid.
    /// Always inlined (a full count window's step, once per sample), the rest out of line.
    #[inline(always)]
    pub(super) fn push(&mut self, t_ms: i64, x: f64) -> Option<f64> {
        match self {
            Samples::Count { k, slots, oldest } if slots.len() == *k => {
                let leaving = core::mem::replace(slots.get_mut(*oldest)?, x);
                *oldest += 1;
                if *oldest == slots.len() {
                    *oldest = 0;
                }
                Some(leaving)
            }
            _ => {
                self.grow(t_ms, x);
                None
            }
        }
    }

    /// Add `x` to a count window that is not full yet, or to a time window.
    #[inline(never)]
    fn grow(&mut self, t_ms: i64, x: f64) {
        match self {
            Samples::Count { slots, .. } => slots.push(x),
            Samples::Time { values, times, .. } => {
                values.push_back(x);
                times.push_back(t_ms);
            }
        }
    }

    /// The oldest sample of a time window when it is too old at `now_ms`, removed.
    pub(super) fn pop_expired(&mut self, now_ms: i64) -> Option<f64> {
        let Samples::Time {
            window_ms,
            values,
            times,
        } = self
        else {
            return None;
        };
        // Before the start of time nothing is too old.
        let cutoff = now_ms.checked_sub(*window_ms)?;
        if *times.front()? > cutoff {
            return None;
        }
        times.pop_front();
        values.pop_front()
    }

    pub(super) fn newest_mut(&mut self) -> Option<&mut f64> {
        match self {
            Samples::Count { slots, oldest, .. } => match oldest.checked_sub(1) {
                Some(newest) => slots.get_mut(newest),
                None => slots.last_mut(),
            },
            Samples::Time { values, .. } => values.back_mut(),
        }
    }
}
