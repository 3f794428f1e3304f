//! `BucketWindow` against the exact model fed with the buckets' own admissions: never more
//! admitted, at most one bucket late in every answer.

mod common;

use common::{max_in_any_window, steps, Counting, Model, Op};
use proptest::prelude::*;
use slidewin::{BucketQuota, BucketWindow, Limiter, ManualClock};

/// `got` lies in `exact..exact + slack`.
fn within(got: u64, exact: u64, slack: u64) -> bool {
    exact <= got && got <= exact + slack
}

proptest! {
    #[test]
    fn is_never_less_conservative_than_the_exact_model(
        limit in 1..=20u64,
        buckets in 1..=8i64,
        bucket_ms in 1..=8i64,
        start_ms in -200..=200i64,
        trace in steps(20, 64, true),
    ) {
        let window_ms = buckets * bucket_ms;
        let late = bucket_ms as u64 - 1;
        let mut limiter = BucketWindow::new(limit, window_ms, bucket_ms).unwrap();
        let mut exact = Model::new(limit, window_ms, Counting::Exact);
        let mut now = start_ms;
        for step in &trace {
            now += step.gap_ms;
            let (cost, commit) = match step.op {
                Op::Check(cost) => (cost, true),
                Op::Peek(cost) => (cost, false),
                Op::Refund(cost) => {
                    limiter.uncommit_at(now, cost).unwrap();
                    exact.refund(now, cost);
                    continue;
                }
            };
            let got = if commit { limiter.check_at(now, cost) } else { limiter.peek_at(now, cost) };
            let got = got.unwrap();
            let want = exact.decide(now, cost, false);
            prop_assert!(!got.allowed || want.allowed, "at {now}: {got:?} {want:?}");
            // `remaining` counts the cost only when allowed: compare the room before the call.
            let room = |d: slidewin::Decision| d.remaining + if d.allowed { cost } else { 0 };
            prop_assert!(room(got) <= room(want), "at {now}: {got:?} {want:?}");
            match (got.retry_after_ms, want.retry_after_ms) {
                (Some(g), Some(w)) => prop_assert!(within(g, w, late), "at {now}: {got:?} {want:?}"),
                (g, w) => prop_assert_eq!(g, w),
            }
            if got.allowed && commit && cost > 0 {
                exact.admit(cost);
            }
            let reset_after_ms = exact.reset_after_ms();
            prop_assert!(within(got.reset_after_ms, reset_after_ms, late), "at {now}: {got:?}");
        }
        prop_assert!(max_in_any_window(&exact.admitted, window_ms) <= limit);
    }
}

#[test]
fn memory_is_fixed_by_the_config() {
    let mut limiter = BucketWindow::new(1_000, 1_000, 10).unwrap();
    let bytes = BucketWindow::heap_bytes(limiter.state());
    assert_eq!(bytes, 101 * 8);
    for t in 0..5_000 {
        limiter.check_at(t, 1).unwrap();
    }
    assert_eq!(BucketWindow::heap_bytes(limiter.state()), bytes);
}

#[test]
fn refuses_at_most_one_bucket_early() {
    let mut limiter = BucketWindow::new(2, 100, 10).unwrap();
    limiter.check_at(0, 1).unwrap(); // bucket [0, 10): counted until 109, the log until 100
    limiter.check_at(50, 1).unwrap();
    let d = limiter.check_at(100, 1).unwrap();
    assert_eq!(
        (d.allowed, d.retry_after_ms, d.reset_after_ms),
        (false, Some(9), 59)
    );
    assert!(limiter.check_at(109, 1).unwrap().allowed);
}

#[test]
fn clock_stepping_back_reads_as_the_newest_time() {
    let clock = ManualClock::new(10_000);
    let mut limiter = BucketWindow::new(5, 1_000, 100).unwrap();
    assert!(limiter.check(&clock, 5).unwrap().allowed);
    clock.set(0);
    let refused = limiter.check(&clock, 1).unwrap();
    assert_eq!(
        (refused.allowed, refused.retry_after_ms),
        (false, Some(1_099))
    );
    assert_eq!(limiter.state().total(), 5);
}

#[test]
fn peek_uncommit_and_reset() {
    let mut limiter = BucketWindow::new(10, 100, 10).unwrap();
    assert_eq!(limiter.peek_at(5, 4).unwrap().remaining, 6);
    assert_eq!(limiter.state().total(), 0);
    limiter.check_at(5, 4).unwrap();
    limiter.check_at(25, 4).unwrap();
    limiter.uncommit_at(30, 5).unwrap(); // all of bucket 2, then 1 of bucket 0
    assert_eq!(limiter.state().total(), 3);
    assert_eq!(limiter.peek_at(30, 0).unwrap().reset_after_ms, 79);
    limiter.reset();
    assert_eq!(limiter.state().total(), 0);
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let err = |r: Result<BucketQuota, slidewin::Error>| r.unwrap_err().to_string();
    assert_eq!(
        err(BucketQuota::new(0, 1_000, 10)),
        "limit must be a positive integer, got 0"
    );
    assert_eq!(
        err(BucketQuota::new(1, 0, 10)),
        "window_ms must be a positive integer, got 0"
    );
    assert_eq!(
        err(BucketQuota::new(1, 1_000, 0)),
        "bucket_ms must be a positive integer, got 0"
    );
    assert_eq!(
        err(BucketQuota::new(1, 1_000, -10)),
        "bucket_ms must be a positive integer, got -10"
    );
    assert_eq!(
        err(BucketQuota::new(1, 1_000, 7)),
        "bucket_ms must be a divisor of window_ms, got 7"
    );
    assert_eq!(
        err(BucketQuota::new(1, 1 << 20, 1)),
        "bucket_ms must be at least window_ms / 65536, got 1"
    );
    let mut limiter = BucketWindow::new(1, 1 << 16, 1).unwrap();
    assert_eq!(
        limiter.check_at(i64::MAX, 1).unwrap_err().to_string(),
        "now_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
    assert!(limiter.check_at(-(1 << 53), 1).unwrap().allowed);
    assert!(!limiter.check_at(1 << 53, 2).unwrap().allowed);
}
