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

/// The no-load latency (median and mean, ms): a mean of measurements weighted by their answer
/// counts, the older ones at three quarters of their weight at each new one, so a lucky
/// measure moves it by its share only.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Baseline {
    p50: f64,
    mean: f64,
    weight: f64,
    /// Whether a probe measured it (else it is provisional, or empty with no weight).
    measured: bool,
}

impl Baseline {
    pub(super) fn p50(&self) -> Option<f64> {
        (self.weight > 0.0).then_some(self.p50)
    }

    pub(super) fn mean(&self) -> Option<f64> {
        (self.weight > 0.0).then_some(self.mean)
    }

    pub(super) fn measured_mean(&self) -> Option<f64> {
        self.mean().filter(|_| self.measured)
    }

    pub(super) fn is_measured(&self) -> bool {
        self.measured
    }

    /// A probe's measure, under the knee: `n` answers of this median and mean. One that
    /// differs from the baseline by more than a quarter replaces it: the upstream changed.
    pub(super) fn measure(&mut self, p50: f64, mean: f64, n: u64) {
        if !self.measured || (mean - self.mean).abs() > self.mean * 0.25 {
            *self = Self {
                measured: true,
                ..Self::default()
            };
        }
        self.add(p50, mean, n);
    }

    /// An interval the limit did not touch: counted until the first probe measures.
    pub(super) fn provisional(&mut self, p50: f64, mean: f64, n: u64) {
        if !self.measured {
            self.add(p50, mean, n);
        }
    }

    fn add(&mut self, p50: f64, mean: f64, n: u64) {
        if !(p50.is_finite() && mean.is_finite() && p50 > 0.0 && mean > 0.0) {
            return;
        }
        self.weight = self.weight * 0.75 + n as f64;
        let share = n as f64 / self.weight;
        self.p50 += (p50 - self.p50) * share;
        self.mean += (mean - self.mean) * share;
    }
}

/// Sums over a probe's measuring intervals: median x answers, mean x answers, answers, and
/// goodput (requests/s) x intervals.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Measuring {
    p50_sum: f64,
    mean_sum: f64,
    answers: f64,
    goodput_sum: f64,
    intervals: f64,
}

impl Measuring {
    pub(super) fn add(&mut self, s: &super::Sample, goodput: f64) {
        self.goodput_sum += goodput;
        self.intervals += 1.0;
        if s.ok >= super::MIN_SAMPLES {
            let n = s.ok as f64;
            self.p50_sum += s.p50_ms * n;
            self.mean_sum += s.mean_ms * n;
            self.answers += n;
        }
    }

    pub(super) fn answers(&self) -> u64 {
        self.answers as u64
    }

    pub(super) fn intervals(&self) -> u64 {
        self.intervals as u64
    }

    pub(super) fn goodput(&self) -> f64 {
        self.goodput_sum / self.intervals.max(1.0)
    }

    /// The median and mean latency weighted by answers, and the answers.
    pub(super) fn latency(&self) -> Option<(f64, f64, u64)> {
        let n = self.answers;
        (n > 0.0).then(|| (self.p50_sum / n, self.mean_sum / n, n as u64))
    }
}

/// Where a probe is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Phase {
    /// No probe: the limit follows the signals.
    Steer,
    /// Lowered, halving while goodput shows the upstream still saturated.
    Drain,
    /// Under the knee: measuring the no-load time.
    Measure,
}

/// Words of [`Adaptive::to_words`]: the limit, the baseline (4), the saturated goodput, the
/// phase, where the drain stepped from (2), the measuring sums (5), the pinned, crowded and
/// faster counts, where the cuts began (3), the loss window (values, len, next), the hold (2),
/// the two streaks (2 each), the target's pause and the reason.
pub const STATE_WORDS: usize =
    1 + 4 + 1 + 1 + 2 + 5 + 3 + 3 + (BASE_WINDOW + 2) + 2 + 2 * 2 + 1 + 1;

impl Adaptive {
    /// The state as words (floats as their bits).
    pub fn to_words(&self) -> [u64; STATE_WORDS] {
        let mut out = [0; STATE_WORDS];
        let mut put = out.iter_mut();
        let mut word = |v: u64| *put.next().expect("STATE_WORDS fits the state") = v;
        word(self.limit.to_bits());
        let b = self.base;
        [b.p50, b.mean, b.weight]
            .iter()
            .for_each(|v| word(v.to_bits()));
        word(b.measured.into());
        word(self.saturated_rps.to_bits());
        word(match self.phase {
            Phase::Steer => 0,
            Phase::Drain => 1,
            Phase::Measure => 2,
        });
        word(self.drained_from.0.to_bits());
        word(self.drained_from.1.to_bits());
        let m = self.measuring;
        [m.p50_sum, m.mean_sum, m.answers, m.goodput_sum, m.intervals]
            .iter()
            .for_each(|v| word(v.to_bits()));
        word(self.pinned_for.into());
        word(self.crowded_for.into());
        word(self.faster_for.into());
        word(self.cuts_from.0.to_bits());
        word(self.cuts_from.1.to_bits());
        word(self.cuts_from.2.into());
        let w = &self.loss_base;
        w.values.iter().for_each(|v| word(v.to_bits()));
        word(w.len as u64);
        word(w.next as u64);
        word(self.held_for.into());
        word(self.held_loss.to_bits());
        for s in [self.target_stale, self.loss_stale] {
            word(s.count.into());
            word(s.start.to_bits());
        }
        word(self.target_off_for.into());
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
                .filter(|v| v.is_finite() && *v >= 0.0)
                .unwrap_or(0.0)
        };
        let count = |w: u64| u32::try_from(w).unwrap_or(u32::MAX);
        let c = fresh.config;
        let limit = finite(word()).clamp(c.min_limit as f64, c.max_limit as f64);
        let (p50, mean, weight) = (finite(word()), finite(word()), finite(word()));
        let base = Baseline {
            p50,
            mean,
            weight,
            measured: word() == 1,
        };
        let saturated_rps = finite(word());
        let phase = match word() {
            1 => Phase::Drain,
            2 => Phase::Measure,
            _ => Phase::Steer,
        };
        let drained_from = (finite(word()), finite(word()));
        let measuring = Measuring {
            p50_sum: finite(word()),
            mean_sum: finite(word()),
            answers: finite(word()),
            goodput_sum: finite(word()),
            intervals: finite(word()),
        };
        let pinned_for = count(word());
        let crowded_for = count(word());
        let faster_for = count(word());
        let cuts_from = (finite(word()), finite(word()), count(word()));
        let mut loss_base = MinWindow::default();
        loss_base
            .values
            .iter_mut()
            .for_each(|v| *v = finite(word()));
        loss_base.len = (word() as usize).min(BASE_WINDOW);
        loss_base.next = word() as usize % BASE_WINDOW;
        let held_for = count(word());
        let held_loss = finite(word());
        let mut streaks = [Streak::default(); 2];
        for s in &mut streaks {
            s.count = count(word());
            s.start = finite(word());
        }
        let [target_stale, loss_stale] = streaks;
        let target_off_for = count(word());
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
            saturated_rps,
            phase,
            drained_from,
            measuring,
            pinned_for,
            crowded_for,
            faster_for,
            cuts_from,
            loss_base,
            held_for,
            held_loss,
            target_stale,
            loss_stale,
            target_off_for,
            reason,
        })
    }
}
