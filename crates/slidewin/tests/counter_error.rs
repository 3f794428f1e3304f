//! How far `SlidingCounter` strays from the exact `SlidingLog` on bursty random traffic (the
//! figures quoted in the `counter` module docs).

mod common;

use common::max_in_any_window;
use slidewin::{Limiter, SlidingCounter, SlidingLog};

/// A small deterministic generator (xorshift64*), so the trace and the figures are fixed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

/// Bursts of 1 to 150 calls, each burst within 5 ms, bursts 0 to 1.5 windows apart: ten
/// minutes of traffic offered to 100 per 1000 ms.
fn bursty_trace() -> Vec<i64> {
    let mut rng = Rng(0x5eed);
    let mut calls = Vec::new();
    let mut t = 0;
    while t < 600_000 {
        t += rng.below(1_500) as i64;
        for _ in 0..1 + rng.below(150) {
            calls.push(t + rng.below(5) as i64);
        }
    }
    calls.sort();
    calls
}

fn admitted(limiter: &mut impl Limiter, calls: &[i64]) -> Vec<(i64, u64)> {
    calls
        .iter()
        .filter(|&&t| limiter.check_at(t, 1).unwrap().allowed)
        .map(|&t| (t, 1))
        .collect()
}

/// How many admitted calls found more than `limit` in the window ending at them.
fn over_limit(admitted: &[(i64, u64)], window_ms: i64, limit: usize) -> usize {
    let mut oldest = 0;
    let mut over = 0;
    for (i, &(t, _)) in admitted.iter().enumerate() {
        while admitted[oldest].0 <= t - window_ms {
            oldest += 1;
        }
        over += usize::from(i + 1 - oldest > limit);
    }
    over
}

#[test]
fn over_admission_on_a_bursty_trace_is_bounded_and_measured() {
    let calls = bursty_trace();
    let exact = admitted(&mut SlidingLog::new(100, 1_000).unwrap(), &calls);
    let estimated = admitted(&mut SlidingCounter::new(100, 1_000).unwrap(), &calls);
    let worst = max_in_any_window(&estimated, 1_000);
    let over = over_limit(&estimated, 1_000, 100);
    eprintln!(
        "{} calls; log admitted {}, counter {} ({over} over the limit); most in one window {worst}",
        calls.len(),
        exact.len(),
        estimated.len()
    );
    assert_eq!(max_in_any_window(&exact, 1_000), 100);
    assert!(worst < 200, "the documented bound is under 2 · limit");
    assert_eq!(
        (calls.len(), exact.len(), estimated.len(), over, worst),
        (58_039, 33_337, 33_952, 3_813, 187)
    );
}
