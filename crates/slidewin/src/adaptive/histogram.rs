//! Latency histogram buckets (integer ms): exact below 16 ms, then 8 buckets per power of two
//! (at most 6.25% wide), the last one open (about 18 minutes and more). Counts are plain
//! arrays, so many processes can add to one in shared memory and one reads the quantiles.
//!
//! ```
//! use slidewin::adaptive::{bucket_of, quantile, BUCKETS};
//! let mut counts = [0u64; BUCKETS];
//! for ms in [10, 10, 10, 40, 400] { counts[bucket_of(ms)] += 1; }
//! assert_eq!(quantile(&counts, 0.5), Some(10.0));
//! assert!((quantile(&counts, 0.99).unwrap() - 400.0).abs() <= 400.0 * 0.04);
//! ```

const EXACT: u64 = 16;
const SUB: u64 = 8;
const LAST_POWER: u32 = 20;

/// Buckets of a histogram.
pub const BUCKETS: usize = (EXACT + (LAST_POWER as u64 - 4 + 1) * SUB) as usize;

/// The bucket of a latency of `ms`.
pub fn bucket_of(ms: u64) -> usize {
    if ms < EXACT {
        return ms as usize;
    }
    let power = (63 - ms.leading_zeros()).min(LAST_POWER);
    let sub = if power == LAST_POWER && ms >> power > 1 {
        SUB - 1
    } else {
        (ms >> (power - 3)) & (SUB - 1)
    };
    (EXACT + (power as u64 - 4) * SUB + sub) as usize
}

/// The latency a bucket stands for: its value when exact, else its middle.
pub fn bucket_value(bucket: usize) -> f64 {
    let b = bucket as u64;
    if b < EXACT {
        return b as f64;
    }
    let (power, sub) = ((b - EXACT) / SUB + 4, (b - EXACT) % SUB);
    let width = 1u64 << (power - 3);
    ((SUB + sub) * width) as f64 + (width as f64 - 1.0) / 2.0
}

/// The `q` quantile (0..=1) of the counts: the value of the bucket holding the request at
/// rank `ceil(q x total)`; `None` when they count nothing.
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (libm::ceil(q.clamp(0.0, 1.0) * total as f64) as u64).max(1);
    let mut seen = 0;
    counts
        .iter()
        .position(|&n| {
            seen += n;
            seen >= rank
        })
        .map(bucket_value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_latency_falls_in_a_bucket_whose_value_is_within_a_sixteenth() {
        let mut last = 0;
        for ms in 0..3_000_000u64 {
            let b = bucket_of(ms);
            assert!(b < BUCKETS && b >= last, "{ms} -> {b}");
            last = b;
            if ms < 1 << 21 {
                let v = bucket_value(b);
                assert!((v - ms as f64).abs() <= ms as f64 / 16.0, "{ms} -> {v}");
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }
}
