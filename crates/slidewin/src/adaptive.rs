//! A concurrency limit that follows the upstream's load: every interval the caller gives what
//! the interval's requests showed ([`Sample`]) and gets the next limit.
//!
//! The model is the one a FIFO upstream obeys (Little's law): below its knee `K` (the requests
//! it serves at once) latency stays at the no-load time `base` and goodput grows with the
//! limit; above it goodput stays at `K / base` and the surplus waits in its queue. So
//! `K ~ goodput x base`, measured at any load. Each interval, in this order:
//!
//! 1. **Loss** (502, 504, timeouts, client gave up) or **backpressure** (upstream 503/429)
//!    above their own baseline by more than [`LOSS_TOLERANCE`]: the limit goes to the knee
//!    (10 to 50% down) and does not grow for [`BASE_WINDOW`] intervals while that keeps the
//!    loss away (an upstream that fails fast shows no queue before it fails). Latency alone misses an upstream that
//!    fails fast or times out at a steady rate.
//! 2. **Latency inflated** (p50 above `base x (1 + TOLERANCE)`, or p95 above the optional
//!    target): the limit goes to the knee `goodput x base` (5 to 50% down at once).
//! 3. **Bound and no queue** (requests were refused or in flight reached the limit, p50
//!    within `HEADROOM / 4` of base): the limit grows by [`GROWTH`], so a doubled capacity is
//!    found in a few intervals.
//! 4. **Bound with a standing queue** for [`PROBE_EVERY`] intervals: one interval at
//!    `knee x (1 - HEADROOM / 2)`, so the queue drains and `base` is measured again.
//! 5. Otherwise the limit holds: an unbound limit never climbs.
//!
//! How the anchors' failure modes are kept away:
//! - **No baseline creep.** `base` is the lowest p50 of the last [`BASE_WINDOW`] intervals
//!   (never an average that follows the load), and step 4 makes a queue-free interval at least
//!   every few intervals while the limit is bound, so the window always holds a true no-load
//!   time; the limit is derived from it, not grown from itself.
//! - **Cheap probes.** A probe lowers the limit to just under the knee, where the upstream is
//!   still fully busy: it costs a few refusals, not goodput (not a drop to a floor).
//! - **Never stuck at the floor.** When lowering does not help (three lowered intervals in a
//!   row whose p50, or loss, fell by less than 10%), the latency or loss is not caused by
//!   the load: its baseline is reset to what is seen now, and the target is set aside for
//!   [`BASE_WINDOW`] intervals, so a slower upstream or a steady error rate does not pin the
//!   limit at `min_limit`.
//!
//! ```
//! use slidewin::adaptive::{Adaptive, AdaptiveConfig, Sample};
//! let mut a = Adaptive::new(AdaptiveConfig { initial_limit: 10, ..AdaptiveConfig::default() })?;
//! // 1 s, 250 answered at 40 ms, 30 refused at the limit: bound, no queue, so it grows.
//! let s = Sample { ok: 250, refused: 30, p50_ms: 40.0, p95_ms: 41.0, p99_ms: 42.0,
//!                  elapsed_ms: 1_000, ..Sample::default() };
//! assert_eq!(a.update(&s), 12);
//! # Ok::<(), slidewin::Error>(())
//! ```

mod histogram;
mod state;
mod upstream;

pub use histogram::{bucket_of, bucket_value, quantile, BUCKETS};
pub use state::STATE_WORDS;
pub use upstream::upstream_time_ms;

use crate::{Error, Value};
use state::{MinWindow, Streak};

/// Intervals whose lowest p50 (and loss ratio) is the baseline.
pub const BASE_WINDOW: usize = 30;
/// How far p50 may rise above the baseline before the limit drops to the knee.
pub const TOLERANCE: f64 = 0.25;
/// The queue the limit tolerates while bound, as a share of the knee.
pub const HEADROOM: f64 = 0.1;
/// Growth per interval while bound with no queue.
pub const GROWTH: f64 = 0.2;
/// Loss (or backpressure) ratio above its baseline that counts as overload.
pub const LOSS_TOLERANCE: f64 = 0.02;
/// Intervals bound with a standing queue before a probe under the knee.
pub const PROBE_EVERY: u32 = 5;
/// Fewer answered requests in an interval than this carry no signal: the limit holds.
pub const MIN_SAMPLES: u64 = 5;
/// Lowered intervals in a row that did not help before a baseline is reset.
const STALE_AFTER: u32 = 3;

/// The controller's bounds and pace.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AdaptiveConfig {
    /// The limit before the first update (within `min_limit..=max_limit`).
    pub initial_limit: u64,
    /// The lowest limit (at least 1).
    pub min_limit: u64,
    /// The highest limit.
    pub max_limit: u64,
    /// How often [`Adaptive::update`] runs (ms, at least 10): the caller's pace.
    pub interval_ms: i64,
    /// An optional p95 latency (ms) the limit is lowered to keep, on top of the no-load model.
    pub latency_target_ms: Option<f64>,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        Self {
            initial_limit: 10,
            min_limit: 1,
            max_limit: 10_000,
            interval_ms: 1_000,
            latency_target_ms: None,
        }
    }
}

impl AdaptiveConfig {
    /// The config, or an error naming the first field out of its domain.
    pub fn check(self) -> Result<Self, Error> {
        if self.min_limit < 1 {
            let got = Value::UInt(self.min_limit);
            return Err(Error::invalid("min_limit", "a positive integer", got));
        }
        if self.max_limit < self.min_limit {
            let got = Value::UInt(self.max_limit);
            return Err(Error::invalid("max_limit", "at least min_limit", got));
        }
        if !(self.min_limit..=self.max_limit).contains(&self.initial_limit) {
            let got = Value::UInt(self.initial_limit);
            let expected = "between min_limit and max_limit";
            return Err(Error::invalid("initial_limit", expected, got));
        }
        if !(10..=1 << 40).contains(&self.interval_ms) {
            let got = Value::Int(self.interval_ms);
            let expected = "an integer from 10 to 2^40";
            return Err(Error::invalid("interval_ms", expected, got));
        }
        if let Some(t) = self.latency_target_ms {
            if !(t.is_finite() && t > 0.0) {
                let expected = "a positive number";
                return Err(Error::invalid(
                    "latency_target_ms",
                    expected,
                    Value::Float(t),
                ));
            }
        }
        Ok(self)
    }
}

/// What one interval's requests showed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    /// Requests answered well (anything but loss and backpressure).
    pub ok: u64,
    /// Requests lost: 502, 504, upstream or client timeouts.
    pub loss: u64,
    /// Requests the upstream pushed back: 503, 429.
    pub backpressure: u64,
    /// Requests refused at the limit.
    pub refused: u64,
    /// The most requests in flight seen at an admission (with the admitted one).
    pub max_inflight: u64,
    /// Latency quantiles of the requests answered well (ms).
    pub p50_ms: f64,
    /// p95 of the same (ms).
    pub p95_ms: f64,
    /// p99 of the same (ms).
    pub p99_ms: f64,
    /// How long the interval was (ms).
    pub elapsed_ms: i64,
}

impl Sample {
    /// Requests answered well per second.
    pub fn goodput_rps(&self) -> f64 {
        if self.elapsed_ms <= 0 {
            return 0.0;
        }
        self.ok as f64 * 1e3 / self.elapsed_ms as f64
    }

    /// Loss and backpressure over every answered request (0 with none).
    pub fn loss_ratio(&self) -> f64 {
        let bad = self.loss + self.backpressure;
        match self.ok + bad {
            0 => 0.0,
            all => bad as f64 / all as f64,
        }
    }
}

/// Why the last update moved the limit (or did not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    /// Too few answered requests to tell; or unbound with no sign of overload.
    Hold = 0,
    /// Lowered for loss or backpressure above their baseline.
    Loss = 1,
    /// Lowered to the knee: latency above the baseline or the target.
    Latency = 2,
    /// Raised: bound with no queue.
    Grow = 3,
    /// An interval just under the knee, to measure the no-load latency again.
    Probe = 4,
}

/// The controller; its whole state is plain numbers ([`Adaptive::to_words`]), so it can live
/// in shared memory and be run by whichever process is elected for an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Adaptive {
    config: AdaptiveConfig,
    limit: f64,
    base: MinWindow,
    loss_base: MinWindow,
    queued_for: u32,
    held_for: u32,
    held_loss: f64,
    latency_stale: Streak,
    loss_stale: Streak,
    target_off_for: u32,
    reason: Reason,
}

impl Adaptive {
    /// A controller at `config.initial_limit`, or an error naming the config's bad field.
    pub fn new(config: AdaptiveConfig) -> Result<Self, Error> {
        let config = config.check()?;
        Ok(Self {
            limit: config.initial_limit as f64,
            config,
            base: MinWindow::default(),
            loss_base: MinWindow::default(),
            queued_for: 0,
            held_for: 0,
            held_loss: 0.0,
            latency_stale: Streak::default(),
            loss_stale: Streak::default(),
            target_off_for: 0,
            reason: Reason::Hold,
        })
    }

    /// The config it runs with.
    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// The limit now.
    pub fn limit(&self) -> u64 {
        libm::round(self.limit) as u64
    }

    /// The no-load latency (ms): the lowest p50 of the last [`BASE_WINDOW`] intervals.
    pub fn base_ms(&self) -> Option<f64> {
        self.base.min()
    }

    /// Why the last update did what it did.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// A rate (requests per `window_ms`) that admits about as many requests as the limit
    /// keeps in flight at the no-load latency (Little's law), for a rule's live limit.
    pub fn rate_limit(&self, window_ms: i64) -> Option<u64> {
        let base = self.base.min()?;
        let rate = self.limit * window_ms as f64 / base.max(1.0);
        Some(libm::ceil(rate).max(1.0) as u64)
    }

    /// The next limit after an interval that showed `s`.
    pub fn update(&mut self, s: &Sample) -> u64 {
        let answered = s.ok + s.loss + s.backpressure;
        if answered < MIN_SAMPLES || s.elapsed_ms <= 0 {
            self.reason = Reason::Hold;
            return self.limit();
        }
        let c = self.config;
        let loss = s.loss_ratio();
        // Against the loss before this interval, so a jump shows (the first interval's
        // baseline is no loss).
        let excess = loss - self.loss_base.min().unwrap_or(0.0);
        self.loss_base.push(loss);
        if s.ok >= MIN_SAMPLES {
            self.base.push(s.p50_ms);
        }
        let base = self.base.min().unwrap_or(s.p50_ms);
        let knee = s.goodput_rps() * base / 1e3;
        let limit = self.limit;

        let mut lossy = excess > LOSS_TOLERANCE;
        if self.loss_stale.lowered_in_vain(lossy, loss) {
            self.loss_base.reset(loss);
            self.held_for = 0;
            lossy = false;
        }
        self.target_off_for = self.target_off_for.saturating_sub(1);
        let over_target =
            self.target_off_for == 0 && c.latency_target_ms.is_some_and(|t| s.p95_ms > t);
        let mut inflated = s.p50_ms > base * (1.0 + TOLERANCE) || over_target;
        if self
            .latency_stale
            .lowered_in_vain(inflated && !lossy, s.p50_ms)
        {
            self.base.reset(s.p50_ms);
            self.target_off_for = BASE_WINDOW as u32;
            inflated = false;
        }
        let bound = s.refused > 0 || s.max_inflight as f64 >= limit - 0.5;
        let queued = bound && s.p50_ms > base * (1.0 + HEADROOM / 4.0);
        self.queued_for = if queued { self.queued_for + 1 } else { 0 };
        // The hold lasts while the lowering keeps the loss away.
        let helped = loss < self.held_loss * 0.9;
        self.held_for = if helped {
            self.held_for.saturating_sub(1)
        } else {
            0
        };

        let (next, reason) = if lossy {
            (self.held_for, self.held_loss) = (BASE_WINDOW as u32, loss);
            (knee.clamp(limit * 0.5, limit * 0.9), Reason::Loss)
        } else if inflated {
            (knee.clamp(limit * 0.5, limit * 0.95), Reason::Latency)
        } else if bound && !queued && self.held_for == 0 {
            (limit * (1.0 + GROWTH), Reason::Grow)
        } else if self.queued_for >= PROBE_EVERY {
            self.queued_for = 0;
            let under = knee * (1.0 - HEADROOM / 2.0);
            (under.min(limit), Reason::Probe)
        } else {
            (limit, Reason::Hold)
        };
        self.reason = reason;
        self.limit = next.clamp(c.min_limit as f64, c.max_limit as f64);
        self.limit()
    }
}

#[cfg(test)]
mod tests;
