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
    let (lower, width) = bucket_bounds(bucket);
    lower as f64 + (width as f64 - 1.0) / 2.0
}

/// A bucket's lowest latency and how many milliseconds it holds.
fn bucket_bounds(bucket: usize) -> (u64, u64) {
    let b = bucket as u64;
    if b < EXACT {
        return (b, 1);
    }
    let (power, sub) = ((b - EXACT) / SUB + 4, (b - EXACT) % SUB);
    let width = 1u64 << (power - 3);
    ((SUB + sub) * width, width)
}

/// The `q` quantile (0..=1) of the counts: the request at rank `ceil(q x total)`, placed
/// within its bucket by its rank there (as if the bucket's requests were spread evenly over
/// it; exact buckets and the open last one give their value); `None` when they count nothing.
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (libm::ceil(q.clamp(0.0, 1.0) * total as f64) as u64).max(1);
    let mut before = 0;
    for (bucket, &n) in counts.iter().enumerate() {
        if before + n >= rank {
            let (lower, width) = bucket_bounds(bucket);
            if width == 1 || bucket == BUCKETS - 1 {
                return Some(bucket_value(bucket));
            }
            let within = (rank - before) as f64 - 0.5;
            return Some(lower as f64 + width as f64 * within / n as f64);
        }
        before += n;
    }
    None
}

/// The mean and standard deviation of the counts (each bucket at its value); `None` when
/// they count nothing.
pub fn mean_and_sd(counts: &[u64]) -> Option<(f64, f64)> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let (mut sum, mut squares) = (0.0, 0.0);
    for (bucket, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
        let v = bucket_value(bucket);
        sum += v * n as f64;
        squares += v * v * n as f64;
    }
    let n = total as f64;
    let mean = sum / n;
    Some((mean, libm::sqrt((squares / n - mean * mean).max(0.0))))
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

    #[test]
    fn mean_and_sd_of_exact_buckets() {
        let mut counts = [0u64; BUCKETS];
        counts[bucket_of(4)] += 2;
        counts[bucket_of(8)] += 2;
        assert_eq!(mean_and_sd(&counts), Some((6.0, 2.0)));
        assert_eq!(mean_and_sd(&[0; BUCKETS]), None);
    }
}
