//! The keyed store over the real limiters: the same answers as one limiter per key while the
//! keys fit, exact memory accounting for limiters that own heap, and the bound under floods.

mod common;

use common::{keyed_ops as ops, KeyedOp as Op};
use proptest::prelude::*;
use slidewin::{
    BucketQuota, BucketWindow, Keyed, Limiter, Quota, ShardedKeyed, SlidingCounter, SlidingLog,
};
use std::collections::HashMap;

/// Replay `ops` on a store (room for every key) and on a map of single-key limiters; every
/// answer must be equal.
fn agrees_with_one_limiter_per_key<L: Limiter>(
    config: L::Config,
    ops: &[(Op, i64)],
) -> Result<(), TestCaseError> {
    let mut keyed: Keyed<L, u16> = Keyed::new(config.clone(), 40).unwrap();
    let mut model: HashMap<u16, L> = HashMap::new();
    let new_limiter = || L::from_config(config.clone());
    let mut now_ms = 1_000_000;
    for (op, step_ms) in ops {
        now_ms += step_ms;
        match *op {
            Op::Check(key, cost) => {
                prop_assert_eq!(
                    keyed.check_at(&key, now_ms, cost),
                    model
                        .entry(key)
                        .or_insert_with(new_limiter)
                        .check_at(now_ms, cost)
                )
            }
            Op::Peek(key, cost) => {
                prop_assert_eq!(
                    keyed.peek_at(&key, now_ms, cost),
                    model
                        .entry(key)
                        .or_insert_with(new_limiter)
                        .peek_at(now_ms, cost)
                )
            }
            Op::Uncommit(key, cost) => prop_assert_eq!(
                keyed.uncommit_at(&key, now_ms, cost),
                model
                    .entry(key)
                    .or_insert_with(new_limiter)
                    .uncommit_at(now_ms, cost)
            ),
            Op::Reset(key) => {
                keyed.reset(&key);
                model.entry(key).or_insert_with(new_limiter).reset();
            }
        }
    }
    prop_assert_eq!(keyed.stats().evictions, 0);
    Ok(())
}

proptest! {
    #[test]
    fn sliding_log_per_key(ops in ops()) {
        agrees_with_one_limiter_per_key::<SlidingLog>(Quota::new(10, 1_000).unwrap(), &ops)?;
    }

    #[test]
    fn sliding_counter_per_key(ops in ops()) {
        agrees_with_one_limiter_per_key::<SlidingCounter>(Quota::new(10, 1_000).unwrap(), &ops)?;
    }

    #[test]
    fn bucket_window_per_key(ops in ops()) {
        agrees_with_one_limiter_per_key::<BucketWindow>(BucketQuota::new(10, 1_000, 100).unwrap(), &ops)?;
    }
}

#[test]
fn bytes_estimate_follows_the_heap_limiter_states_own() {
    let quota = Quota::new(1_000, 60_000).unwrap();
    let mut keyed = Keyed::<SlidingLog>::new(quota, 10).unwrap();
    let mut model = SlidingLog::from_config(quota);
    keyed.check_at(&1, 0, 1).unwrap();
    model.check_at(0, 1).unwrap();
    let (one_entry, one_heap) = (
        keyed.bytes_estimate(),
        SlidingLog::heap_bytes(model.state()),
    );
    for t in 1..100 {
        keyed.check_at(&1, t, 1).unwrap();
        model.check_at(t, 1).unwrap();
    }
    let grown_heap = SlidingLog::heap_bytes(model.state());
    assert!(
        grown_heap >= 100 * 16,
        "the log holds 100 entries: {grown_heap} bytes"
    );
    assert_eq!(keyed.bytes_estimate() - one_entry, grown_heap - one_heap);
    keyed.reset(&1);
    assert_eq!(keyed.bytes_estimate(), one_entry - one_heap);
}

#[test]
fn a_flood_of_new_keys_does_not_push_out_idle_space_first() {
    // 10,000 slots: 5,000 keys active now, 5,000 whose windows have emptied. A flood of
    // 5,000 new keys takes the idle keys' slots and evicts nobody.
    let quota = Quota::new(100, 1_000).unwrap();
    let mut keyed = Keyed::<SlidingCounter>::new(quota, 10_000).unwrap();
    for key in 0..5_000_u64 {
        keyed.check_at(&key, 0, 1).unwrap();
    }
    for key in 5_000..10_000_u64 {
        keyed.check_at(&key, 5_000, 7).unwrap();
    }
    for key in 1_000_000..1_005_000_u64 {
        keyed.check_at(&key, 5_500, 1).unwrap();
    }
    let stats = keyed.stats();
    assert_eq!(
        (stats.keys, stats.reclaimed, stats.evictions),
        (10_000, 5_000, 0)
    );
    for key in 5_000..10_000_u64 {
        assert_eq!(
            keyed.peek_at(&key, 5_500, 0).unwrap().remaining,
            93,
            "key {key}"
        );
    }
}

#[test]
fn sharded_store_under_two_threads_admits_exactly_the_limit() {
    let quota = Quota::new(500, 1_000).unwrap();
    let keyed = ShardedKeyed::<SlidingLog, String>::new(quota, 1_000, 8).unwrap();
    let admitted: usize = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    (0..2_000_i64)
                        .filter(|&i| keyed.check_at("shared", i / 100, 1).unwrap().allowed)
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    // Both threads' clocks stay inside one 1000 ms window: exactly 500 of 4,000 calls fit.
    assert_eq!(admitted, 500);
    assert_eq!(keyed.stats().allowed, 500);
    assert_eq!(keyed.stats().rejected, 3_500);
}
