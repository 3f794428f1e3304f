use alloc::string::ToString;
use alloc::vec::Vec;

use super::*;
use crate::ManualClock;

fn controller(target_backlog: u64) -> QueueLimit {
    QueueLimit::new(QueueLimitConfig {
        target_backlog,
        ..QueueLimitConfig::default()
    })
    .unwrap()
}

fn at(processed: u64, backlog: u64) -> QueueSample {
    QueueSample { processed, backlog }
}

/// Producers offering `offered`/s through a rate limit (fluid: at most `limit` per second
/// admitted), one consumer finishing `consumer`/s while it has work, the controller asked
/// every `interval_ms` on a fake clock. Returns (admitted, processed, backlog) per second.
fn simulate(
    q: &mut QueueLimit,
    offered: f64,
    consumer: impl Fn(i64) -> f64,
    seconds: i64,
) -> Vec<(f64, f64, f64)> {
    const STEP_MS: i64 = 10;
    const INTERVAL_MS: i64 = 500;
    let clock = ManualClock::new(1_700_000_000_000);
    let (mut limit, mut backlog, mut processed) = (q.config().max_limit as f64, 0.0, 0.0);
    let mut per_second = Vec::new();
    let (mut admitted_s, mut processed_s) = (0.0, 0.0);
    for step in 1..=seconds * 1000 / STEP_MS {
        let t = step * STEP_MS;
        let admitted = (offered.min(limit) * STEP_MS as f64) / 1e3;
        let done = (consumer(t) * STEP_MS as f64 / 1e3).min(backlog + admitted);
        backlog += admitted - done;
        processed += done;
        admitted_s += admitted;
        processed_s += done;
        clock.advance(STEP_MS);
        if t % INTERVAL_MS == 0 {
            let sample = at(processed as u64, backlog.round() as u64);
            if let Some(next) = q.update(&clock, sample).unwrap() {
                limit = next as f64;
            }
        }
        if t % 1000 == 0 {
            per_second.push((admitted_s, processed_s, backlog));
            (admitted_s, processed_s) = (0.0, 0.0);
        }
    }
    per_second
}

#[test]
fn producers_follow_a_consumer_of_200_per_second_and_the_backlog_its_target() {
    let mut q = controller(200);
    let seconds = simulate(&mut q, 500.0, |_| 200.0, 30);
    for (s, &(admitted, _, backlog)) in seconds.iter().enumerate().skip(10) {
        assert!(
            (180.0..=220.0).contains(&admitted),
            "second {s}: admitted {admitted}"
        );
        assert!(
            (150.0..=250.0).contains(&backlog),
            "second {s}: backlog {backlog}"
        );
    }
    let rate = q.rate().unwrap();
    assert!((199.0..=201.0).contains(&rate), "rate {rate}");
}

#[test]
fn a_consumer_that_halves_then_doubles_is_followed() {
    let mut q = controller(200);
    let consumer = |t: i64| match t {
        0..=10_000 => 200.0,
        10_001..=25_000 => 100.0,
        _ => 400.0,
    };
    let seconds = simulate(&mut q, 1000.0, consumer, 40);
    let mean = |from: usize, to: usize| {
        seconds[from..to].iter().map(|s| s.0).sum::<f64>() / (to - from) as f64
    };
    let (slow, fast) = (mean(18, 25), mean(33, 40));
    assert!((90.0..=110.0).contains(&slow), "after halving: {slow}/s");
    assert!((360.0..=440.0).contains(&fast), "after doubling: {fast}/s");
    let backlog = seconds[39].2;
    assert!((150.0..=250.0).contains(&backlog), "backlog {backlog}");
}

#[test]
fn stopped_consumers_bring_the_limit_to_its_floor_and_a_restart_back() {
    let mut q = QueueLimit::new(QueueLimitConfig {
        target_backlog: 100,
        min_limit: 5,
        ..QueueLimitConfig::default()
    })
    .unwrap();
    let consumer = |t: i64| {
        if (10_000..20_000).contains(&t) {
            0.0
        } else {
            200.0
        }
    };
    let seconds = simulate(&mut q, 500.0, consumer, 35);
    let stopped = seconds[15..20].iter().map(|s| s.0).sum::<f64>() / 5.0;
    assert!((4.0..=6.0).contains(&stopped), "while stopped: {stopped}/s");
    let back = seconds[30..35].iter().map(|s| s.0).sum::<f64>() / 5.0;
    assert!(
        (180.0..=220.0).contains(&back),
        "after the restart: {back}/s"
    );
}

#[test]
fn idle_consumers_get_headroom_and_an_excess_is_drained() {
    let mut q = controller(100);
    assert_eq!(q.update_at(0, at(0, 0)).unwrap(), None);
    // 100/s with an empty queue: 100 x 1.5 + 100 x 1000 / 5000.
    assert_eq!(q.update_at(1_000, at(100, 0)).unwrap(), Some(170));
    let mut q = controller(100);
    q.update_at(0, at(0, 600)).unwrap();
    // 500 over the target, drained over 5 s: 100 below the rate of 200.
    assert_eq!(q.update_at(1_000, at(200, 600)).unwrap(), Some(100));
    // 2000 over: the limit cannot go under min_limit.
    assert_eq!(q.update_at(2_000, at(400, 2_100)).unwrap(), Some(1));
}

#[test]
fn a_queue_that_starts_afresh_or_a_clock_that_stands_keeps_the_rate_sound() {
    let mut q = controller(100);
    q.update_at(0, at(1_000, 100)).unwrap();
    assert_eq!(q.update_at(1_000, at(1_200, 100)).unwrap(), Some(200));
    // The same time again: no new rate sample, the same answer.
    assert_eq!(q.update_at(1_000, at(1_300, 100)).unwrap(), Some(200));
    // A time back is read as the newest seen: no rate from it either.
    assert_eq!(q.update_at(500, at(1_300, 100)).unwrap(), Some(200));
    // processed went back (a new group): no rate until the next sample.
    assert_eq!(q.update_at(2_000, at(10, 100)).unwrap(), None);
    assert_eq!(q.rate(), None);
    assert_eq!(q.update_at(3_000, at(60, 100)).unwrap(), Some(50));
}

#[test]
fn bad_configs_and_times_are_named() {
    let bad = |config: QueueLimitConfig| QueueLimit::new(config).unwrap_err().to_string();
    let d = QueueLimitConfig::default();
    assert_eq!(
        bad(QueueLimitConfig {
            target_backlog: 0,
            ..d
        }),
        "target_backlog must be a positive integer, got 0"
    );
    assert_eq!(
        bad(QueueLimitConfig { settle_ms: -5, ..d }),
        "settle_ms must be a positive integer, got -5"
    );
    assert_eq!(
        bad(QueueLimitConfig {
            rate_half_life_ms: 0,
            ..d
        }),
        "half_life_ms must be an integer in 1..=2^52, got 0"
    );
    assert_eq!(
        bad(QueueLimitConfig {
            headroom: f64::NAN,
            ..d
        }),
        "headroom must be a finite number >= 0, got NaN"
    );
    assert_eq!(
        bad(QueueLimitConfig {
            min_limit: 10,
            max_limit: 5,
            ..d
        }),
        "max_limit must be at least min_limit, got 5"
    );
    assert_eq!(
        controller(1)
            .update_at(i64::MAX, at(0, 0))
            .unwrap_err()
            .to_string(),
        "now_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
}
