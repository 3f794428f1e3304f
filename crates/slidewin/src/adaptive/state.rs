//! The controller's parts that remember, and its whole state as words (so the process elected
//! for an interval reads what the previous one wrote).

use super::{Adaptive, AdaptiveConfig, Reason, BASE_WINDOW, STALE_AFTER};

/// The lowest of the last [`BASE_WINDOW`] values pushed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct MinWindow {
    values: [f64; BASE_WINDOW],
    len: usize,
    next: usize,
}

impl Default for MinWindow {
    fn default() -> Self {
        Self {
            values: [0.0; BASE_WINDOW],
            len: 0,
            next: 0,
        }
    }
}

impl MinWindow {
    pub(super) fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.values[self.next] = v;
        self.next = (self.next + 1) % BASE_WINDOW;
        self.len = (self.len + 1).min(BASE_WINDOW);
    }

    pub(super) fn min(&self) -> Option<f64> {
        self.values[..self.len].iter().copied().reduce(f64::min)
    }

    /// Forgets every value but `v`.
    pub(super) fn reset(&mut self, v: f64) {
        *self = Self::default();
        self.push(v);
    }
}

/// Intervals in a row in which the limit was lowered for a signal, and the signal's value
/// when the run began (restarted whenever the signal fell by 10%: lowering helped).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Streak {
    count: u32,
    start: f64,
}

impl Streak {
    /// Whether lowering for this signal has not helped for [`STALE_AFTER`] intervals (then the
    /// run starts over).
    pub(super) fn lowered_in_vain(&mut self, lowered: bool, value: f64) -> bool {
        if !lowered {
            self.count = 0;
            return false;
        }
        if self.count == 0 || value < self.start * 0.9 {
            *self = Self {
                count: 1,
                start: value,
            };
            return false;
        }
        self.count += 1;
        if self.count >= STALE_AFTER {
            self.count = 0;
            return true;
        }
        false
    }
}

/// Words of [`Adaptive::to_words`]: the limit, the two windows (values, len, next), the
/// counters and the loss held at, the two streaks and the reason.
pub const STATE_WORDS: usize = 1 + 2 * (BASE_WINDOW + 2) + 4 + 2 * 2 + 1;

impl Adaptive {
    /// The state as words (floats as their bits).
    pub fn to_words(&self) -> [u64; STATE_WORDS] {
        let mut out = [0; STATE_WORDS];
        let mut put = out.iter_mut();
        let mut word = |v: u64| *put.next().expect("STATE_WORDS fits the state") = v;
        word(self.limit.to_bits());
        for w in [&self.base, &self.loss_base] {
            w.values.iter().for_each(|v| word(v.to_bits()));
            word(w.len as u64);
            word(w.next as u64);
        }
        word(self.queued_for.into());
        word(self.held_for.into());
        word(self.held_loss.to_bits());
        word(self.target_off_for.into());
        for s in [self.latency_stale, self.loss_stale] {
            word(s.count.into());
            word(s.start.to_bits());
        }
        word(self.reason as u64);
        out
    }

    /// A controller for `config` in the state `words` hold (from [`Adaptive::to_words`]);
    /// values no controller writes (torn or zeroed words) are brought back into range, and
    /// all-zero words are a fresh controller. An error only for a config [`Adaptive::new`]
    /// refuses.
    pub fn from_words(
        config: AdaptiveConfig,
        words: &[u64; STATE_WORDS],
    ) -> Result<Self, crate::Error> {
        let fresh = Self::new(config)?;
        if words.iter().all(|&w| w == 0) {
            return Ok(fresh);
        }
        let mut at = words.iter().copied();
        let mut word = || at.next().unwrap_or(0);
        let finite = |w: u64| {
            Some(f64::from_bits(w))
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
        };
        let count = |w: u64| u32::try_from(w).unwrap_or(u32::MAX);
        let c = fresh.config;
        let limit = finite(word()).clamp(c.min_limit as f64, c.max_limit as f64);
        let mut windows = [MinWindow::default(), MinWindow::default()];
        for w in &mut windows {
            w.values.iter_mut().for_each(|v| *v = finite(word()));
            w.len = (word() as usize).min(BASE_WINDOW);
            w.next = word() as usize % BASE_WINDOW;
        }
        let [base, loss_base] = windows;
        let queued_for = count(word());
        let held_for = count(word());
        let held_loss = finite(word());
        let target_off_for = count(word());
        let mut streaks = [Streak::default(); 2];
        for s in &mut streaks {
            s.count = count(word());
            s.start = finite(word());
        }
        let [latency_stale, loss_stale] = streaks;
        let reason = match word() {
            1 => Reason::Loss,
            2 => Reason::Latency,
            3 => Reason::Grow,
            4 => Reason::Probe,
            _ => Reason::Hold,
        };
        Ok(Self {
            config: c,
            limit,
            base,
            loss_base,
            queued_for,
            held_for,
            held_loss,
            latency_stale,
            loss_stale,
            target_off_for,
            reason,
        })
    }
}
