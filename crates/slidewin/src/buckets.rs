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

use crate::storage::Cells;
use crate::window::{single_key_limiter, Fresh, Window, NEVER};
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
}

/// The counters of one key: a ring of `window_ms / bucket_ms + 1` buckets whose `head` is the
/// newest, their total, and the times that place the ring (the counters on the heap, or in
/// shared memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketState<C = Box<[u64]>> {
    pub(crate) counts: C,
    pub(crate) head: usize,
    /// The slot of the newest bucket holding cost (when `total > 0`), so the reset time is
    /// found without walking the empty buckets after it.
    pub(crate) newest_used: usize,
    pub(crate) total: u64,
    /// Where the head bucket starts.
    pub(crate) head_start_ms: i64,
    pub(crate) newest_ms: i64,
}

impl<C: Cells> BucketState<C> {
    /// Cost counted in the window at the newest time seen.
    pub const fn total(&self) -> u64 {
        self.total
    }

    /// The slot of the bucket `age` buckets older than the head (`age < counts.len()`).
    fn slot(&self, age: usize) -> usize {
        let slot = self.head + self.counts.len() - age;
        if slot >= self.counts.len() {
            slot - self.counts.len()
        } else {
            slot
        }
    }

    /// The age of the oldest bucket still in the window at `newest_ms`: all of them but on a
    /// bucket's last millisecond, when the oldest one's last millisecond has just left.
    fn oldest_age(&self, config: &BucketQuota) -> usize {
        let on_last_ms = self.newest_ms - self.head_start_ms == config.bucket_ms - 1;
        self.counts.len() - 1 - usize::from(on_last_ms)
    }

    /// The age of the bucket `stamp_ms` (at most `newest_ms`) fell in, `None` when it left
    /// the window.
    fn stamp_age(&self, config: &BucketQuota, stamp_ms: i64) -> Option<usize> {
        let stamp_start = stamp_ms - stamp_ms.rem_euclid(config.bucket_ms);
        let stamp_age = ((self.head_start_ms - stamp_start) / config.bucket_ms) as usize;
        (stamp_age <= self.oldest_age(config)).then_some(stamp_age)
    }

    /// How many buckets `slot` is older than the head.
    fn age(&self, slot: usize) -> usize {
        if slot <= self.head {
            self.head - slot
        } else {
            self.head + self.counts.len() - slot
        }
    }

    /// The slot of the newest bucket holding cost (the head when none does).
    pub(crate) fn newest_used_slot(&self, config: &BucketQuota) -> usize {
        let used = (0..=self.oldest_age(config)).find(|&age| self.counts.get(self.slot(age)) > 0);
        self.slot(used.unwrap_or(0))
    }

    /// Empties the buckets that left the window by `newest_ms` (the oldest one, on a bucket's
    /// last millisecond), as moving there does: a state the algorithm made has none to empty.
    pub(crate) fn clear_outside_window(&mut self, config: &BucketQuota) {
        for age in self.oldest_age(config) + 1..self.counts.len() {
            let slot = self.slot(age);
            self.counts.set(slot, 0);
        }
    }

    /// Milliseconds from the newest time until the bucket of `age` leaves the window.
    fn expires_in(&self, config: &BucketQuota, age: usize) -> u64 {
        let ends_ms = self.head_start_ms - age as i64 * config.bucket_ms + config.bucket_ms - 1;
        (ends_ms + config.window_ms() - self.newest_ms).max(0) as u64
    }
}

impl Fresh for BucketState {
    #[inline]
    fn empty(config: &BucketQuota) -> Self {
        let slots = config.buckets() as usize + 1;
        let counts = vec![0; slots].into_boxed_slice();
        Self {
            counts,
            head: 0,
            newest_used: 0,
            total: 0,
            head_start_ms: NEVER,
            newest_ms: NEVER,
        }
    }
}

impl<C: Cells> Window for BucketState<C> {
    type Config = BucketQuota;

    #[inline]
    fn limit(config: &BucketQuota) -> u64 {
        config.limit()
    }

    #[inline]
    fn newest_ms(&self) -> i64 {
        self.newest_ms
    }

    #[inline]
    fn advance(&mut self, config: &BucketQuota, now_ms: i64) {
        let oldest_before = self.oldest_age(config);
        self.newest_ms = now_ms;
        if self.total == 0 {
            // Nothing to expire (and perhaps no real head time yet): just place the head.
            self.head_start_ms = now_ms - now_ms.rem_euclid(config.bucket_ms);
            return;
        }
        let since_head = now_ms - self.head_start_ms;
        let steps = if since_head < config.bucket_ms {
            0
        } else {
            since_head / config.bucket_ms
        };
        self.head_start_ms += steps * config.bucket_ms;
        let len = self.counts.len();
        if steps >= len as i64 {
            self.counts.clear();
            self.total = 0;
            return;
        }
        // Ages (counted before the move) that the moved window no longer holds.
        let oldest_after = self.oldest_age(config) as i64 - steps;
        for age in (oldest_after + 1).max(0) as usize..=oldest_before {
            let slot = self.slot(age);
            self.total = self.total.saturating_sub(self.counts.get(slot));
            self.counts.set(slot, 0);
        }
        self.head += steps as usize;
        if self.head >= len {
            self.head -= len;
        }
    }

    #[inline]
    fn used(&self, _: &BucketQuota) -> u64 {
        self.total
    }

    #[inline]
    fn record(&mut self, _: &BucketQuota, cost: u64) {
        let head = self.counts.get(self.head);
        self.counts.set(self.head, head.saturating_add(cost));
        self.total = self.total.saturating_add(cost);
        self.newest_used = self.head;
    }

    /// From the stamp's bucket, then older ones: a bucket cannot tell when in it cost came.
    #[inline]
    fn unrecord_at(&mut self, config: &BucketQuota, stamp_ms: i64, mut cost: u64) {
        if self.total == 0 {
            return; // the head may not be placed: nothing to give back anyway
        }
        let Some(stamp_age) = self.stamp_age(config, stamp_ms) else {
            return;
        };
        for age in stamp_age..=self.oldest_age(config) {
            let slot = self.slot(age);
            let count = self.counts.get(slot);
            let taken = cost.min(count);
            self.counts.set(slot, count - taken);
            self.total = self.total.saturating_sub(taken);
            cost -= taken;
        }
        self.newest_used = self.newest_used_slot(config);
    }

    /// Into the stamp's bucket (a reservation's), or when other calls' give-backs emptied it,
    /// the oldest later one holding cost, else the newest that does, as a log's entries (a
    /// store keeping only the buckets that hold cost, Redis's, finds the same one).
    fn owe_at(&mut self, config: &BucketQuota, stamp_ms: i64, cost: u64) {
        let Some(stamp_age) = self.stamp_age(config, stamp_ms) else {
            return;
        };
        let holding = (0..=stamp_age)
            .rev()
            .find(|&age| self.counts.get(self.slot(age)) > 0);
        let slot = match holding {
            Some(age) => self.slot(age),
            None if self.total > 0 => self.newest_used,
            None => self.slot(stamp_age),
        };
        self.counts
            .set(slot, self.counts.get(slot).saturating_add(cost));
        self.total = self.total.saturating_add(cost);
        self.newest_used = self.newest_used_slot(config);
    }

    #[inline]
    fn wait_ms(&self, config: &BucketQuota, at_most: u64) -> u64 {
        let need = self.total - at_most;
        let mut freed = 0u64;
        for age in (0..=self.oldest_age(config)).rev() {
            freed = freed.saturating_add(self.counts.get(self.slot(age)));
            if freed >= need {
                return self.expires_in(config, age);
            }
        }
        self.reset_after_ms(config)
    }

    #[inline]
    fn reset_after_ms(&self, config: &BucketQuota) -> u64 {
        if self.total == 0 {
            return 0;
        }
        self.expires_in(config, self.age(self.newest_used))
    }

    #[inline]
    fn heap_bytes(&self) -> usize {
        self.counts.heap_bytes()
    }
}

#[cfg(feature = "serde")]
crate::window::serde_via_raw!(BucketState, RawBucketState);

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

/// A bucket snapshot as serde reads and writes it: counts oldest bucket first, the newest
/// bucket's start (the total is recomputed on reading).
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct RawBucketState {
    newest_ms: i64,
    head_start_ms: i64,
    counts: alloc::vec::Vec<u64>,
}

#[cfg(feature = "serde")]
impl From<BucketState> for RawBucketState {
    fn from(state: BucketState) -> Self {
        let oldest_first = (0..state.counts.len())
            .rev()
            .map(|age| state.counts[state.slot(age)]);
        let counts = oldest_first.collect();
        Self {
            newest_ms: state.newest_ms,
            head_start_ms: state.head_start_ms,
            counts,
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<RawBucketState> for BucketState {
    type Error = Error;
    fn try_from(raw: RawBucketState) -> Result<Self, Error> {
        use crate::window::check_newest;
        let newest_ms = check_newest(raw.newest_ms)?;
        let head_start_ms = check_newest(raw.head_start_ms)?;
        if head_start_ms > newest_ms {
            let expected = "not after newest_ms";
            return Err(Error::invalid(
                "head_start_ms",
                expected,
                Value::Int(head_start_ms),
            ));
        }
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
            Value::UInt(u64::MAX),
        ))?;
        if total > 0 && head_start_ms == NEVER {
            let expected = "a time when counts hold cost";
            return Err(Error::invalid("head_start_ms", expected, Value::Int(NEVER)));
        }
        let head = raw.counts.len() - 1;
        let newest_used = raw.counts.iter().rposition(|&c| c > 0).unwrap_or(head);
        Ok(Self {
            counts: raw.counts.into_boxed_slice(),
            head,
            newest_used,
            total,
            head_start_ms,
            newest_ms,
        })
    }
}
