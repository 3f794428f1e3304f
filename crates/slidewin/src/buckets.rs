//! # Bucket window: a ring of counters, conservative
//!
//! Time is cut into buckets of `bucket_ms` (dividing `window_ms`); each bucket counts the cost
//! admitted in it, and a running total sums them. A bucket's cost is treated as if it all
//! arrived at the bucket's last millisecond, so it leaves the window at most `bucket_ms - 1` ms
//! late: the limiter never admits more than `limit` in any interval of `window_ms`, and may
//! refuse up to one bucket early. Answers are exact for that rule.
//!
//! Memory is fixed by the config, whatever the traffic: `window_ms / bucket_ms + 1` counters
//! (a window that does not start on a bucket boundary touches that many buckets).
//!
//! ```
//! use slidewin::{BucketWindow, Limiter};
//!
//! let mut limiter = BucketWindow::new(100, 1_000, 100)?;
//! assert!(limiter.check_at(999, 100)?.allowed);    // bucket [900, 1000)
//! let refused = limiter.check_at(1_001, 1)?;
//! assert!(!refused.allowed);
//! assert_eq!(refused.retry_after_ms, Some(998));   // the bucket leaves at 1999, like the log
//! assert!(limiter.check_at(1_999, 100)?.allowed);
//! # Ok::<(), slidewin::Error>(())
//! ```

use alloc::boxed::Box;
use alloc::vec;

use crate::window::{single_key_limiter, Window, NEVER};
use crate::{Error, Quota, Value};

/// The most buckets a window may be cut into (so a config cannot ask for unbounded memory).
pub const MAX_BUCKETS: i64 = 1 << 16;

single_key_limiter!(
    /// The bucket-window limiter for one key; see the [module docs](self).
    BucketWindow(BucketQuota, BucketState)
);

impl BucketWindow {
    /// `limit` cost per `window_ms`, counted in buckets of `bucket_ms`.
    pub fn new(limit: u64, window_ms: i64, bucket_ms: i64) -> Result<Self, Error> {
        Ok(crate::Limiter::from_config(BucketQuota::new(
            limit, window_ms, bucket_ms,
        )?))
    }
}

/// A [`Quota`] and the bucket length that cuts its window.
///
/// ```
/// use slidewin::BucketQuota;
/// assert_eq!(BucketQuota::new(10, 1_000, 100).unwrap().buckets(), 10);
/// assert_eq!(
///     BucketQuota::new(10, 1_000, 300).unwrap_err().to_string(),
///     "bucket_ms must be a divisor of window_ms, got 300"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(into = "RawBucketQuota", try_from = "RawBucketQuota")
)]
pub struct BucketQuota {
    quota: Quota,
    bucket_ms: i64,
}

impl BucketQuota {
    /// `bucket_ms` must be positive, divide `window_ms`, and cut it into at most
    /// [`MAX_BUCKETS`] buckets.
    pub fn new(limit: u64, window_ms: i64, bucket_ms: i64) -> Result<Self, Error> {
        let quota = Quota::new(limit, window_ms)?;
        let bad = |expected| Err(Error::invalid("bucket_ms", expected, Value::Int(bucket_ms)));
        if bucket_ms <= 0 {
            return bad("a positive integer");
        }
        if window_ms % bucket_ms != 0 {
            return bad("a divisor of window_ms");
        }
        if window_ms / bucket_ms > MAX_BUCKETS {
            return bad("at least window_ms / 65536");
        }
        Ok(Self { quota, bucket_ms })
    }

    /// The limit and window.
    pub const fn quota(&self) -> Quota {
        self.quota
    }

    /// Cost admitted per window.
    pub const fn limit(&self) -> u64 {
        self.quota.limit()
    }

    /// The window's length in milliseconds.
    pub const fn window_ms(&self) -> i64 {
        self.quota.window_ms()
    }

    /// A bucket's length in milliseconds.
    pub const fn bucket_ms(&self) -> i64 {
        self.bucket_ms
    }

    /// How many buckets make a window.
    pub const fn buckets(&self) -> i64 {
        self.quota.window_ms() / self.bucket_ms
    }

    /// The bucket holding `t_ms`.
    fn bucket(&self, t_ms: i64) -> i64 {
        t_ms.div_euclid(self.bucket_ms)
    }

    /// The oldest bucket still in the window at `t_ms`: its last millisecond is after
    /// `t_ms - window_ms`.
    fn oldest_live(&self, t_ms: i64) -> i64 {
        self.bucket(t_ms - self.quota.window_ms() + 1)
    }

    /// When `bucket`'s cost leaves the window.
    fn expiry_ms(&self, bucket: i64) -> i64 {
        (bucket + 1) * self.bucket_ms - 1 + self.quota.window_ms()
    }
}

/// The counters of one key: a ring indexed by bucket number, their total, the newest time seen.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(into = "RawBucketState", try_from = "RawBucketState")
)]
pub struct BucketState {
    counts: Box<[u64]>,
    total: u64,
    newest_ms: i64,
}

impl BucketState {
    /// Cost counted in the window at the newest time seen.
    pub const fn total(&self) -> u64 {
        self.total
    }

    fn count_mut(&mut self, bucket: i64) -> &mut u64 {
        let slot = bucket.rem_euclid(self.counts.len() as i64) as usize;
        &mut self.counts[slot]
    }

    fn count(&self, bucket: i64) -> u64 {
        self.counts[bucket.rem_euclid(self.counts.len() as i64) as usize]
    }

    /// The live buckets at the newest time, oldest first.
    fn live(&self, config: &BucketQuota) -> core::ops::RangeInclusive<i64> {
        config.oldest_live(self.newest_ms)..=config.bucket(self.newest_ms)
    }

    /// Milliseconds from the newest time until `bucket` leaves the window.
    fn expires_in(&self, config: &BucketQuota, bucket: i64) -> u64 {
        (config.expiry_ms(bucket) - self.newest_ms) as u64
    }
}

impl Window for BucketState {
    type Config = BucketQuota;

    fn limit(config: &BucketQuota) -> u64 {
        config.quota.limit()
    }

    fn empty(config: &BucketQuota) -> Self {
        let slots = config.buckets() as usize + 1;
        Self {
            counts: vec![0; slots].into_boxed_slice(),
            total: 0,
            newest_ms: NEVER,
        }
    }

    fn newest_ms(&self) -> i64 {
        self.newest_ms
    }

    fn advance(&mut self, config: &BucketQuota, now_ms: i64) {
        // An empty ring has nothing to expire (and may not have a real `newest_ms` yet).
        if self.total > 0 {
            let (from, to) = (
                config.oldest_live(self.newest_ms),
                config.oldest_live(now_ms),
            );
            if to - from >= self.counts.len() as i64 {
                self.counts.fill(0);
                self.total = 0;
            } else {
                for bucket in from..to {
                    self.total = self
                        .total
                        .saturating_sub(core::mem::take(self.count_mut(bucket)));
                }
            }
        }
        self.newest_ms = now_ms;
    }

    fn used(&self, _: &BucketQuota) -> u64 {
        self.total
    }

    fn record(&mut self, config: &BucketQuota, cost: u64) {
        let count = self.count_mut(config.bucket(self.newest_ms));
        *count = count.saturating_add(cost);
        self.total = self.total.saturating_add(cost);
    }

    fn unrecord(&mut self, config: &BucketQuota, mut cost: u64) {
        for bucket in self.live(config).rev() {
            let count = self.count_mut(bucket);
            let taken = cost.min(*count);
            *count -= taken;
            self.total = self.total.saturating_sub(taken);
            cost -= taken;
        }
    }

    fn wait_ms(&self, config: &BucketQuota, at_most: u64) -> u64 {
        let need = self.total - at_most;
        let mut freed = 0u64;
        for bucket in self.live(config) {
            freed = freed.saturating_add(self.count(bucket));
            if freed >= need {
                return self.expires_in(config, bucket);
            }
        }
        self.reset_after_ms(config)
    }

    fn reset_after_ms(&self, config: &BucketQuota) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let newest = self
            .live(config)
            .rev()
            .find(|&bucket| self.count(bucket) > 0);
        newest.map_or(0, |bucket| self.expires_in(config, bucket))
    }

    fn heap_bytes(&self) -> usize {
        self.counts.len() * core::mem::size_of::<u64>()
    }
}

/// A bucket config as serde reads and writes it.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct RawBucketQuota {
    limit: u64,
    window_ms: i64,
    bucket_ms: i64,
}

#[cfg(feature = "serde")]
impl From<BucketQuota> for RawBucketQuota {
    fn from(c: BucketQuota) -> Self {
        Self {
            limit: c.quota.limit(),
            window_ms: c.quota.window_ms(),
            bucket_ms: c.bucket_ms,
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<RawBucketQuota> for BucketQuota {
    type Error = Error;
    fn try_from(raw: RawBucketQuota) -> Result<Self, Error> {
        BucketQuota::new(raw.limit, raw.window_ms, raw.bucket_ms)
    }
}

/// A bucket snapshot as serde reads and writes it (the total is recomputed on reading).
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct RawBucketState {
    newest_ms: i64,
    counts: alloc::vec::Vec<u64>,
}

#[cfg(feature = "serde")]
impl From<BucketState> for RawBucketState {
    fn from(state: BucketState) -> Self {
        Self {
            newest_ms: state.newest_ms,
            counts: state.counts.into_vec(),
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<RawBucketState> for BucketState {
    type Error = Error;
    fn try_from(raw: RawBucketState) -> Result<Self, Error> {
        let newest_ms = crate::window::check_newest(raw.newest_ms)?;
        let slots = raw.counts.len() as u64;
        if !(2..=MAX_BUCKETS as u64 + 1).contains(&slots) {
            return Err(Error::invalid(
                "counts.len",
                "2 to 65537",
                Value::UInt(slots),
            ));
        }
        let total = raw
            .counts
            .iter()
            .try_fold(0u64, |sum, &c| sum.checked_add(c));
        let total = total.ok_or(Error::invalid(
            "counts",
            "a total that fits in 64 bits",
            Value::UInt(0),
        ))?;
        if total > 0 && newest_ms == NEVER {
            return Err(Error::invalid(
                "newest_ms",
                "a time when counts hold cost",
                Value::Int(NEVER),
            ));
        }
        Ok(Self {
            counts: raw.counts.into_boxed_slice(),
            total,
            newest_ms,
        })
    }
}
