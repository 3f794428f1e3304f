//! Live limits under concurrency: threads deciding on a hot key while another thread changes
//! the limits, and processes SIGKILLed at random instants while they set limits, decide, or
//! put and remove rules in a `Directory`.

mod common;

use common::process::{fork, kill, wait, Mapping, Thread};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Directory, ProcessOwner, Zone, GRACE_MS, PAGE_BYTES};
use slidewin::{BucketQuota, Quota};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Random but the same each run, so a failing round can be replayed.
fn draw() -> TestRng {
    TestRng::deterministic_rng(RngAlgorithm::ChaCha)
}

/// 10 per second and 40 per 10 s, both raisable to 60.
fn two_windows() -> Rule {
    let window = |limit, window_ms| {
        let quota = Quota::new(limit, window_ms).unwrap();
        RuleWindow::log(quota).with_max_limit(60).unwrap()
    };
    Rule::new([window(10, 1_000), window(40, 10_000)]).unwrap()
}

/// Rounds of 3 threads deciding on a hot key (all at one millisecond, so both windows hold
/// every admission) while a fourth changes both limits up and down at random, then publishes
/// final ones. A decision reads the live limits once, so:
/// - every decision names a limit some `set_limit` wrote (never torn or of another window);
/// - the admissions made while limits moved are at most the smaller over the windows of the
///   largest limit written to each;
/// - once every decider has seen the final limits, exactly the difference to the smaller
///   final limit is admitted more (none when the window already holds more: a lowered limit
///   refuses until it drains).
#[test]
fn threads_deciding_while_limits_change_admit_no_more_than_the_limits_allow() {
    let words: Vec<AtomicU64> = (0..(1 << 17)).map(|_| AtomicU64::new(0)).collect();
    let (zone, _) = Zone::attach(&words[..], two_windows(), 16, Thread(1), [4, 2]).unwrap();
    let mut draw = draw();
    for round in 0..16u64 {
        let key = format!("hot-{round}");
        let now = round as i64 * 100_000;
        // Per window, every limit the round writes, in order; the last one is final.
        let written: [Vec<u64>; 2] =
            [0, 1].map(|_| (0..16).map(|_| draw.random_range(1..=60)).collect());
        for (w, limits) in written.iter().enumerate() {
            zone.set_limit(w, limits[0]).unwrap();
        }
        let published = AtomicBool::new(false);
        let admitted = AtomicU64::new(0);
        let phases = Barrier::new(4);
        let before = std::thread::scope(|s| {
            for t in 0..3 {
                let (words, key, written) = (&words, &key, &written);
                let (published, admitted, phases) = (&published, &admitted, &phases);
                s.spawn(move || {
                    let owner = Thread(10 + t);
                    let (zone, _) =
                        Zone::attach(&words[..], two_windows(), 16, owner, [0, 0]).unwrap();
                    let decide = || {
                        let d = zone.check_at(key.as_bytes(), now, 1).unwrap();
                        assert!(written[d.window].contains(&d.limit), "{d:?}");
                        admitted.fetch_add(u64::from(d.allowed), Ordering::Relaxed);
                    };
                    while !published.load(Ordering::Acquire) {
                        decide();
                    }
                    phases.wait(); // every call made before the final limits has returned
                    phases.wait(); // and been counted
                    for _ in 0..100 {
                        decide();
                    }
                });
            }
            for i in 1..16 {
                for (w, limits) in written.iter().enumerate() {
                    zone.set_limit(w, limits[i]).unwrap();
                    std::thread::yield_now();
                }
            }
            published.store(true, Ordering::Release);
            phases.wait();
            let before = admitted.load(Ordering::Relaxed);
            phases.wait();
            before
        });
        let most = written.clone().map(|w| w.into_iter().max().unwrap());
        assert!(
            before <= most[0].min(most[1]),
            "round {round}: {before} admitted while the limits were at most {most:?}"
        );
        let last = written.clone().map(|w| *w.last().unwrap());
        let after = admitted.load(Ordering::Relaxed) - before;
        assert_eq!(
            after,
            last[0].min(last[1]).saturating_sub(before),
            "round {round}: {before} admitted, then limits {last:?}"
        );
    }
}

/// Sleeps a random 200 to 900 µs: the instant a round's children are killed.
fn sleep_a_little(draw: &mut TestRng) {
    std::thread::sleep(Duration::from_micros(draw.random_range(200..900)));
}

/// Kills and reaps `children`.
fn kill_all(children: Vec<libc::pid_t>) {
    for &child in &children {
        kill(child);
    }
    for child in children {
        wait(child);
    }
}

/// Runs `check` until it returns, failing when it takes 2 s: a lock left by a killed child
/// must be taken over, not waited for.
fn within_2_s<T>(check: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let answer = check();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "a lock was waited for"
    );
    answer
}

/// Rounds of processes SIGKILLed at random instants: two set limits of a two-window rule
/// (each from its own list of values), two decide, peek and uncommit on a hot key. After each
/// round every live limit is one some process wrote, the version never went back, and every
/// lock is taken over at once; after all rounds the hot key still holds its limit exactly.
#[test]
fn processes_killed_while_setting_limits_and_deciding_leave_them_consistent() {
    let mapping = Mapping::new(1 << 20);
    let rule = Rule::new([
        RuleWindow::log(Quota::new(50, 1_000).unwrap()),
        RuleWindow::buckets(BucketQuota::new(100, 10_000, 100).unwrap()),
    ])
    .unwrap();
    let rule = Rule::new(
        rule.windows()
            .iter()
            .map(|w| w.with_max_limit(1_000).unwrap()),
    )
    .unwrap();
    let (zone, _) = Zone::attach(mapping.words(), rule.clone(), 16, ProcessOwner, [5, 6]).unwrap();
    let values: [&[u64]; 2] = [&[50, 7, 333, 999], &[100, 11, 222, 1_000]];
    let mut draw = draw();
    let mut version = zone.limits_version();
    for round in 0..30i64 {
        let now = 1_000 + round;
        let setters = (0..2u64).map(|c| {
            fork(|| {
                for i in 0u64.. {
                    let w = ((i + c) % 2) as usize;
                    zone.set_limit(w, values[w][(i as usize / 2) % values[w].len()])
                        .unwrap();
                }
            })
        });
        let deciders = (0..2).map(|_| {
            fork(|| loop {
                zone.check_at(b"hot", now, 1).unwrap();
                zone.peek_at(b"hot", now, 2).unwrap();
                zone.uncommit_at(b"hot", now, 1).unwrap();
                zone.check_at(b"cold", now, 1).unwrap();
            })
        });
        let children: Vec<_> = setters.chain(deciders).collect();
        sleep_a_little(&mut draw);
        kill_all(children);
        let limits = zone.limits();
        for w in 0..2 {
            assert!(values[w].contains(&limits[w]), "round {round}: {limits:?}");
        }
        assert!(zone.limits_version() >= version, "round {round}");
        version = zone.limits_version();
        within_2_s(|| {
            zone.check_at(b"hot", now, 1).unwrap();
            zone.check_at(b"cold", now, 1).unwrap();
        });
    }
    // After the storm: limits set once more hold exactly, on a key's fresh windows.
    assert!(
        zone.stats().repairs > 0,
        "some child was killed holding a lock"
    );
    zone.set_limit(0, 5).unwrap();
    zone.set_limit(1, 7).unwrap();
    assert_eq!(zone.limits_version(), version + 2);
    zone.reset(b"hot");
    let admitted = (0..20)
        .filter(|_| zone.check_at(b"hot", 1_000_000, 1).unwrap().allowed)
        .count();
    assert_eq!(admitted, 5);
    zone.set_limit(0, 10).unwrap();
    let d = zone.check_at(b"hot", 1_000_000, 1).unwrap();
    assert_eq!((d.allowed, d.window, d.remaining), (true, 1, 1));
}

fn log_rule(limit: u64, window_ms: i64) -> Rule {
    let window = RuleWindow::log(Quota::new(limit, window_ms).unwrap());
    Rule::one(window.with_max_limit(10).unwrap())
}

/// Rounds of processes SIGKILLed at random instants while they put rules (new ones, and the
/// same ones with other limits), decide on them and remove them. After each round the table's
/// lock is taken over at once and every rule it names is found and decides; after all rounds,
/// with every rule removed and the grace passed, no page is held: a rule the size of the whole
/// region fits.
#[test]
fn processes_killed_while_putting_and_removing_rules_leave_the_table_usable() {
    // 16 entries of the table take 2 of the 40 pages.
    let mapping = Mapping::new(40 * PAGE_BYTES);
    let rules = Directory::attach(mapping.words(), 16, ProcessOwner, [7, 8]).unwrap();
    let pages = rules.stats(0).pages;
    // Rules the children put and decided on, counted across the fork.
    let progress = Mapping::new(PAGE_BYTES);
    let puts = &progress.words()[0];
    let mut draw = draw();
    for round in 0..30i64 {
        let children: Vec<_> = (0..3i64)
            .map(|c| {
                fork(|| {
                    for i in 0i64.. {
                        let name = format!("r{}", (i + c) % 6);
                        let now = round * 100_000 + i;
                        // Other limits keep a rule's pages; another window moves it.
                        let (limit, window_ms) = (1 + (i % 5) as u64, 1_000 * (1 + i / 5 % 2));
                        // Room runs out now and then (pages held for the grace): not a failure.
                        if let Ok(found) = rules.put(
                            name.as_bytes(),
                            &log_rule(limit, window_ms),
                            16,
                            PAGE_BYTES,
                            now,
                        ) {
                            let zone = rules.zone(&found, ProcessOwner).unwrap();
                            zone.check_at(b"k", now, 1).unwrap();
                            puts.fetch_add(1, Ordering::Relaxed);
                        }
                        if i % 3 == c {
                            rules.remove(name.as_bytes(), now);
                        }
                    }
                })
            })
            .collect();
        sleep_a_little(&mut draw);
        kill_all(children);
        let names = within_2_s(|| rules.names());
        assert!(names.len() <= 6, "round {round}: {names:?}");
        // Past the grace of every removal, a rule holds its one page and no page is lost.
        let stats = rules.stats(round * 100_000 + 50_000);
        assert_eq!(
            stats.pages_used,
            names.len() as u64,
            "round {round}: {stats:?}"
        );
        for name in names {
            let found = rules.find(&name).expect("a rule the table names is found");
            assert!(rules.is_current(&found));
            let zone = rules.zone(&found, ProcessOwner).unwrap();
            zone.check_at(b"k", round * 100_000 + 50_000, 1).unwrap();
        }
    }
    assert!(puts.load(Ordering::Relaxed) > 100, "the children put rules");
    let late = 10_000_000;
    for name in rules.names() {
        assert!(rules.remove(&name, late));
    }
    let stats = rules.stats(late + GRACE_MS);
    assert_eq!((stats.rules, stats.pages_used), (0, 0), "{stats:?}");
    let whole = pages as usize * PAGE_BYTES;
    let found = rules
        .put(b"all", &log_rule(3, 1_000), 16, whole, late + GRACE_MS)
        .unwrap();
    let zone = rules.zone(&found, ProcessOwner).unwrap();
    let admitted = (0..5)
        .filter(|_| zone.check_at(b"k", late + GRACE_MS, 1).unwrap().allowed)
        .count();
    assert_eq!(admitted, 3);
}
