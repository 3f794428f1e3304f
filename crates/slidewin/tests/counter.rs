//! `SlidingCounter` against the naive two-fixed-window model, and its documented behaviour.

mod common;

use common::{replay, steps, Counting, Model};
use proptest::prelude::*;
use slidewin::{CounterState, Limiter, ManualClock, SlidingCounter};

proptest! {
    #[test]
    fn agrees_with_the_two_window_model(
        limit in 1..=20u64,
        window_ms in 1..=50i64,
        start_ms in -200..=200i64,
        trace in steps(20, 50, true),
    ) {
        let mut limiter = SlidingCounter::new(limit, window_ms).unwrap();
        let mut model = Model::new(limit, window_ms, Counting::TwoWindows);
        replay(&mut limiter, &mut model, start_ms, &trace, |now, got, want, _| {
            assert_eq!(got, want, "at {now}");
        });
    }
}

#[test]
fn state_fits_the_keyed_store_budget() {
    assert_eq!(core::mem::size_of::<CounterState>(), 24);
    let limiter = SlidingCounter::new(10, 1_000).unwrap();
    assert_eq!(SlidingCounter::heap_bytes(limiter.state()), 0);
}

#[test]
fn clock_stepping_back_reads_as_the_newest_time() {
    let clock = ManualClock::new(5_500);
    let mut limiter = SlidingCounter::new(10, 1_000).unwrap();
    assert!(limiter.check(&clock, 10).unwrap().allowed);
    clock.set(3_000); // two windows back: a reset here would admit another 10
    let refused = limiter.check(&clock, 1).unwrap();
    assert!(!refused.allowed);
    // Read at 5500: the next window weighs 10 · (1000 - e)/1000, <= 9 from e = 100 (t = 6100).
    assert_eq!(refused.retry_after_ms, Some(600));
    assert_eq!(refused.reset_after_ms, 1_500);
}

#[test]
fn peek_uncommit_and_reset() {
    let mut limiter = SlidingCounter::new(10, 1_000).unwrap();
    let peeked = limiter.peek_at(0, 4).unwrap();
    assert_eq!(
        (peeked.allowed, peeked.remaining, peeked.reset_after_ms),
        (true, 6, 0)
    );
    assert_eq!(limiter.check_at(0, 4).unwrap().remaining, 6);
    limiter.uncommit_at(1, 3).unwrap();
    assert_eq!(limiter.state().current(), 1);
    limiter.reset();
    assert_eq!(limiter.check_at(2, 10).unwrap().remaining, 0);
    assert_eq!(limiter.check_at(2, 11).unwrap().retry_after_ms, None);
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let err = |r: Result<SlidingCounter, slidewin::Error>| r.unwrap_err().to_string();
    assert_eq!(
        err(SlidingCounter::new(0, 1_000)),
        "limit must be a positive integer, got 0"
    );
    assert_eq!(
        err(SlidingCounter::new(1, 0)),
        "window_ms must be a positive integer, got 0"
    );
    let mut limiter = SlidingCounter::new(1, 1_000).unwrap();
    for t in [i64::MIN, i64::MAX, (1 << 53) + 1] {
        assert_eq!(
            limiter.check_at(t, 1).unwrap_err().to_string(),
            format!("now_ms must be between -2^53 and 2^53, got {t}")
        );
    }
    assert!(limiter.check_at(1 << 53, u64::MAX).is_ok());
    assert!(limiter.check_at(-(1 << 53), 1).is_ok());
}
