//! A concurrency limit that follows the upstream's load: every interval the caller gives what
//! the interval's requests showed ([`Sample`]) and gets the next limit.
//!
//! The model is the one a FIFO upstream obeys (Little's law): below its knee `K` (the requests
//! it serves at once) a request waits for nothing and takes the no-load time `S`; above it the
//! surplus waits in a queue and goodput stays at `K / S`. Under overload the limit should sit
//! just above `K`: all of the goodput, next to no queue. Below capacity it should stay out of
//! the way: requests wait by chance there too (at 0.95x with exponential service times the
//! median latency doubles), and no limit can take that wait away without refusing requests
//! the upstream would have served.
//!
//! So the controller first asks **is the upstream overloaded**, and only then looks at latency:
//! - **Pinned**: the limit held requests back all interval (a third of the admissions took the
//!   last slot, or a quarter of the arrivals were refused). Arrivals faster than the upstream
//!   serves pin the limit; a limit that is only touched by a burst is not pinned.
//! - **Queued**: the interval's mean latency is above the no-load mean by more than
//!   [`TOLERANCE`] *and* by more than [`SIGNIFICANCE`] standard errors of that mean (the
//!   interval's own spread over the square root of its answers): a 500 ms interval of a
//!   jittery upstream moves its mean by 10-20% by chance, which is not a queue.
//!
//! Each interval, in this order:
//! 1. **Loss** (502, 504, timeouts, client gave up) or **backpressure** (upstream 503/429)
//!    above their own baseline by more than [`LOSS_TOLERANCE`], and by more than chance for
//!    the interval's count (one timeout in thirty answers is not overload): the limit goes to
//!    the knee (10 to 50% down) and does not grow for [`BASE_WINDOW`] intervals while that
//!    keeps the loss away (an upstream that fails fast shows no queue before it fails).
//! 2. **A probe** is under way (below): it runs its course.
//! 3. **A probe is due** (below): it starts.
//! 4. **Pinned and queued** (or over the optional p95 target): the limit goes to the knee,
//!    `saturated goodput x S x (1 + HEADROOM)` (5 to 50% down): Little's law, from the goodput
//!    only a saturated upstream delivers, smoothed over the saturated intervals (one interval's
//!    count moves by chance) unless it fell by a quarter at once (capacity dropped).
//! 5. **Touched** (a refusal, or an admission took the last slot), no queue: the limit grows
//!    by [`GROWTH`] when pinned (the upstream has room), by twice that when not (the load is
//!    under capacity and its bursts reach the limit: out of their way at once), and not at
//!    all while the queue is filling up (more admitted than answered, by more than chance: the
//!    limit was reached by an overload's queue, not by a burst).
//! 6. Otherwise the limit holds: an untouched limit never climbs.
//!
//! **The no-load time `S` is measured, never inherited.** Its mean and median come from
//! *probes*: intervals in which the limit was below the knee, so nothing waited. A probe
//! lowers the limit and drains: while goodput stays at the saturated goodput, the limit is
//! still above the knee and it halves again (a queue of any depth drains in a few intervals).
//! Once goodput falls, it measures [`MEASURE_ANSWERS`] answers (or [`MEASURE_MOST`]
//! intervals) a little under the knee the drain showed, and keeps them only if their goodput
//! was below 95% of the saturated one (Little's law: under the knee a limit delivers less);
//! else a step lower, again. A probe runs
//! - at a cold start into a crowd (a third refused) that lasts two intervals:
//!   what the limit let in is never taken for the no-load time;
//! - when cuts in a row took the limit down by 30% and the latency did not follow (the
//!   upstream became slower), or answers come faster than `S` (it became faster);
//! - every [`PROBE_EVERY`] pinned intervals, at an interval that would cut anyway.
//!
//! Until the first probe, `S` is a provisional estimate from intervals the limit did not
//! touch, for [`Adaptive::base_ms`] and [`Adaptive::rate_limit`] only: no cut rests on it.
//!
//! How the failure modes are kept away:
//! - **Healthy traffic is never shed for chance latency**: a cut needs the limit pinned and a
//!   significant queue; below capacity the limit is not pinned, and when its bursts touch it,
//!   it grows.
//! - **A lucky interval cannot drag the baseline down**: `S` is not a minimum over intervals
//!   (the lowest of thirty noisy medians is a lucky low, and every ordinary interval then
//!   reads as a queue); it is the mean of the probes' measures weighted by their answers, the
//!   older ones at three quarters each time, and a measure a quarter off replaces it.
//! - **No baseline latches onto a queue**: a probe measures only where goodput showed the
//!   limit under the knee.
//! - **No creep**: `S` moves only by probes, not with the load; the limit is derived from it.
//!
//! Tested (the core's simulation, `adaptive/sim.rs`) on a FIFO upstream with open-loop
//! arrivals at even spacing and service times fixed, uniform +-50%, exponential, lognormal
//! (sigma 0.5 and 1) and bimodal (one request in ten 5x slower), at 0.5x, 0.8x, 0.95x, 2x and
//! 5x of capacity, from a limit near the knee and from ten times it, with capacity halved
//! and doubled, a slower upstream, a fail-fast upstream and a steady error rate.
//!
//! ```
//! use slidewin::adaptive::{Adaptive, AdaptiveConfig, Sample};
//! let mut a = Adaptive::new(AdaptiveConfig { initial_limit: 10, ..AdaptiveConfig::default() })?;
//! // 1 s, 250 answered at 40 ms, 30 refused at the limit: touched, not pinned (under
//! // capacity, a burst), so it grows out of the way: by 40%.
//! let s = Sample { ok: 250, refused: 30, p50_ms: 40.0, mean_ms: 40.0, p95_ms: 41.0,
//!                  p99_ms: 42.0, elapsed_ms: 1_000, ..Sample::default() };
//! assert_eq!(a.update(&s), 14);
//! # Ok::<(), slidewin::Error>(())
//! ```

mod histogram;
#[cfg(test)]
mod sim;
mod state;
mod upstream;

pub use histogram::{bucket_of, bucket_value, mean_and_sd, quantile, BUCKETS};
pub use state::STATE_WORDS;
pub use upstream::upstream_time_ms;

use crate::{Error, Value};
use state::{Baseline, Measuring, MinWindow, Phase, Streak};

/// Intervals whose lowest loss ratio is the loss baseline; and how long a loss cut holds.
pub const BASE_WINDOW: usize = 30;
/// How far the mean latency may rise above the no-load mean before it counts as a queue.
pub const TOLERANCE: f64 = 0.1;
/// Standard errors of the interval's mean the rise must also exceed to count as a queue.
pub const SIGNIFICANCE: f64 = 2.5;
/// The queue the limit leaves above the knee, as a share of the knee.
pub const HEADROOM: f64 = 0.1;
/// Growth per interval while the limit is touched with no queue.
pub const GROWTH: f64 = 0.2;
/// Loss (or backpressure) ratio above its baseline that counts as overload.
pub const LOSS_TOLERANCE: f64 = 0.02;
/// Pinned intervals between two probes.
pub const PROBE_EVERY: u32 = 240;
/// Answers a probe measures the no-load time on, once below the knee (the median of 200
/// exponential service times is within 7% of the true one, one standard error)...
pub const MEASURE_ANSWERS: u64 = 200;
/// ...or intervals, when they come slowly.
pub const MEASURE_MOST: u64 = 4;
/// Fewer answered requests in an interval than this carry no signal: the limit holds.
pub const MIN_SAMPLES: u64 = 5;
/// Lowered intervals in a row that did not help before a baseline is set aside.
const STALE_AFTER: u32 = 3;
/// Admissions at the limit, as a share of those answered, that pin it.
const PINNED_AT_LIMIT: f64 = 1.0 / 3.0;
/// Refusals, as a share of the arrivals, that pin it.
const PINNED_REFUSED: f64 = 0.25;
/// Refusals, as a share of the arrivals, of a crowd.
const CROWDED: f64 = 1.0 / 3.0;
/// Crowded intervals in a row before a first probe.
const CROWDED_FOR: u32 = 2;
/// Goodput, as a share of the saturated goodput, below which a drain step reached the knee.
const DRAINED: f64 = 0.8;
/// Goodput over a probe's measurement, as a share of the saturated goodput, below which its
/// limit was under the knee.
const UNDER_KNEE: f64 = 0.95;
/// A probe measures at this share of the knee the drain showed.
const MEASURE_DEPTH: f64 = 0.75;
/// A periodic probe's limit, as a share of the knee.
const PROBE_DEPTH: f64 = 0.7;

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
    /// Requests admitted (0: not counted).
    pub admitted: u64,
    /// Requests admitted into the last slot (in flight reached the limit with them).
    pub at_limit: u64,
    /// Latency quantiles of the requests answered well (ms).
    pub p50_ms: f64,
    /// p95 of the same (ms).
    pub p95_ms: f64,
    /// p99 of the same (ms).
    pub p99_ms: f64,
    /// Mean latency of the same (ms).
    pub mean_ms: f64,
    /// Standard deviation of the same (ms).
    pub sd_ms: f64,
    /// How long the interval was (ms).
    pub elapsed_ms: i64,
}

impl Sample {
    /// Sets the latency fields from a histogram of the good answers' latencies (counts by
    /// [`bucket_of`]); they stay 0 when it counts nothing.
    pub fn set_latencies(&mut self, counts: &[u64]) {
        let q = |p| quantile(counts, p).unwrap_or(0.0);
        (self.p50_ms, self.p95_ms, self.p99_ms) = (q(0.5), q(0.95), q(0.99));
        (self.mean_ms, self.sd_ms) = mean_and_sd(counts).unwrap_or((0.0, 0.0));
    }

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

    fn answered(&self) -> u64 {
        self.ok + self.loss + self.backpressure
    }

    /// The limit held requests back all interval: arrivals came faster than answers.
    fn pinned(&self) -> bool {
        self.at_limit as f64 >= PINNED_AT_LIMIT * self.answered() as f64
            || self.refused_share() >= PINNED_REFUSED
    }

    /// The loss ratio is above `loss_base` by more than [`LOSS_TOLERANCE`], and by more
    /// than chance explains for this many answers (one timeout in thirty is not overload).
    fn lossy_over(&self, loss_base: f64) -> bool {
        let excess = self.loss_ratio() - loss_base;
        let edge = (loss_base + LOSS_TOLERANCE).min(1.0);
        let standard_error = libm::sqrt(edge * (1.0 - edge) / self.answered() as f64);
        excess > LOSS_TOLERANCE && excess > SIGNIFICANCE * standard_error
    }

    fn refused_share(&self) -> f64 {
        self.refused as f64 / (self.answered() + self.refused).max(1) as f64
    }

    /// A third of the arrivals were refused: 1.5x capacity or more, or a limit far too low.
    fn crowded(&self) -> bool {
        self.refused_share() >= CROWDED
    }

    /// More were admitted than answered, by more than chance: the queue is filling up (a
    /// limit it reached is no burst's).
    fn filling(&self) -> bool {
        let answered = self.answered() as f64;
        self.admitted as f64 - answered > SIGNIFICANCE * libm::sqrt(answered.max(1.0))
    }

    /// The limit stopped or nearly stopped a request.
    fn touched(&self) -> bool {
        self.refused > 0 || self.at_limit > 0
    }

    /// The mean latency is above the no-load mean by more than the tolerance and by more than
    /// chance explains for this many answers.
    fn queued_over(&self, base_mean: f64) -> bool {
        self.significantly_above(base_mean, self.mean_ms)
    }

    /// The mean latency is below the no-load mean by as much: the upstream got faster.
    fn faster_than(&self, base_mean: f64) -> bool {
        self.significantly_above(self.mean_ms, base_mean)
    }

    fn significantly_above(&self, low: f64, high: f64) -> bool {
        let standard_error = self.sd_ms / libm::sqrt(self.ok.max(1) as f64);
        high - low > low.min(high) * TOLERANCE && high - low > SIGNIFICANCE * standard_error
    }
}

/// Why the last update moved the limit (or did not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    /// Too few answered requests to tell; or untouched with no sign of overload.
    Hold = 0,
    /// Lowered for loss or backpressure above their baseline.
    Loss = 1,
    /// Lowered to the knee: pinned with a queue, or latency over the target.
    Latency = 2,
    /// Raised: touched with no queue.
    Grow = 3,
    /// Under the knee, to measure the no-load latency.
    Probe = 4,
}

/// The controller; its whole state is plain numbers ([`Adaptive::to_words`]), so it can live
/// in shared memory and be run by whichever process is elected for an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Adaptive {
    config: AdaptiveConfig,
    limit: f64,
    /// The no-load latency: measured by probes, or provisional until the first one.
    base: Baseline,
    /// Goodput of saturated intervals (requests/s; 0 before one), smoothed.
    saturated_rps: f64,
    phase: Phase,
    /// The limit and mean latency before the last drain step.
    drained_from: (f64, f64),
    /// What the probe's intervals under the knee showed so far.
    measuring: Measuring,
    /// Pinned intervals in a row.
    pinned_for: u32,
    /// Crowded intervals in a row.
    crowded_for: u32,
    loss_base: MinWindow,
    held_for: u32,
    held_loss: f64,
    /// Intervals in a row with answers faster than the no-load time.
    faster_for: u32,
    /// The limit and mean latency when the cuts in a row began, and the cuts so far.
    cuts_from: (f64, f64, u32),
    target_stale: Streak,
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
            base: Baseline::default(),
            saturated_rps: 0.0,
            phase: Phase::Steer,
            drained_from: (0.0, 0.0),
            measuring: Measuring::default(),
            pinned_for: 0,
            crowded_for: 0,
            loss_base: MinWindow::default(),
            held_for: 0,
            held_loss: 0.0,
            faster_for: 0,
            cuts_from: (0.0, 0.0, 0),
            target_stale: Streak::default(),
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

    /// The no-load latency's median (ms): measured by probes (the first one's running
    /// measure while it lasts), provisional before.
    pub fn base_ms(&self) -> Option<f64> {
        let first = (!self.base.is_measured() && self.phase == Phase::Measure)
            .then(|| self.measuring.latency().map(|(p50, ..)| p50))
            .flatten();
        first.or(self.base.p50())
    }

    /// Why the last update did what it did.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The rate (requests a second) that admits about as many requests as the limit keeps in
    /// flight at the no-load latency (Little's law), for a rule's live limit; unrounded, so
    /// [`crate::live::window_limit`] rounds it once for the rule's window.
    pub fn rate_per_second(&self) -> Option<f64> {
        let base = self.base.mean()?;
        Some(self.limit * 1e3 / base.max(1.0))
    }

    /// [`Adaptive::rate_per_second`] as a limit per `window_ms` (at least 1).
    pub fn rate_limit(&self, window_ms: i64) -> Option<u64> {
        let rate = self.rate_per_second()?;
        Some(crate::live::window_limit(rate, window_ms, u64::MAX))
    }

    /// The requests the upstream serves at once: saturated goodput x the measured no-load mean.
    fn knee(&self) -> Option<f64> {
        let base = self.base.measured_mean()?;
        (self.saturated_rps > 0.0).then(|| self.saturated_rps * base / 1e3)
    }

    /// The requests in flight at `rps` with no queue (Little's law), by the baseline's mean.
    fn knee_at(&self, rps: f64) -> Option<f64> {
        self.base.mean().map(|base| rps * base / 1e3)
    }

    /// The next limit after an interval that showed `s`.
    pub fn update(&mut self, s: &Sample) -> u64 {
        if s.answered() < MIN_SAMPLES || s.elapsed_ms <= 0 {
            self.reason = Reason::Hold;
            return self.limit();
        }
        let (next, reason) = self.decide(s);
        self.reason = reason;
        let c = self.config;
        self.limit = next.clamp(c.min_limit as f64, c.max_limit as f64);
        self.limit()
    }

    fn decide(&mut self, s: &Sample) -> (f64, Reason) {
        let limit = self.limit;
        let loss = s.loss_ratio();
        // Against the loss before this interval, so a jump shows (the first interval's
        // baseline is no loss).
        let loss_base = self.loss_base.min().unwrap_or(0.0);
        self.loss_base.push(loss);
        let mut lossy = s.lossy_over(loss_base);
        if self.loss_stale.lowered_in_vain(lossy, loss) {
            self.loss_base.reset(loss);
            self.held_for = 0;
            lossy = false;
        }
        // The hold lasts while the lowering keeps the loss away.
        let helped = loss < self.held_loss * 0.9;
        self.held_for = if helped {
            self.held_for.saturating_sub(1)
        } else {
            0
        };
        let goodput = s.goodput_rps();
        if lossy {
            self.phase = Phase::Steer;
            (self.held_for, self.held_loss) = (BASE_WINDOW as u32, loss);
            let knee = self.knee_at(goodput).unwrap_or(limit * 0.75);
            return (knee.clamp(limit * 0.5, limit * 0.9), Reason::Loss);
        }
        if let Some(next) = self.probe(s, goodput) {
            return (next, Reason::Probe);
        }

        let pinned = s.pinned();
        if !s.touched() && s.ok >= MIN_SAMPLES {
            self.base.provisional(s.p50_ms, s.mean_ms, s.ok);
        }
        self.target_off_for = self.target_off_for.saturating_sub(1);
        let over_target =
            self.target_off_for == 0 && self.config.latency_target_ms.is_some_and(|t| s.p95_ms > t);
        let queued = pinned && self.base.measured_mean().is_some_and(|b| s.queued_over(b));
        self.crowded_for = if s.crowded() { self.crowded_for + 1 } else { 0 };
        self.pinned_for = if pinned { self.pinned_for + 1 } else { 0 };
        let faster = pinned && self.base.measured_mean().is_some_and(|b| s.faster_than(b));
        self.faster_for = if faster { self.faster_for + 1 } else { 0 };
        let cut_in_vain = queued && self.cut_in_vain(limit, s.mean_ms);
        if !queued {
            self.cuts_from = (0.0, 0.0, 0);
        }
        if self.target_stale.lowered_in_vain(over_target, s.p95_ms) {
            // Lowering did not bring p95 under the target: it is not the load's doing.
            self.target_off_for = BASE_WINDOW as u32;
        }
        if pinned && (queued || s.crowded() || self.knee().is_some_and(|k| limit >= k)) {
            self.saturated(goodput);
        }

        let probe_at = if !self.base.is_measured() {
            // A crowd that lasts, before the no-load time was ever measured: what the limit
            // let in is not the no-load time. One burst below capacity does not last.
            (self.crowded_for >= CROWDED_FOR).then_some(limit * 0.5)
        } else if cut_in_vain || self.faster_for >= STALE_AFTER {
            // Cuts that did not shorten the queue, or answers faster than the no-load time:
            // the upstream is not what it was.
            Some(limit * PROBE_DEPTH)
        } else if queued && self.pinned_for >= PROBE_EVERY {
            // Due, and the limit is to be lowered anyway (not while it grows into capacity).
            self.knee().map(|knee| knee * PROBE_DEPTH)
        } else {
            None
        };
        if let Some(to) = probe_at {
            return (self.start_probe(to, s), Reason::Probe);
        }
        let unknown_crowd = s.crowded()
            && !self.base.is_measured()
            && self.base.mean().is_none_or(|b| s.queued_over(b));
        if unknown_crowd {
            // Growing into a crowd that waits, with no no-load time to tell its queue by,
            // tells nothing; the probe it may call for is near.
            (limit, Reason::Hold)
        } else if over_target || queued {
            // A queue: the knee from the smoothed saturated goodput, which one interval's
            // count moves by chance; from this one's when it fell too far for chance (the
            // capacity dropped), or when only the target was missed.
            if !queued || goodput < 0.75 * self.saturated_rps {
                self.saturated_rps = goodput;
            }
            let knee = self.knee_at(self.saturated_rps).unwrap_or(limit * 0.75);
            let next = knee * (1.0 + HEADROOM);
            (next.clamp(limit * 0.5, limit * 0.95), Reason::Latency)
        } else if s.touched() && self.held_for == 0 && !s.filling() {
            // Not pinned, the load is under capacity: out of its way at once.
            let growth = if pinned { GROWTH } else { 2.0 * GROWTH };
            (limit * (1.0 + growth), Reason::Grow)
        } else {
            (limit, Reason::Hold)
        }
    }

    /// Whether [`STALE_AFTER`] queued intervals in a row or more cut the limit by 30% without
    /// the mean latency falling by 10%: above the knee a pinned limit's latency follows it
    /// down, so a queue that stays when the limit goes is not the limit's.
    fn cut_in_vain(&mut self, limit: f64, mean_ms: f64) -> bool {
        let (from_limit, from_mean, cuts) = self.cuts_from;
        if cuts == 0 || mean_ms < from_mean * 0.9 {
            self.cuts_from = (limit, mean_ms, 1);
            return false;
        }
        self.cuts_from.2 += 1;
        // An interval's answers were admitted before its cut: give the cuts time to show.
        cuts + 1 >= STALE_AFTER && limit <= from_limit * 0.7
    }

    /// Lowers the limit to `to` to find the no-load time under the knee.
    fn start_probe(&mut self, to: f64, s: &Sample) -> f64 {
        if self.saturated_rps == 0.0 {
            self.saturated_rps = s.goodput_rps();
        }
        self.pinned_for = 0;
        self.crowded_for = 0;
        self.faster_for = 0;
        self.cuts_from = (0.0, 0.0, 0);
        self.phase = Phase::Drain;
        self.drained_from = (self.limit, s.mean_ms);
        to.min(self.limit)
    }

    /// A probe's next step, or `None` when none is under way.
    fn probe(&mut self, s: &Sample, goodput: f64) -> Option<f64> {
        match self.phase {
            Phase::Steer => None,
            Phase::Drain if self.still_above_knee(s, goodput, DRAINED) => {
                self.saturated(goodput);
                Some(self.drain_step(s))
            }
            Phase::Drain => {
                // Under the knee now: measure a little under the knee this interval's median
                // implies (its mean may still hold answers that waited in the queue), for
                // answers enough and little goodput lost.
                self.phase = Phase::Measure;
                self.measuring = Measuring::default();
                let knee = self.saturated_rps * s.p50_ms / 1e3;
                Some((MEASURE_DEPTH * knee).clamp(self.limit, self.drained_from.0))
            }
            Phase::Measure => {
                self.measuring.add(s, goodput);
                let m = self.measuring;
                if m.answers() < MEASURE_ANSWERS && m.intervals() < MEASURE_MOST {
                    return Some(self.limit);
                }
                if self.still_above_knee(s, m.goodput(), UNDER_KNEE) {
                    // Little's law: a limit under the knee delivers less than saturated
                    // goodput. This one did not, so what it measured may hold a queue: again,
                    // a step lower.
                    self.measuring = Measuring::default();
                    return Some(self.limit * MEASURE_DEPTH);
                }
                self.phase = Phase::Steer;
                if let Some((p50, mean, n)) = m.latency() {
                    self.base.measure(p50, mean, n);
                }
                Some(match self.knee() {
                    Some(knee) => knee * (1.0 + HEADROOM),
                    None => self.limit,
                })
            }
        }
    }

    /// Smooths in the goodput of an interval the upstream was saturated in.
    fn saturated(&mut self, goodput: f64) {
        self.saturated_rps = match self.saturated_rps {
            0.0 => goodput,
            rps => rps + (goodput - rps) * 0.3,
        };
    }

    /// Halves the limit (a probe that is not under the knee yet).
    fn drain_step(&mut self, s: &Sample) -> f64 {
        self.drained_from = (self.limit, s.mean_ms);
        self.limit * 0.5
    }

    /// Whether a probe's limit may still be above the knee: it is pinned, and either the
    /// upstream still delivers `share` of its saturated goodput or this interval's answers
    /// mostly waited in the queue from before the last step (their latency says nothing of
    /// the new limit yet).
    fn still_above_knee(&self, s: &Sample, goodput: f64, share: f64) -> bool {
        let lagging = self.drained_from.1 > self.config.interval_ms as f64 / 2.0;
        s.pinned()
            && self.limit > self.config.min_limit as f64
            && (lagging || goodput >= share * self.saturated_rps)
    }
}

#[cfg(test)]
mod tests;
