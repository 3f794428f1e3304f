//! `SlidingLog` against the naive exact model, and its documented behaviour.

mod common;

use common::{max_in_any_window, replay, steps, Counting, Model};
use proptest::prelude::*;
use slidewin::{Limiter, ManualClock, SlidingLog};

proptest! {
    #[test]
    fn agrees_with_the_exact_model_and_never_exceeds_the_limit(
        limit in 1..=20u64,
        window_ms in 1..=50i64,
        start_ms in -200..=200i64,
        trace in steps(20, 50, true),
    ) {
        let mut limiter = SlidingLog::new(limit, window_ms).unwrap();
        let mut model = Model::new(limit, window_ms, Counting::Exact);
        replay(&mut limiter, &mut model, start_ms, &trace, |now, got, want, _| {
            assert_eq!(got, want, "at {now}");
        });
        prop_assert!(max_in_any_window(&model.admitted, window_ms) <= limit);
        prop_assert!(limiter.state().len() as u64 <= limit.min(window_ms as u64));
    }
}

#[test]
fn a_burst_in_one_millisecond_is_one_entry() {
    let mut limiter = SlidingLog::new(10_000, 1_000).unwrap();
    let admitted = (0..10_000)
        .filter(|_| limiter.check_at(7, 1).unwrap().allowed)
        .count();
    assert_eq!(admitted, 10_000);
    assert_eq!(limiter.state().len(), 1);
    let refused = limiter.check_at(7, 1).unwrap();
    assert_eq!(
        (refused.allowed, refused.remaining, refused.retry_after_ms),
        (false, 0, Some(1_000))
    );
    assert!(limiter.check_at(1_007, 10_000).unwrap().allowed);
}

#[test]
fn clock_stepping_back_reads_as_the_newest_time() {
    let clock = ManualClock::new(5_000);
    let mut limiter = SlidingLog::new(10, 1_000).unwrap();
    assert!(limiter.check(&clock, 6).unwrap().allowed);
    clock.set(5_900);
    assert!(limiter.check(&clock, 4).unwrap().allowed);
    clock.set(-100_000); // far back: a reset here would admit another full window
    let refused = limiter.check(&clock, 1).unwrap();
    assert!(!refused.allowed);
    assert_eq!(
        (refused.retry_after_ms, refused.reset_after_ms),
        (Some(100), 1_000)
    );
    // Recorded at 5900 (the newest time), not at -100000: nothing is lost when the clock returns.
    assert!(limiter.check_at(6_000, 6).unwrap().allowed);
    assert!(!limiter.check_at(6_000, 1).unwrap().allowed);
}

#[test]
fn remaining_retry_and_reset_are_exact() {
    let mut limiter = SlidingLog::new(10, 100).unwrap();
    limiter.check_at(0, 3).unwrap();
    limiter.check_at(10, 3).unwrap();
    let d = limiter.check_at(20, 3).unwrap();
    assert_eq!(
        (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
        (true, 1, Some(0), 100)
    );
    // 5 needs 4 freed: the entries at 0 and 10 must leave, at 100 and 110.
    let d = limiter.peek_at(30, 5).unwrap();
    assert_eq!(
        (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms),
        (false, 1, Some(80), 90)
    );
    assert_eq!(limiter.check_at(30, 11).unwrap().retry_after_ms, None);
    limiter.uncommit_at(30, 4).unwrap(); // gives back the newest: all of 20, 1 of 10
    assert_eq!(limiter.peek_at(30, 5).unwrap().remaining, 0);
    limiter.reset();
    assert!(limiter.state().is_empty());
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let err = |r: Result<SlidingLog, slidewin::Error>| r.unwrap_err().to_string();
    assert_eq!(
        err(SlidingLog::new(0, 1)),
        "limit must be a positive integer, got 0"
    );
    assert_eq!(
        err(SlidingLog::new(1, -5)),
        "window_ms must be a positive integer, got -5"
    );
    assert_eq!(
        err(SlidingLog::new(1, 1 << 53)),
        "window_ms must be at most 2^52, got 9007199254740992"
    );
    let mut limiter = SlidingLog::new(u64::MAX, 1 << 52).unwrap();
    assert_eq!(
        limiter.check_at(i64::MIN, 1).unwrap_err().to_string(),
        "now_ms must be between -2^53 and 2^53, got -9223372036854775808"
    );
    // Costs as large as the type: no overflow, exact answers.
    assert!(limiter.check_at(1 << 53, u64::MAX - 1).unwrap().allowed);
    let d = limiter.check_at(1 << 53, 2).unwrap();
    assert_eq!(
        (d.allowed, d.remaining, d.retry_after_ms),
        (false, 1, Some(1 << 52))
    );
    assert_eq!(
        slidewin::arg::uint("cost", 1e20).unwrap_err().to_string(),
        "cost must be a non-negative integer, got 100000000000000000000"
    );
}
