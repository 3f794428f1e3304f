//! The boundary burst: 100 per 1000 ms, 100 requests at t = 999 and 100 at t = 1001. A fixed
//! window would admit all 200 within 2 ms.

mod common;

use common::max_in_any_window;
use slidewin::{BucketWindow, Limiter, SlidingCounter, SlidingLog};

/// Offer `n` calls of cost 1 at each time; return every admitted `(ms, 1)`.
fn offer(limiter: &mut impl Limiter, bursts: &[(i64, usize)]) -> Vec<(i64, u64)> {
    let mut admitted = Vec::new();
    for &(t, n) in bursts {
        for _ in 0..n {
            if limiter.check_at(t, 1).unwrap().allowed {
                admitted.push((t, 1));
            }
        }
    }
    admitted
}

fn count_at(admitted: &[(i64, u64)], t: i64) -> usize {
    admitted.iter().filter(|e| e.0 == t).count()
}

const BOUNDARY: [(i64, usize); 2] = [(999, 100), (1_001, 100)];

#[test]
fn sliding_log_admits_at_most_the_limit_in_any_window() {
    let admitted = offer(&mut SlidingLog::new(100, 1_000).unwrap(), &BOUNDARY);
    assert_eq!(
        (count_at(&admitted, 999), count_at(&admitted, 1_001)),
        (100, 0)
    );
    assert_eq!(max_in_any_window(&admitted, 1_000), 100);
}

#[test]
fn bucket_window_admits_at_most_the_limit_in_any_window() {
    for bucket_ms in [1, 10, 100, 500, 1_000] {
        let admitted = offer(
            &mut BucketWindow::new(100, 1_000, bucket_ms).unwrap(),
            &BOUNDARY,
        );
        assert_eq!(
            (count_at(&admitted, 999), count_at(&admitted, 1_001)),
            (100, 0)
        );
        assert_eq!(
            max_in_any_window(&admitted, 1_000),
            100,
            "bucket_ms {bucket_ms}"
        );
    }
}

#[test]
fn the_log_and_buckets_admit_again_once_the_burst_leaves() {
    let bursts = [(999, 100), (1_001, 100), (1_998, 100), (1_999, 100)];
    let log = offer(&mut SlidingLog::new(100, 1_000).unwrap(), &bursts);
    assert_eq!((count_at(&log, 1_998), count_at(&log, 1_999)), (0, 100));
    // Bucket [900, 1000) counts until its last ms (999) leaves: 1999, as the log.
    let buckets = offer(&mut BucketWindow::new(100, 1_000, 100).unwrap(), &bursts);
    assert_eq!(
        (count_at(&buckets, 1_998), count_at(&buckets, 1_999)),
        (0, 100)
    );
}

#[test]
fn sliding_counter_refuses_the_boundary_burst_but_over_admits_a_late_one() {
    let bursts = [(999, 100), (1_001, 100), (1_998, 100)];
    let admitted = offer(&mut SlidingCounter::new(100, 1_000).unwrap(), &bursts);
    assert_eq!(
        (count_at(&admitted, 999), count_at(&admitted, 1_001)),
        (100, 0)
    );
    // At 1998 the burst at 999 weighs ceil(100 · 2/1000) = 1: 99 more, 199 in (998, 1998].
    assert_eq!(count_at(&admitted, 1_998), 99);
    assert_eq!(max_in_any_window(&admitted, 1_000), 199);
}

/// `is_idle` turns true exactly when `reset_after_ms` says the window is empty.
fn idle_when_reset_says<L: Limiter>(mut limiter: L) {
    let d = limiter.check_at(1_000, 1).unwrap();
    let (config, state) = limiter.parts_mut();
    let empty_at = 1_000 + d.reset_after_ms as i64;
    assert!(!L::is_idle(config, state, empty_at - 1));
    assert!(
        !L::is_idle(config, state, 0),
        "a clock stepped back reads as the newest time"
    );
    assert!(L::is_idle(config, state, empty_at));
    assert!(L::is_idle(config, state, i64::MAX));
}

#[test]
fn idle_exactly_when_the_window_is_empty() {
    idle_when_reset_says(SlidingLog::new(10, 1_000).unwrap());
    idle_when_reset_says(BucketWindow::new(10, 1_000, 100).unwrap());
    idle_when_reset_says(SlidingCounter::new(10, 1_000).unwrap());
    let mut fresh = SlidingLog::new(10, 1_000).unwrap();
    let (config, state) = fresh.parts_mut();
    assert!(SlidingLog::is_idle(config, state, 0));
}
