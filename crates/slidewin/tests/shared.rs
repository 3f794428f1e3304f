//! The shared-memory store (`slidewin::shared::Zone`): the same answers as one in-process
//! limiter per key, from several threads and several processes at once, through the death of
//! a process that holds a lock (there with concurrency slots and a lease table beside it).

mod common;

use common::process::{fork, kill, wait, Mapping, Thread};
use common::{keyed_ops as ops, KeyedOp as Op};
use proptest::prelude::*;
use slidewin::lease::{Grant, LeaseConfig};
use slidewin::reservation::Amend;
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Attached, Fetch, Full, Inflight, InflightConfig, Leases, ProcessOwner};
use slidewin::shared::{Spent, Zone, SETTLE_SLOTS};
use slidewin::{BucketQuota, BucketWindow, Call, Limiter, Quota, SlidingCounter, SlidingLog};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

fn region(bytes: usize) -> Vec<AtomicU64> {
    (0..bytes / 8).map(|_| AtomicU64::new(0)).collect()
}

/// Every fifth key is longer than max_key_bytes, so stored as a digest.
fn key_bytes(key: u16) -> Vec<u8> {
    let len = if key % 5 == 0 {
        40
    } else {
        1 + key as usize % 16
    };
    (0..len).map(|i| (key as usize * 31 + i) as u8).collect()
}

/// Replay `ops` on a zone (room for every key) and on a map of single-key limiters.
fn agrees_with_one_limiter_per_key<L: Limiter>(
    config: L::Config,
    window: fn(L::Config) -> RuleWindow,
    ops: &[(Op, i64)],
) -> Result<(), TestCaseError> {
    let words = region(4 << 20);
    let rule = Rule::one(window(config.clone()));
    let (zone, attached) = Zone::attach(&words, rule, 16, Thread(1), [9, 9])?;
    prop_assert_eq!(attached, Attached::Fresh);
    let mut model: HashMap<u16, L> = HashMap::new();
    let new_limiter = || L::from_config(config.clone());
    let mut now_ms = 1_000_000;
    for (op, step_ms) in ops {
        now_ms += step_ms;
        match *op {
            Op::Check(key, cost) => prop_assert_eq!(
                zone.check_at(&key_bytes(key), now_ms, cost),
                model
                    .entry(key)
                    .or_insert_with(new_limiter)
                    .check_at(now_ms, cost)
            ),
            Op::Peek(key, cost) => prop_assert_eq!(
                zone.peek_at(&key_bytes(key), now_ms, cost),
                new_limiter().peek_at(now_ms, cost).and_then(|fresh| {
                    Ok(match model.get_mut(&key) {
                        Some(limiter) => limiter.peek_at(now_ms, cost)?,
                        None => fresh,
                    })
                })
            ),
            Op::Uncommit(key, cost) => {
                let got = zone.uncommit_at(&key_bytes(key), now_ms, cost);
                let want = match model.get_mut(&key) {
                    Some(limiter) => limiter.uncommit_at(now_ms, cost),
                    None => Ok(()),
                };
                prop_assert_eq!(got, want)
            }
            Op::Reset(key) => {
                zone.reset(&key_bytes(key));
                model.remove(&key);
            }
        }
    }
    prop_assert_eq!(zone.stats().keys, model.len() as u64);
    prop_assert_eq!(zone.stats().evictions, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn log_agrees(ops in ops()) {
        agrees_with_one_limiter_per_key::<SlidingLog>(Quota::new(10, 1_000).unwrap(), RuleWindow::log, &ops)?;
    }

    #[test]
    fn buckets_agree(ops in ops()) {
        let config = BucketQuota::new(10, 1_000, 100).unwrap();
        agrees_with_one_limiter_per_key::<BucketWindow>(config, RuleWindow::buckets, &ops)?;
    }

    #[test]
    fn counter_agrees(ops in ops()) {
        agrees_with_one_limiter_per_key::<SlidingCounter>(Quota::new(10, 1_000).unwrap(), RuleWindow::counter, &ops)?;
    }
}

#[test]
fn a_region_too_small_or_a_key_length_out_of_range_is_an_error_naming_it() {
    let words = region(4096);
    let quota = Quota::new(1_000, 60_000).unwrap();
    let err = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        64,
        Thread(1),
        [0, 0],
    )
    .err();
    assert_eq!(
        err.unwrap().to_string(),
        "size must be at least 129472 bytes (8 keys of this limit, window and max_key_bytes), \
         got 4096"
    );
    let err = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        8,
        Thread(1),
        [0, 0],
    )
    .err();
    assert_eq!(
        err.unwrap().to_string(),
        "max_key_bytes must be from 16 to 65536, got 8"
    );
}

#[test]
fn the_same_layout_is_reused_and_another_starts_afresh() {
    let words = region(1 << 20);
    let quota = Quota::new(5, 1_000).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        64,
        Thread(1),
        [1, 2],
    )
    .unwrap();
    zone.check_at(b"k", 0, 5).unwrap();
    let (again, attached) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        64,
        Thread(2),
        [3, 4],
    )
    .unwrap();
    assert_eq!(attached, Attached::Reused);
    assert!(
        !again.check_at(b"k", 1, 1).unwrap().allowed,
        "the window is kept"
    );
    let other = Quota::new(6, 1_000).unwrap();
    let (fresh, attached) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(other)),
        64,
        Thread(2),
        [3, 4],
    )
    .unwrap();
    assert_eq!(attached, Attached::Fresh);
    assert!(fresh.check_at(b"k", 1, 1).unwrap().allowed);
}

#[test]
fn a_full_region_reclaims_idle_keys_then_evicts_and_stays_bounded() {
    let words = region(64 << 10);
    let quota = Quota::new(3, 1_000).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        16,
        Thread(1),
        [1, 2],
    )
    .unwrap();
    let capacity = zone.capacity() as u64;
    for i in 0..10 * capacity {
        let key = format!("key-{i}-{}", "x".repeat(i as usize % 50));
        zone.check_at(key.as_bytes(), 0, 1).unwrap();
    }
    let stats = zone.stats();
    assert!(stats.keys <= capacity);
    assert!(stats.evictions >= 9 * capacity, "{stats:?}");
    for i in 0..capacity {
        zone.check_at(format!("later-{i}").as_bytes(), 5_000, 1)
            .unwrap();
    }
    assert!(zone.stats().reclaimed > 0, "windows emptied by 5000 ms");
}

/// A zone that refuses new keys in a full set never forgets a window: 4x its capacity of
/// keys, each offered twice its limit, and no key is admitted past its limit; the refused
/// new keys wait exactly until the first way of their set empties.
#[test]
fn a_full_zone_that_refuses_new_keys_admits_no_key_past_its_limit() {
    let words = region(8 << 10);
    let quota = Quota::new(2, 1_000).unwrap();
    let rule = Rule::one(RuleWindow::log(quota));
    let (zone, _) = Zone::attach(&words, rule, 16, Thread(1), [1, 2]).unwrap();
    let zone = zone.with_full(Full::Refuse);
    let keys = 4 * zone.capacity();
    let mut admitted = vec![0; keys];
    let mut waits = Vec::new();
    for round in 0..4 {
        for (key, admitted) in admitted.iter_mut().enumerate() {
            let now_ms = round * 100 + (key % 50) as i64;
            let d = zone.check_at(&key.to_le_bytes(), now_ms, 1).unwrap();
            *admitted += u64::from(d.allowed);
            if !d.allowed && d.remaining == 0 && round == 0 {
                waits.push(d.retry_after_ms.unwrap());
            }
        }
    }
    assert!(admitted.iter().all(|&n| n <= 2), "{admitted:?}");
    let stats = zone.stats();
    assert_eq!((stats.evictions, zone.evictions()), (0, 0));
    assert_eq!(stats.keys, zone.capacity() as u64);
    assert!(stats.full_refusals > 0 && stats.rejected >= stats.full_refusals);
    // Each set filled with keys whose first call came within 49 ms: the wait is the rest of
    // the oldest one's second.
    assert!(
        waits.iter().all(|&w| (951..=1_000).contains(&w)),
        "{waits:?}"
    );
    // Once the windows drain, new keys take the idle ways.
    assert!(zone.check_at(b"late", 5_000, 1).unwrap().allowed);
}

/// A zone that evicts counts each key evicted with units in one word of the region.
#[test]
fn evictions_of_keys_holding_units_are_counted_in_one_word() {
    let words = region(8 << 10);
    let rule = Rule::one(RuleWindow::log(Quota::new(2, 1_000).unwrap()));
    let (zone, _) = Zone::attach(&words, rule, 16, Thread(1), [1, 2]).unwrap();
    for key in 0..4 * zone.capacity() {
        zone.check_at(&key.to_le_bytes(), 0, 1).unwrap();
    }
    let stats = zone.stats();
    assert_eq!(zone.evictions(), stats.evictions);
    assert_eq!(stats.evictions, 3 * zone.capacity() as u64);
    assert_eq!(stats.full_refusals, 0);
}

/// 8 threads x 1000 calls in one millisecond on one hot key and on 64 others (each offered
/// more than its limit of 20): exactly the limit is admitted per key.
#[test]
fn threads_admit_exactly_the_limit() {
    let words = region(8 << 20);
    let quota = Quota::new(20, 1_000).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        64,
        Thread(1),
        [1, 2],
    )
    .unwrap();
    let admitted: Vec<AtomicU64> = (0..65).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let (words, admitted) = (&words, &admitted);
            scope.spawn(move || {
                let (zone, attached) = Zone::attach(
                    words,
                    Rule::one(RuleWindow::log(quota)),
                    64,
                    Thread(t + 10),
                    [0, 0],
                )
                .unwrap();
                assert_eq!(attached, Attached::Reused);
                for i in 0..1_000u64 {
                    let key = if i % 2 == 0 { 64 } else { (i / 2 + t) % 64 };
                    if zone.check_at(&key.to_le_bytes(), 5, 1).unwrap().allowed {
                        admitted[key as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    for (key, n) in admitted.iter().enumerate() {
        assert_eq!(n.load(Ordering::Relaxed), 20, "key {key}");
    }
    let stats = zone.stats();
    assert_eq!((stats.allowed, stats.rejected), (65 * 20, 8_000 - 65 * 20));
}

/// 4 processes x 2000 calls on one key in one millisecond: exactly the limit, counted once.
#[test]
fn processes_admit_exactly_the_limit() {
    let mapping = Mapping::new(4 << 20);
    let quota = Quota::new(100, 1_000).unwrap();
    let (zone, _) = Zone::attach(
        mapping.words(),
        Rule::one(RuleWindow::log(quota)),
        64,
        ProcessOwner,
        [5, 6],
    )
    .unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            fork(|| {
                for _ in 0..2_000 {
                    zone.check_at(b"hot", 7, 1).unwrap();
                }
            })
        })
        .collect();
    for child in children {
        assert_eq!(wait(child), 0);
    }
    let stats = zone.stats();
    assert_eq!((stats.allowed, stats.rejected), (100, 7_900));
}

/// Redis's answer to a child's lease call `fetch` ([`GRANT`], or a failure every third
/// call), installed at `now_ms` for a request of `cost`, its settle list then taken.
fn answer(
    leases: &Leases<&[AtomicU64], ProcessOwner>,
    key: &[u8],
    fetch: &Fetch,
    now_ms: i64,
    cost: u64,
) {
    if fetch.seq % 3 == 0 {
        leases.fail_at(key, fetch, now_ms).unwrap();
        return;
    }
    leases
        .install_at(key, fetch, now_ms, cost, &LIMITS, &GRANT)
        .unwrap();
    leases.settled(key, fetch.seq);
}

/// Redis's answer to every lease call of the storm (5 units, room for 20 more), and the
/// limits the leases are spent under.
const GRANT: Grant = Grant {
    granted: 5,
    remaining: 20,
    retry_after_ms: None,
    reset_after_ms: 0,
    window: 0,
};
const LIMITS: [u64; 1] = [50];

/// Processes SIGKILLed at random instants while hammering a few keys of a zone of each kind
/// (checks, and give-backs at an earlier stamp), concurrency slots and a lease table, all in
/// one mapping: no survivor ever waits forever, and each table still answers within its
/// limits afterwards.
#[test]
fn processes_killed_at_any_instant_leave_no_lock_held() {
    let quota = Quota::new(1_000_000, 1_000).unwrap();
    let config = BucketQuota::new(1_000_000, 1_000, 10).unwrap();
    let slots_config = InflightConfig::new(4, 8, 3_600_000).unwrap();
    let lease_config = LeaseConfig::new(1_000, None, 1_000).unwrap();
    let slots_bytes =
        Inflight::<&[AtomicU64], ProcessOwner>::bytes_for(&slots_config, 64, 64).unwrap();
    let lease_bytes = Leases::<&[AtomicU64], ProcessOwner>::bytes_for(64, 64).unwrap();
    let mapping = Mapping::new((8 << 20) + slots_bytes + lease_bytes);
    let (zones, rest) = mapping.words().split_at((8 << 20) / 8);
    let (log_words, buckets_words) = zones.split_at(zones.len() / 2);
    let (slots_words, lease_words) = rest.split_at(slots_bytes / 8);
    let rule = Rule::one(RuleWindow::log(quota));
    let (log, _) = Zone::attach(log_words, rule, 64, ProcessOwner, [5, 6]).unwrap();
    let rule = Rule::one(RuleWindow::buckets(config));
    let (buckets, _) = Zone::attach(buckets_words, rule, 64, ProcessOwner, [7, 8]).unwrap();
    let (slots, _) =
        Inflight::attach(slots_words, slots_config, 64, ProcessOwner, [9, 10]).unwrap();
    let (leases, _) =
        Leases::attach(lease_words, lease_config, 64, ProcessOwner, [11, 12]).unwrap();
    // Leases live a validity: their time runs two validities a round, so each round's calls
    // find the last round's leases ended (to settle) and its claims run out.
    let lease_ms = |round: u64| 10_000 + round as i64 * 2_000;
    let keys = [[0u8], [1u8]];
    for round in 0..40u64 {
        let now_ms = 1_000 + round as i64;
        let children: Vec<_> = (0..3)
            .map(|c| {
                fork(|| {
                    let key = [(c % 2) as u8];
                    for i in 0.. {
                        log.check_at(&key, now_ms, 1).unwrap();
                        buckets.check_at(&key, now_ms, 1).unwrap();
                        // A give-back at the round before's stamp: the log moves its newer
                        // entries down over an emptied one.
                        if i % 3 == 0 {
                            log.amend_at(&key, now_ms, Some(now_ms - 1), Amend::GiveBack(1))
                                .unwrap();
                            buckets
                                .amend_at(&key, now_ms, Some(now_ms - 10), Amend::GiveBack(1))
                                .unwrap();
                        }
                        let entry = slots.enter_at(&key, now_ms).unwrap();
                        if entry.admitted {
                            slots.leave_at(&key, entry.token).unwrap();
                        }
                        let at = lease_ms(round) + (i / 4).min(900);
                        match leases.spend_at(&key, at, 1, &LIMITS).unwrap() {
                            Spent::Fetch(fetch) => answer(&leases, &key, &fetch, at, 1),
                            Spent::Admitted {
                                prefetch: Some(fetch),
                                ..
                            } => answer(&leases, &key, &fetch, at, 0),
                            _ => {}
                        }
                        for (key, fetch) in leases.sweep_at(at, 1, 2).unwrap() {
                            leases.settled(&key, fetch.seq);
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_micros(300 + round * 37 % 500));
        for &child in &children {
            kill(child);
        }
        for child in children {
            wait(child);
        }
        // The parent gets every lock back (taking over from the dead), within the deadline.
        let start = std::time::Instant::now();
        for key in keys {
            log.check_at(&key, now_ms, 1).unwrap();
            buckets.check_at(&key, now_ms, 1).unwrap();
            slots.inflight_at(&key, now_ms).unwrap();
            leases.refund_at(&key, lease_ms(round), 0).unwrap();
        }
        slots.sweep_at(now_ms).unwrap();
        leases
            .sweep_at(lease_ms(round) + 1_000, 1, usize::MAX)
            .unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
    // After the storm: every slot was a dead child's, so none is held; each key then takes
    // exactly its limit, and gives every slot back.
    let stats = slots.stats_at(2_000).unwrap();
    assert_eq!(stats.inflight, 0, "{stats:?}");
    for key in keys {
        let entries: Vec<_> = (0..5)
            .map(|_| slots.enter_at(&key, 2_000).unwrap())
            .collect();
        let admitted = entries.iter().filter(|e| e.admitted).count();
        assert_eq!((admitted, entries[4].inflight), (4, 4), "{entries:?}");
        for entry in &entries[..4] {
            assert!(slots.leave_at(&key, entry.token).unwrap());
        }
        assert_eq!(slots.inflight_at(&key, 2_000).unwrap(), 0);
    }
    // Every lease the storm left has ended: a key's next spend calls Redis, with a settle list
    // of at most SETTLE_SLOTS leases, none spent past its grant; the new grant pays exactly its
    // units with no call.
    let lease_stats = leases.stats();
    assert!(lease_stats.spent <= lease_stats.granted, "{lease_stats:?}");
    // Past every claim, under any validity it was raised to (at most 4 V).
    let end_ms = lease_ms(40) + 5_000;
    for key in keys {
        let Spent::Fetch(fetch) = leases.spend_at(&key, end_ms, 1, &LIMITS).unwrap() else {
            panic!("key {key:?}: a lease or a claim outlived the storm")
        };
        let settle: Vec<_> = fetch.settle.split_whitespace().collect();
        assert!(settle.len() <= SETTLE_SLOTS, "{settle:?}");
        for entry in &settle {
            let spent: u64 = entry.split(':').nth(1).unwrap().parse().unwrap();
            assert!(spent <= GRANT.granted, "{settle:?}");
        }
        let admitted = leases
            .install_at(&key, &fetch, end_ms, 1, &LIMITS, &GRANT)
            .unwrap();
        // The request's unit spent: 4 left in the lease, and Redis's 20.
        assert_eq!(admitted.map(|a| a.remaining), Some(4 + 20));
        let spent = (1..=5)
            .map(|t| leases.spend_at(&key, end_ms + t, 1, &LIMITS).unwrap())
            .take_while(|s| matches!(s, Spent::Admitted { .. }))
            .count();
        assert_eq!(spent, 4, "key {key:?}");
    }
    // A fresh limit on both zone keys holds exactly.
    for key in keys {
        log.reset(&key);
        buckets.reset(&key);
    }
    let mut admitted = 0;
    for _ in 0..1_000_010 {
        admitted += log.check_at(&[0], 100_000, 1).unwrap().allowed as u64;
    }
    assert_eq!(admitted, 1_000_000);
    buckets.set_limit(0, 10).unwrap();
    let admitted = (0..12)
        .filter(|_| buckets.check_at(&[1], 100_000, 1).unwrap().allowed)
        .count();
    assert_eq!(admitted, 10);
}

#[test]
fn a_dry_run_decides_and_records_as_a_check_and_counts_its_refusals_apart() {
    let words = region(1 << 16);
    let rule = Rule::one(RuleWindow::log(Quota::new(3, 1_000).unwrap()));
    let (zone, _) = Zone::attach(&words, rule, 16, Thread(1), [1, 2]).unwrap();
    let mut model = SlidingLog::new(3, 1_000).unwrap();
    // Two of the three admissions are dry runs' and fill the window as checks do.
    for (i, dry_run) in [false, true, true, false, true, false]
        .into_iter()
        .enumerate()
    {
        let now_ms = i as i64 * 10;
        let decision = match dry_run {
            true => zone.check_dry_run_at(b"k", now_ms, 1),
            false => zone.check_at(b"k", now_ms, 1),
        };
        assert_eq!(decision, model.check_at(now_ms, 1), "call {i}");
    }
    let stats = zone.stats();
    assert_eq!(
        (stats.allowed, stats.rejected, stats.would_reject),
        (3, 2, 1)
    );
}

#[test]
fn a_withdrawn_call_leaves_its_window_and_counts_as_never_admitted() {
    let words = region(1 << 16);
    let buckets = BucketQuota::new(3, 1_000, 100).unwrap();
    let rule = Rule::new([
        RuleWindow::log(Quota::new(3, 1_000).unwrap()),
        RuleWindow::buckets(buckets),
    ])
    .unwrap();
    let (zone, _) = Zone::attach(&words, rule, 16, Thread(1), [1, 2]).unwrap();
    for now_ms in [0, 10] {
        assert!(zone.check_at(b"k", now_ms, 1).unwrap().allowed);
    }
    // The third admission is refused by another limit: taken back, the key has room for it.
    assert_eq!(zone.check_at(b"k", 20, 1).unwrap().remaining, 0);
    zone.withdraw_at(b"k", 20, 1).unwrap();
    let d = zone.check_at(b"k", 30, 1).unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 0);
    assert!(!zone.check_at(b"k", 40, 1).unwrap().allowed);
    zone.withdraw_at(b"unknown", 40, 1).unwrap();
    let stats = zone.stats();
    assert_eq!((stats.allowed, stats.rejected, stats.keys), (3, 1, 1));
}

/// `check_now` reads its clock once the key's set is locked and answers the time it decided
/// at, with the decision `check_at` gives at that time.
#[test]
fn check_now_decides_at_the_clock_read_under_the_lock() {
    struct Fixed(i64);
    impl slidewin::Clock for Fixed {
        fn now_ms(&self) -> i64 {
            self.0
        }
    }
    let words = region(1 << 16);
    let rule = Rule::one(RuleWindow::log(Quota::new(2, 1_000).unwrap()));
    let (zone, _) = Zone::attach(&words, rule, 16, Thread(1), [1, 2]).unwrap();
    let mut model = SlidingLog::new(2, 1_000).unwrap();
    let (check, dry_run) = (Call::Check, Call::DryRun);
    for (now_ms, call) in [(5, check), (7, dry_run), (9, check), (1_006, check)] {
        let (d, at) = zone.check_now(b"k", &Fixed(now_ms), 1, call, None).unwrap();
        assert_eq!((d, at), (model.check_at(now_ms, 1).unwrap(), now_ms));
    }
    let stats = zone.stats();
    assert_eq!(
        (stats.allowed, stats.rejected, stats.would_reject),
        (3, 1, 0)
    );
    let bad = zone
        .check_now(b"k", &Fixed(i64::MAX), 1, Call::Check, None)
        .unwrap_err();
    assert!(
        bad.to_string().starts_with("now_ms must be between"),
        "{bad}"
    );
}
