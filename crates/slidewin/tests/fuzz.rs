//! Fuzzing by property: every limiter and the keyed store against naive models on random
//! traces with hostile inputs (costs of 0, of the limit ± 1, of 2^53 and u64::MAX; the clock
//! jumping far ahead and stepping back; times near ±2^53; more keys than the store holds; keys
//! longer than `max_key_bytes`). `make test` runs the default number of cases (a few
//! seconds); `make fuzz` runs many more (`PROPTEST_CASES`).

mod common;

use common::{max_in_any_window, replay, Counting, Model, Op, Step};
use proptest::prelude::*;
use slidewin::{BucketWindow, Keyed, Limiter, Quota, SlidingCounter, SlidingLog};
use std::collections::{HashMap, HashSet};

/// Cases per property: 64 in `make test`, `FUZZ_CASES` in `make fuzz`.
fn config() -> ProptestConfig {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig {
        cases: cases.unwrap_or(64),
        ..ProptestConfig::default()
    }
}

/// Costs an attacker or a bug would send, next to ordinary ones.
fn hostile_cost(limit: u64) -> impl Strategy<Value = u64> + Clone {
    prop_oneof![
        4 => 0..=3u64,
        1 => Just(0),
        1 => Just(limit),
        1 => Just(limit + 1),
        1 => Just(limit.saturating_sub(1)),
        1 => Just(1 << 53),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

/// Steps with ordinary gaps, far jumps ahead and the clock stepping back.
fn hostile_steps(limit: u64, window_ms: i64) -> impl Strategy<Value = Vec<Step>> {
    let gap = prop_oneof![
        4 => Just(0i64),
        4 => 1..=3i64,
        2 => 1..=window_ms * 2,
        1 => Just(window_ms * 1_000_000),
        1 => -window_ms * 3..0,
        1 => Just(-window_ms * 1_000_000),
    ];
    let op = prop_oneof![
        6 => hostile_cost(limit).prop_map(Op::Check),
        2 => hostile_cost(limit).prop_map(Op::Peek),
        2 => hostile_cost(limit).prop_map(Op::Refund),
    ];
    proptest::collection::vec(
        (gap, op).prop_map(|(gap_ms, op)| Step { gap_ms, op }),
        1..120,
    )
}

/// Small limits, where the trace fills the window, and huge ones, near where doubles stop
/// being exact.
fn limit() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 1..=20u64, 1 => (1u64 << 52)..=(1u64 << 53)]
}

fn start_ms() -> impl Strategy<Value = i64> {
    prop_oneof![
        2 => -200..=200i64,
        // Near the ends of the clock's range (±2^53), leaving room for the trace's jumps.
        1 => (1i64 << 53) - 1_000_000_000_000..=(1i64 << 53) - 999_999_000_000,
        1 => -(1i64 << 53) + 999_999_000_000..=-(1i64 << 53) + 1_000_000_000_000,
    ]
}

/// `limiter` answers exactly as `model` on `trace`, and never holds more than the limit.
fn agrees<L: Limiter>(
    mut limiter: L,
    counting: Counting,
    limit: u64,
    window_ms: i64,
    start: i64,
    trace: &[Step],
) {
    let mut model = Model::new(limit, window_ms, counting);
    replay(
        &mut limiter,
        &mut model,
        start,
        trace,
        |now, got, want, _| {
            assert_eq!(got, want, "at {now}");
        },
    );
    if matches!(counting, Counting::Exact) {
        assert!(max_in_any_window(&model.admitted, window_ms) <= limit);
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn sliding_log_against_the_exact_model(
        limit in limit(), window_ms in 1..=50i64, start in start_ms(),
        trace in (limit(), 1..=50i64).prop_flat_map(|(l, w)| hostile_steps(l, w)),
    ) {
        agrees(SlidingLog::new(limit, window_ms).unwrap(), Counting::Exact, limit, window_ms, start, &trace);
    }

    #[test]
    fn sliding_counter_against_the_two_window_model(
        limit in limit(), window_ms in 1..=50i64, start in start_ms(),
        trace in (limit(), 1..=50i64).prop_flat_map(|(l, w)| hostile_steps(l, w)),
    ) {
        agrees(SlidingCounter::new(limit, window_ms).unwrap(), Counting::TwoWindows, limit, window_ms, start, &trace);
    }

    /// With 1 ms buckets the bucket window is exact.
    #[test]
    fn bucket_window_of_1_ms_buckets_against_the_exact_model(
        limit in limit(), window_ms in 1..=50i64, start in start_ms(),
        trace in (limit(), 1..=50i64).prop_flat_map(|(l, w)| hostile_steps(l, w)),
    ) {
        agrees(BucketWindow::new(limit, window_ms, 1).unwrap(), Counting::Exact, limit, window_ms, start, &trace);
    }
}

/// One call on the keyed store, on key `usize` of the trace's key list.
#[derive(Debug, Clone)]
enum KeyedOp {
    Check(usize, u64),
    Peek(usize, u64),
    Uncommit(usize, u64),
    Reset(usize),
}

/// Keys of 0 to 40 bytes from a 2-letter alphabet (so they repeat), calls on them with hostile
/// costs and gaps.
fn keyed_trace() -> impl Strategy<Value = (Vec<Vec<u8>>, Vec<(KeyedOp, i64)>)> {
    let keys = proptest::collection::vec(
        prop_oneof![
            3 => proptest::collection::vec(b'a'..=b'b', 0..=6),
            1 => proptest::collection::vec(b'a'..=b'b', 7..=40),
        ],
        1..=12,
    );
    keys.prop_flat_map(|keys| {
        let n = keys.len();
        let key = 0..n;
        let cost = hostile_cost(5);
        let op = prop_oneof![
            6 => (key.clone(), cost.clone()).prop_map(|(k, c)| KeyedOp::Check(k, c)),
            2 => (key.clone(), cost.clone()).prop_map(|(k, c)| KeyedOp::Peek(k, c)),
            2 => (key.clone(), cost).prop_map(|(k, c)| KeyedOp::Uncommit(k, c)),
            1 => key.prop_map(KeyedOp::Reset),
        ];
        let gap = prop_oneof![4 => 0..5i64, 2 => 0..300i64, 1 => -300..0i64, 1 => Just(10_000i64)];
        (Just(keys), proptest::collection::vec((op, gap), 1..300))
    })
}

/// The keyed store of byte keys (bound `max_key_bytes`, room for `max_keys`) against one
/// limiter per key. While every key fits, the answers are the per-key limiters' exactly (a key
/// the store never created, because nothing was recorded, answers as a fresh limiter: it
/// forgets the newest time the clock showed it). With more keys than room, keys are evicted
/// and start afresh, so only the bounds are checked: keys held, key text (digests of long keys
/// are 16 bytes), and every call answering.
fn keyed_agrees<L: Limiter>(
    config: L::Config,
    max_keys: usize,
    max_key_bytes: usize,
    keys: &[Vec<u8>],
    trace: &[(KeyedOp, i64)],
) -> Result<(), TestCaseError> {
    let mut store = Keyed::<L, Vec<u8>>::new(config.clone(), max_keys)
        .unwrap()
        .with_max_key_bytes(max_key_bytes)
        .unwrap();
    let fits = keys.iter().collect::<HashSet<_>>().len() <= max_keys;
    let fresh = || L::from_config(config.clone());
    let mut models: HashMap<&[u8], L> = HashMap::new();
    let mut held: HashSet<&[u8]> = HashSet::new();
    let mut now = 1_000_000;
    for (op, gap) in trace {
        now += gap;
        let (k, got, want) = match *op {
            KeyedOp::Check(k, cost) => {
                let model = models.entry(&keys[k]).or_insert_with(fresh);
                let want = model.check_at(now, cost);
                let (config, state) = model.parts_mut();
                if !L::is_idle(config, state, now) {
                    held.insert(&keys[k]);
                }
                (
                    k,
                    store.check_bytes_at(&keys[k], now, cost).map(Some),
                    want.map(Some),
                )
            }
            KeyedOp::Peek(k, cost) => {
                let model = models.entry(&keys[k]).or_insert_with(fresh);
                (
                    k,
                    store.peek_bytes_at(&keys[k], now, cost).map(Some),
                    model.peek_at(now, cost).map(Some),
                )
            }
            KeyedOp::Uncommit(k, cost) => {
                let model = models.entry(&keys[k]).or_insert_with(fresh);
                model.uncommit_at(now, cost).unwrap();
                prop_assert!(store.uncommit_bytes_at(&keys[k], now, cost).is_ok());
                (k, Ok(None), Ok(None))
            }
            KeyedOp::Reset(k) => {
                store.reset_bytes(&keys[k]);
                held.remove(&keys[k][..]);
                (k, Ok(None), Ok(None))
            }
        };
        prop_assert!(got.is_ok(), "{:?}", got);
        if fits {
            prop_assert_eq!(got, want, "key {:?} at {}", &keys[k], now);
        }
        if !held.contains(&keys[k][..]) {
            models.insert(&keys[k], fresh());
        }
        let stats = store.stats();
        prop_assert!(stats.keys <= max_keys);
        prop_assert!(store.key_bytes() <= stats.keys * max_key_bytes.max(16));
        if fits {
            prop_assert_eq!(stats.keys, held.len());
            prop_assert_eq!(stats.evictions, 0);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn keyed_sliding_log_with_evictions_and_long_keys(
        (keys, trace) in keyed_trace(), max_keys in prop_oneof![1..=12usize, Just(12usize)], max_key_bytes in 1..=8usize,
    ) {
        keyed_agrees::<SlidingLog>(Quota::new(5, 1_000).unwrap(), max_keys, max_key_bytes, &keys, &trace)?;
    }

    #[test]
    fn keyed_sliding_counter_with_evictions_and_long_keys(
        (keys, trace) in keyed_trace(), max_keys in prop_oneof![1..=12usize, Just(12usize)], max_key_bytes in 1..=8usize,
    ) {
        keyed_agrees::<SlidingCounter>(Quota::new(5, 1_000).unwrap(), max_keys, max_key_bytes, &keys, &trace)?;
    }

    #[test]
    fn keyed_bucket_window_with_evictions_and_long_keys(
        (keys, trace) in keyed_trace(), max_keys in prop_oneof![1..=12usize, Just(12usize)], max_key_bytes in 1..=8usize,
    ) {
        let config = slidewin::BucketQuota::new(5, 1_000, 100).unwrap();
        keyed_agrees::<BucketWindow>(config, max_keys, max_key_bytes, &keys, &trace)?;
    }
}
