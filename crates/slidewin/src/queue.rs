//! A rate limit that follows a queue's consumers: producers are admitted about as fast as the
//! consumers process, and the backlog (messages waiting or in processing) is held near a target.
//!
//! Every interval the caller reads the queue (for a Redis Stream consumer group, `XINFO
//! GROUPS`: `processed` = `entries-read` - `pending`, `backlog` = `lag` + `pending`) and asks
//! for the next limit, in messages per second:
//!
//! ```text
//! limit = rate x (1 + headroom x idle) + (target - backlog) x 1000 / settle_ms
//! ```
//!
//! where `rate` is the consumers' processing rate (a time-weighted EWMA of the measured rates,
//! half-life `rate_half_life_ms`) and `idle` = `max(0, target - backlog) / target` (1 with an
//! empty queue, 0 at or above the target). At the target the limit is the processing rate, so
//! the backlog stays; above it, the excess is drained over about `settle_ms`; below it, the
//! limit offers up to `headroom` more than the consumers do now, since consumers with nothing
//! to do cannot show how fast they could go. The limit is clamped to `min_limit..=max_limit`:
//! consumers that stop bring it down to `min_limit`, never to a standstill the queue cannot
//! leave (the backlog it admits is drained as soon as consumers come back).
//!
//! ```
//! use slidewin::queue::{QueueLimit, QueueLimitConfig, QueueSample};
//! let mut q = QueueLimit::new(QueueLimitConfig { target_backlog: 100, ..QueueLimitConfig::default() })?;
//! assert_eq!(q.update_at(0, QueueSample { processed: 0, backlog: 100 })?, None); // no rate yet
//! // 200 processed in 1 s, backlog at the target: the limit is the processing rate.
//! assert_eq!(q.update_at(1_000, QueueSample { processed: 200, backlog: 100 })?, Some(200));
//! # Ok::<(), slidewin::Error>(())
//! ```

use crate::stream::{Aggregate, TimeEwma};
use crate::{Clock, Error, Value};

/// How the limit follows the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct QueueLimitConfig {
    /// The backlog to hold (messages waiting or in processing), at least 1.
    pub target_backlog: u64,
    /// About how long an excess backlog takes to drain (ms, at least 1).
    pub settle_ms: i64,
    /// Half-life of the processing rate's EWMA (ms, at least 1).
    pub rate_half_life_ms: i64,
    /// Share of the processing rate offered on top while the backlog is under the target
    /// (a finite number >= 0).
    pub headroom: f64,
    /// The lowest limit (messages per second, at least 1).
    pub min_limit: u64,
    /// The highest limit (at least `min_limit`).
    pub max_limit: u64,
}

impl Default for QueueLimitConfig {
    fn default() -> Self {
        Self {
            target_backlog: 1_000,
            settle_ms: 5_000,
            rate_half_life_ms: 1_000,
            headroom: 0.5,
            min_limit: 1,
            max_limit: 1_000_000,
        }
    }
}

/// What the caller read from the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSample {
    /// Messages the consumers have finished, since any start (only differences matter).
    pub processed: u64,
    /// Messages not finished yet: waiting, or being processed.
    pub backlog: u64,
}

/// The controller: [`QueueLimit::update_at`] once per interval.
#[derive(Debug, Clone)]
pub struct QueueLimit {
    config: QueueLimitConfig,
    rate: TimeEwma,
    last: Option<(i64, u64)>,
}

impl QueueLimit {
    /// A controller, or an error naming the first field out of its domain.
    pub fn new(config: QueueLimitConfig) -> Result<Self, Error> {
        let positive = |name, v: i64| {
            if v >= 1 {
                Ok(())
            } else {
                Err(Error::invalid(name, "a positive integer", Value::Int(v)))
            }
        };
        let count = |name, v: u64| {
            if v >= 1 {
                Ok(())
            } else {
                Err(Error::invalid(name, "a positive integer", Value::UInt(v)))
            }
        };
        count("target_backlog", config.target_backlog)?;
        positive("settle_ms", config.settle_ms)?;
        count("min_limit", config.min_limit)?;
        if !(config.headroom.is_finite() && config.headroom >= 0.0) {
            return Err(Error::invalid(
                "headroom",
                "a finite number >= 0",
                Value::Float(config.headroom),
            ));
        }
        if config.max_limit < config.min_limit {
            return Err(Error::invalid(
                "max_limit",
                "at least min_limit",
                Value::UInt(config.max_limit),
            ));
        }
        Ok(Self {
            rate: TimeEwma::new(config.rate_half_life_ms)?,
            config,
            last: None,
        })
    }

    /// The config it runs with.
    pub fn config(&self) -> &QueueLimitConfig {
        &self.config
    }

    /// The consumers' processing rate (messages per second), once two samples have been seen.
    pub fn rate(&self) -> Option<f64> {
        self.rate.value()
    }

    /// [`QueueLimit::update_at`] at the clock's time.
    pub fn update(
        &mut self,
        clock: &impl Clock,
        sample: QueueSample,
    ) -> Result<Option<u64>, Error> {
        self.update_at(clock.now_ms(), sample)
    }

    /// The next limit after reading `sample` at `now_ms`; `None` until a rate is known (the
    /// first sample, and the first after `processed` went back: a new stream or group).
    /// A time not after the previous sample's leaves the rate as it was.
    pub fn update_at(&mut self, now_ms: i64, sample: QueueSample) -> Result<Option<u64>, Error> {
        crate::clock::check_time("now_ms", now_ms)?;
        match self.last {
            Some((t, processed)) if sample.processed < processed => {
                self.rate.clear();
                self.last = Some((now_ms.max(t), sample.processed));
                return Ok(None);
            }
            Some((t, processed)) if now_ms > t => {
                let per_second = (sample.processed - processed) as f64 * 1e3 / (now_ms - t) as f64;
                self.rate.push_at(now_ms, per_second)?;
                self.last = Some((now_ms, sample.processed));
            }
            Some(_) => {}
            None => self.last = Some((now_ms, sample.processed)),
        }
        Ok(self
            .rate
            .value()
            .map(|rate| self.limit(rate, sample.backlog)))
    }

    fn limit(&self, rate: f64, backlog: u64) -> u64 {
        let c = &self.config;
        let target = c.target_backlog as f64;
        let error = target - backlog as f64;
        let idle = error.max(0.0) / target;
        let limit = rate * (1.0 + c.headroom * idle) + error * 1e3 / c.settle_ms as f64;
        // Round to the nearest; the clamp also takes NaN-free negatives to min_limit.
        let limit = libm::round(limit.max(0.0));
        (limit as u64).clamp(c.min_limit, c.max_limit)
    }
}

#[cfg(test)]
mod tests;
