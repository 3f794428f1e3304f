//! Store mechanics against a tiny fixed-window limiter (the real limiters are exercised in
//! `tests/keyed.rs`).

use super::*;
use crate::Quota;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use proptest::prelude::*;
use std::collections::HashMap;

/// Fixed windows starting at the first call: small enough to trust by reading.
struct Tally {
    config: Quota,
    state: TallyState,
}

#[derive(Debug, Clone, Copy, Default)]
struct TallyState {
    start_ms: i64,
    used: u64,
}

impl Limiter for Tally {
    type Config = Quota;
    type State = TallyState;

    fn new_state(_: &Quota) -> TallyState {
        TallyState::default()
    }

    fn decide(
        config: &Quota,
        state: &mut TallyState,
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error> {
        if cost > 1_000 {
            return Err(Error::invalid("cost", "at most 1000", Value::UInt(cost)));
        }
        if Self::is_idle(config, state, now_ms) {
            *state = TallyState {
                start_ms: now_ms,
                used: 0,
            };
        }
        let allowed = state.used + cost <= config.limit();
        if allowed && commit {
            state.used += cost;
        }
        Ok(Decision {
            allowed,
            limit: config.limit(),
            remaining: config.limit() - state.used,
            retry_after_ms: Some(0),
            reset_after_ms: (state.start_ms + config.window_ms() - now_ms) as u64,
            window: 0,
        })
    }

    fn amend(
        _: &Quota,
        state: &mut TallyState,
        _: i64,
        _: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        state.used = match amend {
            Amend::GiveBack(cost) => state.used.saturating_sub(cost),
            Amend::Owe(cost) => state.used.saturating_add(cost),
        };
        Ok(())
    }

    fn is_idle(config: &Quota, state: &TallyState, now_ms: i64) -> bool {
        state.used == 0 || now_ms >= state.start_ms + config.window_ms()
    }

    fn heap_bytes(_: &TallyState) -> usize {
        0
    }

    fn from_config(config: Quota) -> Self {
        Self {
            config,
            state: TallyState::default(),
        }
    }

    fn config(&self) -> &Quota {
        &self.config
    }

    fn parts_mut(&mut self) -> (&Quota, &mut TallyState) {
        (&self.config, &mut self.state)
    }
}

fn quota(limit: u64, window_ms: i64) -> Quota {
    Quota::new(limit, window_ms).unwrap()
}

fn store(limit: u64, max_keys: usize) -> Keyed<Tally> {
    Keyed::new(quota(limit, 1_000), max_keys).unwrap()
}

#[test]
fn a_million_keys_stay_within_max_keys_and_bounded_bytes() {
    let mut keyed = store(10, 10_000);
    let mut full_bytes = 0;
    for key in 0..1_000_000_u64 {
        assert!(keyed.check_at(&key, 0, 1).unwrap().allowed);
        assert!(keyed.len() <= 10_000);
        if key == 100_000 {
            full_bytes = keyed.bytes_estimate();
        }
    }
    let stats = keyed.stats();
    assert_eq!(
        (stats.keys, stats.evictions, stats.reclaimed),
        (10_000, 990_000, 0)
    );
    assert_eq!(keyed.bytes_estimate(), full_bytes, "no growth under churn");
    // 24 bytes of (key, state) per slot; the index's 4 + 1 bytes per bucket, at 32768 buckets
    // (churn leaves tombstones, so the index settles at twice the 16384 buckets it needs).
    assert!(
        full_bytes <= 10_000 * 24 + 32_768 * 5 + 3_000,
        "{full_bytes} bytes"
    );
}

#[test]
fn evictions_are_counted_and_spare_recently_used_keys() {
    let mut keyed = store(10, 3);
    for key in [1, 2, 3, 4] {
        keyed.check_at(&key, 0, 1).unwrap();
    }
    // Every key was used since the hand last passed, so it went round once: oldest out.
    assert_eq!(keyed.stats().evictions, 1);
    assert_eq!(
        keyed.peek_at(&1, 0, 1).unwrap().remaining,
        10,
        "1 was forgotten"
    );
    keyed.check_at(&2, 0, 1).unwrap();
    keyed.check_at(&5, 0, 1).unwrap();
    assert_eq!(keyed.stats().evictions, 2);
    assert_eq!(
        keyed.peek_at(&2, 0, 1).unwrap().remaining,
        8,
        "2 was used again: spared"
    );
    assert_eq!(
        keyed.peek_at(&3, 0, 1).unwrap().remaining,
        10,
        "3 was not: evicted"
    );
    assert_eq!(keyed.len(), 3);
}

#[test]
fn idle_keys_are_reclaimed_before_live_ones_are_evicted() {
    let mut keyed = store(10, 100);
    for key in 0..50_u64 {
        keyed.check_at(&key, 0, 1).unwrap(); // idle from t = 1000
    }
    for key in 50..100_u64 {
        keyed.check_at(&key, 500, 2).unwrap(); // live until t = 1500
    }
    for key in 1_000..1_050_u64 {
        keyed.check_at(&key, 1_000, 1).unwrap();
    }
    let stats = keyed.stats();
    assert_eq!((stats.keys, stats.reclaimed, stats.evictions), (100, 50, 0));
    for key in 50..100_u64 {
        assert_eq!(
            keyed.peek_at(&key, 1_000, 1).unwrap().remaining,
            8,
            "key {key} kept its window"
        );
    }
}

#[test]
fn the_clock_hand_takes_idle_keys_between_sweeps() {
    let mut keyed = store(10, 16);
    for key in 0..16_u64 {
        keyed.check_at(&key, 0, 1).unwrap();
    }
    keyed.check_at(&100, 0, 1).unwrap(); // full, nothing idle: the first sweep finds nothing
    assert_eq!(keyed.stats().evictions, 1);
    // Now all are idle, and fewer than max_keys / 8 = 2 keys came since the sweep.
    keyed.check_at(&101, 1_000, 1).unwrap();
    assert_eq!((keyed.stats().evictions, keyed.stats().reclaimed), (1, 1));
}

#[test]
fn keys_are_created_only_by_recording_calls() {
    let mut keyed = store(2, 10);
    assert!(keyed.peek_at(&1, 0, 1).unwrap().allowed);
    assert!(keyed.uncommit_at(&1, 0, 1).is_ok(), "nothing to refund");
    assert!(
        !keyed.check_at(&1, 0, 3).unwrap().allowed,
        "refused: nothing recorded"
    );
    assert!(keyed.check_at(&1, 0, 0).unwrap().allowed);
    assert_eq!(
        keyed.check_at(&1, 0, 5_000).unwrap_err().to_string(),
        "cost must be at most 1000, got 5000"
    );
    assert!(keyed.is_empty());
    assert_eq!(
        keyed.stats(),
        KeyedStats {
            keys: 0,
            evictions: 0,
            reclaimed: 0,
            allowed: 1,
            rejected: 1
        }
    );
}

#[test]
fn uncommit_and_reset_change_only_their_key() {
    let mut keyed = store(2, 10);
    keyed.check_at(&1, 0, 2).unwrap();
    keyed.check_at(&2, 0, 2).unwrap();
    keyed.uncommit_at(&1, 0, 1).unwrap();
    assert_eq!(keyed.peek_at(&1, 0, 1).unwrap().remaining, 1);
    keyed.reset(&2);
    assert_eq!(
        (keyed.len(), keyed.peek_at(&2, 0, 1).unwrap().remaining),
        (1, 2)
    );
}

#[test]
fn string_keys_are_looked_up_by_str() {
    let mut keyed: Keyed<Tally, String> = Keyed::new(quota(1, 1_000), 10).unwrap();
    assert!(keyed.check_at("alice", 0, 1).unwrap().allowed);
    assert!(!keyed.check_at("alice", 1, 1).unwrap().allowed);
    assert!(keyed.check_at("bob", 1, 1).unwrap().allowed);
    assert_eq!(keyed.len(), 2);
}

#[test]
fn bad_bounds_are_named() {
    let err = |r: Result<Keyed<Tally>, Error>| r.err().unwrap().to_string();
    assert_eq!(
        err(Keyed::new(quota(1, 1), 0)),
        "max_keys must be a positive integer below 2^32, got 0"
    );
    let sharded = |max_keys, shards| {
        ShardedKeyed::<Tally>::new(quota(1, 1), max_keys, shards)
            .err()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        sharded(10, 0),
        "shards must be between 1 and max_keys, got 0"
    );
    assert_eq!(
        sharded(10, 11),
        "shards must be between 1 and max_keys, got 11"
    );
    assert_eq!(
        sharded(0, 1),
        "max_keys must be a positive integer below 2^32, got 0"
    );
}

#[test]
fn sharded_store_is_shared_by_two_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ShardedKeyed<Tally>>();
    let keyed = ShardedKeyed::<Tally>::new(quota(100, 1_000), 1_000, 4).unwrap();
    let allowed: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2_u64)
            .map(|thread| {
                let keyed = &keyed;
                scope.spawn(move || {
                    let mut allowed = 0;
                    for i in 0..1_000_u64 {
                        // One key both threads share, and ten of the thread's own.
                        allowed += u64::from(keyed.check_at(&0, 0, 1).unwrap().allowed);
                        allowed += u64::from(
                            keyed
                                .check_at(&(thread * 100 + 1 + i % 10), 0, 1)
                                .unwrap()
                                .allowed,
                        );
                    }
                    allowed
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    // Each thread's own keys: 10 x 100. The shared key: 100 in all, however the threads raced.
    assert_eq!(allowed.iter().sum::<u64>(), 2 * 10 * 100 + 100);
    let stats = keyed.stats();
    assert_eq!(
        (stats.keys, stats.allowed, stats.rejected),
        (21, 2_100, 4_000 - 2_100)
    );
    assert_eq!(keyed.max_keys(), 1_000);
}

#[test]
fn sharded_bound_holds_over_all_shards() {
    let keyed = ShardedKeyed::<Tally>::new(quota(10, 1_000), 1_000, 7).unwrap();
    let mut full_bytes = 0;
    for key in 0..100_000_u64 {
        keyed.check_at(&key, 0, 1).unwrap();
        if key == 10_000 {
            full_bytes = keyed.bytes_estimate();
        }
    }
    assert_eq!(keyed.len(), 1_000);
    assert_eq!(keyed.stats().evictions, 99_000);
    assert_eq!(keyed.bytes_estimate(), full_bytes, "no growth under churn");
    // Per shard (at most 143 keys): 24-byte entries, 256 index slots, the bitset, the padded
    // lock; and the struct.
    assert!(
        full_bytes <= 7 * (143 * 24 + 256 * 4 + 64 + 256) + 1_000,
        "{full_bytes} bytes"
    );
}

#[derive(Debug, Clone)]
enum Op {
    Check(u8, u64),
    Peek(u8, u64),
    Uncommit(u8, u64),
    Reset(u8),
}

fn op() -> impl Strategy<Value = (Op, i64)> {
    let key = 0..24_u8;
    let cost = prop_oneof![0..4_u64, Just(2_000)];
    let op = prop_oneof![
        4 => (key.clone(), cost.clone()).prop_map(|(k, c)| Op::Check(k, c)),
        1 => (key.clone(), cost.clone()).prop_map(|(k, c)| Op::Peek(k, c)),
        1 => (key.clone(), cost).prop_map(|(k, c)| Op::Uncommit(k, c)),
        1 => key.prop_map(Op::Reset),
    ];
    (op, 0..400_i64)
}

proptest! {
    /// While the keys fit, the store answers exactly like one limiter per key.
    #[test]
    fn behaves_like_one_limiter_per_key(ops in proptest::collection::vec(op(), 1..300)) {
        let config = quota(5, 1_000);
        let mut keyed: Keyed<Tally, u8> = Keyed::new(config, 24).unwrap();
        let mut model: HashMap<u8, Tally> = HashMap::new();
        let mut now_ms = 0;
        for (op, step_ms) in ops {
            now_ms += step_ms;
            let limiter = || Tally::from_config(config);
            match op {
                Op::Check(key, cost) => prop_assert_eq!(
                    keyed.check_at(&key, now_ms, cost),
                    model.entry(key).or_insert_with(limiter).check_at(now_ms, cost)
                ),
                Op::Peek(key, cost) => prop_assert_eq!(
                    keyed.peek_at(&key, now_ms, cost),
                    model.entry(key).or_insert_with(limiter).peek_at(now_ms, cost)
                ),
                Op::Uncommit(key, cost) => prop_assert_eq!(
                    keyed.uncommit_at(&key, now_ms, cost),
                    model.entry(key).or_insert_with(limiter).uncommit_at(now_ms, cost)
                ),
                Op::Reset(key) => {
                    keyed.reset(&key);
                    model.remove(&key);
                }
            }
            prop_assert!(keyed.len() <= model.len());
        }
        prop_assert_eq!(keyed.stats().evictions, 0);
    }
}
