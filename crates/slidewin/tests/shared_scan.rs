//! The operator's view of a region (`Zone::scan_at`, `Zone::window_at`): the heaviest keys,
//! the usage histogram and one key's windows, against a naive model (one in-process limiter
//! per window of each key, and one refusal count per key), for rules of one and two windows.

mod common;

use common::{keyed_ops as ops, KeyedOp as Op};
use proptest::prelude::*;
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Owner, Scan, StoredKey, Usage, Walk, Zone, USAGE_BOUNDS, WAYS};
use slidewin::{BucketQuota, BucketWindow, Limiter, Quota, SlidingCounter, SlidingLog};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;

fn region(bytes: usize) -> Vec<AtomicU64> {
    (0..bytes / 8).map(|_| AtomicU64::new(0)).collect()
}

struct OneProcess;
impl Owner for OneProcess {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

fn key_bytes(key: u16) -> Vec<u8> {
    format!("key-{key}").into_bytes()
}

/// One key as the model sees it: a limiter per window, and its refusals since every window
/// was last empty.
struct ModelKey<L> {
    windows: Vec<L>,
    refused: u64,
}

impl<L: Limiter> ModelKey<L> {
    /// Every window's (count, limit) now.
    fn usage(&mut self, now_ms: i64, limits: &[u64]) -> Vec<Usage> {
        let windows = self.windows.iter_mut().zip(limits).enumerate();
        let usage = windows.map(|(window, (l, &limit))| Usage {
            window,
            count: limit - l.peek_at(now_ms, 0).unwrap().remaining,
            limit,
        });
        usage.collect()
    }
}

/// The window nearest its limit, the naive way (floats are exact enough for these limits).
fn nearest(usage: &[Usage]) -> Usage {
    let ratio = |u: &Usage| u.count as f64 / u.limit as f64;
    let mut best = usage[0];
    for u in usage {
        if ratio(u) > ratio(&best) {
            best = *u;
        }
    }
    best
}

/// (key, nearest window, refused) of every live key of the model at `now_ms`, and its scan.
fn model_scan<L: Limiter>(
    model: &mut HashMap<u16, ModelKey<L>>,
    now_ms: i64,
    limits: &[u64],
) -> (Vec<(u16, Usage, u64)>, Scan) {
    let mut live = Vec::new();
    let mut scan = Scan::default();
    for (&key, k) in model.iter_mut() {
        let near = nearest(&k.usage(now_ms, limits));
        if near.count == 0 {
            continue;
        }
        live.push((key, near, k.refused));
        let (count, limit) = (near.count, near.limit);
        scan.live += 1;
        scan.at_limit += u64::from(count >= limit);
        scan.usage_sum += count as f64 / limit as f64;
        for (bucket, (num, den)) in scan.usage.iter_mut().zip(USAGE_BOUNDS) {
            *bucket += u64::from(count * den <= limit * num);
        }
    }
    (live, scan)
}

fn key_of(key: &StoredKey) -> u16 {
    match key {
        StoredKey::Bytes(bytes) => std::str::from_utf8(&bytes[4..]).unwrap().parse().unwrap(),
        StoredKey::Digest(_) => panic!("short keys are stored as they are"),
    }
}

/// Replays `ops` on a zone of the rule of `configs` and on the model, scanning now and then:
/// the same live keys, histogram and top lists (ranks compared: ties come in any order).
fn scan_agrees_with_model<L: Limiter>(
    configs: &[(L::Config, u64)],
    window: fn(L::Config) -> RuleWindow,
    ops: &[(Op, i64)],
    top: usize,
) -> Result<(), TestCaseError> {
    let words = region(4 << 20);
    let rule = Rule::new(configs.iter().map(|(c, _)| window(c.clone())))?;
    let limits: Vec<u64> = configs.iter().map(|(_, limit)| *limit).collect();
    let (zone, _) = Zone::attach(&words, rule, 16, OneProcess, [5, 6])?;
    let mut model: HashMap<u16, ModelKey<L>> = HashMap::new();
    let fresh = || ModelKey {
        windows: configs
            .iter()
            .map(|(c, _)| L::from_config(c.clone()))
            .collect(),
        refused: 0,
    };
    let mut now_ms = 1_000_000;
    for (i, (op, step_ms)) in ops.iter().enumerate() {
        now_ms += step_ms;
        match *op {
            Op::Check(key, cost) => {
                let k = model.entry(key).or_insert_with(fresh);
                let idle = k.windows.iter_mut().all(|l| {
                    let (config, state) = l.parts_mut();
                    L::is_idle(config, state, now_ms)
                });
                if idle {
                    k.refused = 0; // every window was empty: a new streak
                }
                let fits = k
                    .windows
                    .iter_mut()
                    .all(|l| l.peek_at(now_ms, cost).unwrap().allowed);
                if fits {
                    k.windows
                        .iter_mut()
                        .for_each(|l| drop(l.check_at(now_ms, cost)));
                }
                k.refused += u64::from(!fits);
                prop_assert_eq!(zone.check_at(&key_bytes(key), now_ms, cost)?.allowed, fits);
            }
            Op::Peek(key, cost) => drop(zone.peek_at(&key_bytes(key), now_ms, cost)?),
            Op::Uncommit(key, cost) => {
                zone.uncommit_at(&key_bytes(key), now_ms, cost)?;
                if let Some(k) = model.get_mut(&key) {
                    k.windows
                        .iter_mut()
                        .for_each(|l| drop(l.uncommit_at(now_ms, cost)));
                }
            }
            Op::Reset(key) => {
                zone.reset(&key_bytes(key));
                model.remove(&key);
            }
        }
        if i % 7 != 0 {
            continue;
        }
        let got = zone.scan_at(now_ms, top)?;
        let (live, want) = model_scan(&mut model, now_ms, &limits);
        prop_assert_eq!(
            (got.live, got.at_limit, got.usage),
            (want.live, want.at_limit, want.usage)
        );
        prop_assert!((got.usage_sum - want.usage_sum).abs() < 1e-9);
        // Each listed key is as the model has it; the ranks are the model's best.
        for hit in got.refused.iter().chain(&got.admitted) {
            let key = key_of(&hit.key);
            let entry = live.iter().find(|(k, _, _)| *k == key);
            prop_assert_eq!(entry, Some(&(key, hit.usage, hit.refused)));
        }
        let ratio = |u: &Usage| u.count as f64 / u.limit as f64;
        let ranks = |mut r: Vec<(u64, f64)>| {
            r.sort_by(|a, b| b.partial_cmp(a).unwrap());
            r.truncate(top);
            r
        };
        let refused_ranks = live.iter().filter(|l| l.2 > 0).map(|l| (l.2, ratio(&l.1)));
        let got_refused: Vec<_> = got
            .refused
            .iter()
            .map(|h| (h.refused, ratio(&h.usage)))
            .collect();
        prop_assert_eq!(&got_refused, &ranks(refused_ranks.collect()));
        let got_admitted: Vec<_> = got.admitted.iter().map(|h| (0, ratio(&h.usage))).collect();
        prop_assert_eq!(
            &got_admitted,
            &ranks(live.iter().map(|l| (0, ratio(&l.1))).collect())
        );
    }
    Ok(())
}

fn log(limit: u64, window_ms: i64) -> (Quota, u64) {
    (Quota::new(limit, window_ms).unwrap(), limit)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn log_scan_agrees(ops in ops(), top in 0..6_usize) {
        scan_agrees_with_model::<SlidingLog>(&[log(10, 1_000)], RuleWindow::log, &ops, top)?;
    }

    #[test]
    fn two_log_windows_scan_agrees(ops in ops(), top in 0..6_usize) {
        let windows = [log(10, 1_000), log(25, 3_000)];
        scan_agrees_with_model::<SlidingLog>(&windows, RuleWindow::log, &ops, top)?;
    }

    #[test]
    fn buckets_scan_agrees(ops in ops(), top in 0..6_usize) {
        let windows = [
            (BucketQuota::new(10, 1_000, 100).unwrap(), 10),
            (BucketQuota::new(25, 3_000, 500).unwrap(), 25),
        ];
        scan_agrees_with_model::<BucketWindow>(&windows, RuleWindow::buckets, &ops, top)?;
    }

    #[test]
    fn counter_scan_agrees(ops in ops(), top in 0..6_usize) {
        let windows = [log(10, 1_000), log(25, 3_000)];
        scan_agrees_with_model::<SlidingCounter>(&windows, RuleWindow::counter, &ops, top)?;
    }
}

fn one_log(limit: u64, window_ms: i64) -> Rule {
    Rule::one(RuleWindow::log(Quota::new(limit, window_ms).unwrap()))
}

#[test]
fn three_keys_at_ten_times_their_limit_are_the_top_refused_among_fifty_at_half() {
    let words = region(1 << 20);
    let (zone, _) = Zone::attach(&words, one_log(10, 10_000), 64, OneProcess, [1, 2]).unwrap();
    let mut now_ms = 5_000_000;
    for round in 0..100 {
        for hot in 0..3 {
            zone.check_at(format!("hot-{hot}").as_bytes(), now_ms, 1)
                .unwrap();
        }
        if round % 20 == 0 {
            for calm in 0..50 {
                zone.check_at(format!("calm-{calm}").as_bytes(), now_ms, 1)
                    .unwrap();
            }
        }
        now_ms += 10;
    }
    let scan = zone.scan_at(now_ms, 5).unwrap();
    let mut refused: Vec<_> = scan
        .refused
        .iter()
        .map(|h| (h.key.clone(), h.usage.count, h.usage.limit, h.refused))
        .collect();
    refused.sort();
    let hot = |i: u8| StoredKey::Bytes(format!("hot-{i}").into_bytes());
    assert_eq!(
        refused,
        vec![
            (hot(0), 10, 10, 90),
            (hot(1), 10, 10, 90),
            (hot(2), 10, 10, 90)
        ]
    );
    assert_eq!((scan.live, scan.at_limit), (53, 3));
    // 50 keys at 5/10 (bounds 1/4 1/2 3/4 9/10 1), 3 at 10/10.
    assert_eq!(scan.usage, [0, 50, 50, 50, 53]);
    assert!((scan.usage_sum - 28.0).abs() < 1e-9);
    assert_eq!(scan.admitted.len(), 5);
    assert!(scan.admitted[..3].iter().all(|h| h.usage.count == 10));
    assert!(scan.admitted[3..].iter().all(|h| h.usage.count == 5));
    // A key's window is what its next call gets (but reset_after_ms: a peek records nothing,
    // so it tells when the window empties without that call).
    for key in [&b"hot-1"[..], b"calm-7", b"nobody"] {
        let d = zone.window_at(key, now_ms, 1).unwrap().decision;
        let next = zone.check_at(key, now_ms, 1).unwrap();
        let answer = |d: slidewin::Decision| (d.allowed, d.limit, d.remaining, d.retry_after_ms);
        assert_eq!(answer(d), answer(next), "{key:?}");
    }
    let hot1 = zone.window_at(b"hot-1", now_ms, 1).unwrap();
    assert_eq!((hot1.nearest().count, hot1.refused), (10, 91));
    assert_eq!(
        zone.window_at(b"nobody", now_ms, 1)
            .unwrap()
            .nearest()
            .count,
        1
    );
}

#[test]
fn a_key_of_two_windows_is_shown_by_the_one_nearest_its_limit() {
    let words = region(1 << 20);
    let second = Quota::new(10, 1_000).unwrap();
    let hour = Quota::new(20, 3_600_000).unwrap();
    let rule = Rule::new([RuleWindow::log(second), RuleWindow::log(hour)]).unwrap();
    let (zone, _) = Zone::attach(&words, rule, 64, OneProcess, [1, 2]).unwrap();
    for i in 0..9 {
        zone.check_at(b"k", i, 1).unwrap();
    }
    // 9/10 per second beats 9/20 per hour.
    let near = zone.scan_at(10, 1).unwrap().admitted[0].usage;
    assert_eq!(
        near,
        Usage {
            window: 0,
            count: 9,
            limit: 10
        }
    );
    // A second later: 0/10 and 9/20.
    let near = zone.scan_at(2_000, 1).unwrap().admitted[0].usage;
    assert_eq!(
        near,
        Usage {
            window: 1,
            count: 9,
            limit: 20
        }
    );
    let window = zone.window_at(b"k", 2_000, 1).unwrap();
    let counts: Vec<_> = window.windows.iter().map(|u| (u.count, u.limit)).collect();
    assert_eq!(counts, [(0, 10), (9, 20)]);
    // A live limit is what the scan measures against.
    zone.set_limit(1, 9).unwrap();
    let scan = zone.scan_at(2_000, 1).unwrap();
    assert_eq!((scan.at_limit, scan.admitted[0].usage.limit), (1, 9));
}

#[test]
fn a_long_key_is_listed_by_its_digest() {
    let words = region(1 << 16);
    let (zone, _) = Zone::attach(&words, one_log(1, 1_000), 16, OneProcess, [1, 2]).unwrap();
    let long = [7u8; 40];
    zone.check_at(&long, 0, 1).unwrap();
    zone.check_at(&long, 1, 1).unwrap();
    let scan = zone.scan_at(2, 3).unwrap();
    assert_eq!(scan.refused.len(), 1);
    assert!(matches!(scan.refused[0].key, StoredKey::Digest(_)));
    assert_eq!(
        (scan.refused[0].usage.count, scan.refused[0].refused),
        (1, 1)
    );
}

#[test]
fn a_walk_in_slices_sees_what_one_scan_and_the_counters_see() {
    let words = region(1 << 20);
    let (zone, _) = Zone::attach(&words, one_log(50, 60_000), 64, OneProcess, [1, 2]).unwrap();
    // Key i at i % 50 + 1 of 50; the last five refused 1 to 5 times.
    for i in 0..400u64 {
        let calls = if i >= 395 { 50 + i - 394 } else { i % 50 + 1 };
        for t in 0..calls {
            zone.check_at(format!("k{i}").as_bytes(), t as i64, 1)
                .unwrap();
        }
    }
    let sets = zone.capacity() / WAYS;
    let mut walk = Walk::scan(4);
    let mut slices = 1;
    while !zone.walk_step(&mut walk, 100, 3).unwrap() {
        slices += 1;
    }
    assert_eq!(slices, sets.div_ceil(3));
    let (scan, stats) = walk.finish();
    let scan = scan.unwrap();
    assert_eq!(scan, zone.scan_at(100, 4).unwrap());
    let refused: Vec<_> = scan.refused.iter().map(|h| h.refused).collect();
    assert_eq!((scan.live, refused), (400, vec![5, 4, 3, 2]));
    assert_eq!(stats, zone.stats());
    let mut counters = Walk::counters();
    while !zone.walk_step(&mut counters, 100, 7).unwrap() {}
    assert_eq!(counters.finish(), (None, zone.stats()));
    let mut over = Walk::scan(4);
    assert!(zone.walk_step(&mut over, 100, usize::MAX).unwrap());
    assert!(
        zone.walk_step(&mut over, 100, 1).unwrap(),
        "a walk past its end stays over"
    );
    assert_eq!(over.finish().0, Some(zone.scan_at(100, 4).unwrap()));
    assert_eq!(
        zone.walk_step(&mut Walk::counters(), i64::MAX, 1)
            .unwrap_err()
            .to_string(),
        "now_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
}
