//! A process killed at any store of a call (`slidewin::shared::fault`): the next owner takes
//! the lock over and repairs the set, and then every other key answers exactly as before the
//! call, and the key of the call counts at least what it counted before it.
//!
//! Each case runs one call again and again on a copy of the same region, the thread stopped
//! (parked, its lock held, its owner marked dead) right after its first store, its second,
//! and so on until the call finishes first. Run with
//! `cargo test -p slidewin --features fault-points --test kill_points`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use slidewin::lease::{Grant, LeaseConfig};
use slidewin::reservation::Amend;
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{fault, Inflight, InflightConfig, KeyWindow, Leases, Owner, Spent, Zone};
use slidewin::{BucketQuota, Quota};

/// Owner ids marked dead: those of the threads stopped at a kill point.
static DEAD: Mutex<Vec<u64>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One process: a thread with its own id, alive until it is stopped at a kill point.
#[derive(Debug, Clone, Copy)]
struct Worker(u64);

impl Worker {
    fn new() -> Self {
        Self(NEXT_ID.fetch_add(1, Relaxed))
    }
}

impl Owner for Worker {
    fn id(&self) -> u64 {
        self.0
    }
    fn is_alive(&self, id: u64) -> bool {
        !DEAD.lock().unwrap().contains(&id)
    }
    fn pause(&self) {
        std::thread::yield_now();
    }
}

type Region = Arc<[AtomicU64]>;

fn zeroed(words: usize) -> Region {
    (0..words).map(|_| AtomicU64::new(0)).collect()
}

fn copy(words: &[AtomicU64]) -> Region {
    words
        .iter()
        .map(|w| AtomicU64::new(w.load(Relaxed)))
        .collect()
}

/// Runs `call` on a new thread as a new worker killed right after its `stores`-th store into
/// a region: true when it died there (its lock held, its id dead), false when it finished.
fn dies_at(stores: u64, worker: Worker, call: impl FnOnce(Worker) + Send + 'static) -> bool {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let died = tx.clone();
            fault::stop_after(stores, move || {
                DEAD.lock().unwrap().push(worker.0);
                died.send(true).unwrap();
                loop {
                    std::thread::park();
                }
            });
            call(worker);
            if fault::disarm() {
                tx.send(false).unwrap();
            }
        })
        .unwrap();
    rx.recv().expect("the call panicked")
}

/// Kills `call` by `worker` on copies of `before` at its 1st, 2nd, ... store until it
/// finishes, handing each killed copy to `check` (which takes the lock over first); how many
/// kill points ran.
fn each_kill_point(
    before: &[AtomicU64],
    worker: Worker,
    call: impl Fn(&Region, Worker) + Send + Sync + 'static,
    mut check: impl FnMut(u64, &Region),
) -> u64 {
    let call = Arc::new(call);
    for stores in 1.. {
        let killed = copy(before);
        let (call, words) = (call.clone(), killed.clone());
        if !dies_at(stores, worker, move |worker| call(&words, worker)) {
            assert!(stores > 1, "the call stored nothing");
            return stores - 1;
        }
        check(stores, &killed);
    }
    unreachable!()
}

const KEY_BYTES: usize = 16;

fn key(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// A zone's case: a rule, calls that fill one set of 8 keys, then the call a process dies in.
struct ZoneCase {
    name: &'static str,
    rule: Rule,
    /// (key, time, cost), in time order.
    setup: Vec<(Vec<u8>, i64, u64)>,
    /// (key, time, cost): a check, or with a stamp, cost given back (or owed) at that stamp.
    call: (Vec<u8>, i64, u64),
    stamp_ms: Option<i64>,
    /// With a stamp: the cost is owed there, not given back.
    owe: bool,
    /// Probes from the call's time, `step_ms` apart, until every window has drained.
    step_ms: i64,
}

impl ZoneCase {
    fn zone(&self, words: &Region, owner: Worker) -> Zone<Region, Worker> {
        Zone::open(words.clone(), self.rule.clone(), KEY_BYTES, owner).unwrap()
    }

    /// The call, on the zone of `words`.
    fn call(&self, words: &Region, owner: Worker) {
        let (key, now_ms, cost) = &self.call;
        let zone = self.zone(words, owner);
        match self.stamp_ms {
            None => drop(zone.check_at(key, *now_ms, *cost).unwrap()),
            Some(stamp_ms) => {
                let amend = match self.owe {
                    true => Amend::Owe(*cost),
                    false => Amend::GiveBack(*cost),
                };
                zone.amend_at(key, *now_ms, Some(stamp_ms), amend).unwrap()
            }
        }
    }

    /// What `key` counts from the call's time on, in a copy of `words` (whose lock is taken
    /// over first when its owner died): one cost recorded at the call's time under the
    /// windows' `max_limit` (so it is recorded in every copy alike, and lands in the head
    /// bucket the state names), then the key's windows every `step_ms`.
    fn probe(&self, words: &Region, key: &[u8]) -> Vec<KeyWindow> {
        let words = copy(words);
        let zone = self.zone(&words, Worker::new());
        for (w, window) in self.rule.windows().iter().enumerate() {
            zone.set_limit(w, window.max_limit()).unwrap();
        }
        let longest = self.rule.windows().iter().map(|w| w.window_ms()).max();
        let (_, now_ms, _) = self.call;
        let end_ms = now_ms + 2 * longest.unwrap() + self.step_ms;
        assert!(zone.check_at(key, now_ms, 1).unwrap().allowed);
        (now_ms..=end_ms)
            .step_by(self.step_ms as usize)
            .map(|t| zone.window_at(key, t, 1).unwrap())
            .collect()
    }

    fn run(self) {
        let sets_of_one = Zone::<Region, Worker>::bytes_per_key(&self.rule, KEY_BYTES).unwrap();
        let words = zeroed(32 + sets_of_one);
        let (zone, _) = Zone::attach(
            words.clone(),
            self.rule.clone(),
            KEY_BYTES,
            Worker::new(),
            [3, 5],
        )
        .unwrap();
        assert_eq!(zone.capacity(), 8, "one set");
        for (key, now_ms, cost) in &self.setup {
            zone.check_at(key, *now_ms, *cost).unwrap();
        }
        let before = copy(&words);
        let after = copy(&before);
        let call_key = self.call.0.clone();
        self.call(&after, Worker::new());
        let mut keys: Vec<Vec<u8>> = self.setup.iter().map(|(k, _, _)| k.clone()).collect();
        keys.push(call_key.clone());
        keys.sort();
        keys.dedup();
        let expected: Vec<_> = keys
            .iter()
            .map(|k| (self.probe(&before, k), self.probe(&after, k)))
            .collect();
        let (mut as_before, mut as_after, mut conservative) = (0, 0, 0);
        let case = Arc::new(self);
        let run = case.clone();
        let kill_points = each_kill_point(
            &before,
            Worker::new(),
            move |words, worker| run.call(words, worker),
            |stores, killed| {
                for (key, (before, after)) in keys.iter().zip(&expected) {
                    let found = case.probe(killed, key);
                    let at = || format!("{}: killed at store {stores}, key {key:?}", case.name);
                    if *key != call_key {
                        // Another key: as it was (or gone, when the call evicted it).
                        assert!(found == *before || found == *after, "{}", at());
                        continue;
                    }
                    if found == *before {
                        as_before += 1;
                    } else if found == *after {
                        as_after += 1;
                    } else {
                        conservative += 1;
                    }
                    // A check or a debt counts at least what the key counted before it; a
                    // give-back at least what it counts after it (never less than was used).
                    let floor = if case.stamp_ms.is_some() && !case.owe {
                        after
                    } else {
                        before
                    };
                    for (i, (found, floor)) in found.iter().zip(floor).enumerate() {
                        for (w, (f, b)) in found.windows.iter().zip(&floor.windows).enumerate() {
                            assert!(
                                f.count >= b.count,
                                "{}: probe {i}, window {w} counts {} < {}",
                                at(),
                                f.count,
                                b.count
                            );
                        }
                    }
                    let drained = found.last().unwrap().windows.iter().all(|u| u.count == 0);
                    assert!(drained, "{}: never drains", at());
                }
            },
        );
        println!(
            "{}: {kill_points} kill points: the key as before {as_before}, as after \
             {as_after}, in between {conservative}",
            case.name
        );
    }
}

/// Eight keys called in turn from `start_ms`, `step_ms` apart (key 7 only at 0 when `idle`),
/// costs of 1 and 2.
fn eight_keys(start_ms: i64, step_ms: i64, calls: usize, idle: bool) -> Vec<(Vec<u8>, i64, u64)> {
    let mut setup = Vec::new();
    for round in 0..calls {
        for k in 0..8 {
            let now_ms = start_ms + (round * 8 + k) as i64 * step_ms;
            if k == 7 && idle {
                if round == 0 {
                    setup.insert(0, (key(7), 0, 1));
                }
                continue;
            }
            setup.push((key(k), now_ms, 1 + (round + k) as u64 % 2));
        }
    }
    setup
}

/// The four calls of a rule: an admitted check of a held key, a refused one, a new key that
/// evicts the least recently used, and a new key that takes an idle key's way.
fn zone_cases(
    name: &'static str,
    rule: Rule,
    (start_ms, step_ms, calls): (i64, i64, usize),
    now_ms: i64,
    idle_ms: i64,
    probe_ms: i64,
) {
    let busy = eight_keys(start_ms, step_ms, calls, false);
    let case = |what: &str, setup: &Vec<_>, call: (Vec<u8>, i64, u64)| ZoneCase {
        name: Box::leak(format!("{name}, {what}").into_boxed_str()),
        rule: rule.clone(),
        setup: setup.clone(),
        call,
        stamp_ms: None,
        owe: false,
        step_ms: probe_ms,
    };
    case("a held key admitted", &busy, (key(0), now_ms, 1)).run();
    case("a held key refused", &busy, (key(1), now_ms, 1_000)).run();
    case("a new key evicting", &busy, (key(8), now_ms, 1)).run();
    let idle = eight_keys(idle_ms, step_ms, calls, true);
    let idle_at = idle.last().unwrap().1 + step_ms;
    case("a new key reclaiming", &idle, (key(8), idle_at, 1)).run();
}

fn max4(window: RuleWindow) -> RuleWindow {
    let max_limit = window.limit() * 4;
    window.with_max_limit(max_limit).unwrap()
}

#[test]
fn buckets_of_the_field_report() {
    let rule = Rule::new([
        max4(RuleWindow::buckets(
            BucketQuota::new(10, 1_000, 100).unwrap(),
        )),
        max4(RuleWindow::buckets(
            BucketQuota::new(50, 10_000, 1_000).unwrap(),
        )),
    ])
    .unwrap();
    zone_cases("buckets", rule, (9_000, 23, 6), 10_260, 20_000, 50);
}

#[test]
fn a_log_whose_ring_is_full() {
    // 8 per 8 ms keeps 8 entries: the call at 8 pops the entry at 0 and takes its slot.
    let rule = Rule::one(max4(RuleWindow::log(Quota::new(8, 8).unwrap())));
    let setup: Vec<_> = (0..8)
        .flat_map(|t| (0..8).map(move |k| (key(k), t, 1)))
        .collect();
    let case = |what, call| ZoneCase {
        name: what,
        rule: rule.clone(),
        setup: setup.clone(),
        call,
        stamp_ms: None,
        owe: false,
        step_ms: 1,
    };
    case("full log, a held key admitted", (key(0), 8, 1)).run();
    case(
        "full log, a held key admitted after two left",
        (key(0), 9, 2),
    )
    .run();
    case("full log, a held key refused", (key(1), 8, 9)).run();
}

#[test]
fn a_log_and_a_counter() {
    let rule = Rule::new([
        max4(RuleWindow::log(Quota::new(6, 1_000).unwrap())),
        max4(RuleWindow::counter(Quota::new(20, 5_000).unwrap())),
    ])
    .unwrap();
    zone_cases("log and counter", rule, (4_000, 37, 4), 5_150, 20_000, 50);
}

#[test]
fn a_log_alone() {
    let rule = Rule::one(max4(RuleWindow::log(Quota::new(5, 1_000).unwrap())));
    zone_cases("log", rule, (500, 41, 3), 1_520, 10_000, 25);
}

#[test]
fn a_counter_alone() {
    let rule = Rule::one(max4(RuleWindow::counter(Quota::new(5, 1_000).unwrap())));
    zone_cases("counter", rule, (500, 41, 3), 1_520, 10_000, 25);
}

#[test]
fn buckets_alone() {
    let rule = Rule::one(max4(RuleWindow::buckets(
        BucketQuota::new(5, 1_000, 100).unwrap(),
    )));
    zone_cases("buckets alone", rule, (500, 41, 3), 1_520, 10_000, 25);
}

const INFLIGHT_KEY_BYTES: usize = 16;

fn inflight(words: &Region, owner: Worker) -> Inflight<Region, Worker> {
    let config = InflightConfig::new(3, 4, 60_000).unwrap();
    Inflight::attach(words.clone(), config, INFLIGHT_KEY_BYTES, owner, [3, 5])
        .unwrap()
        .0
}

/// One Inflight call killed at each store: every key then holds, once its dead owners are
/// swept, exactly the slots it held before (the dying worker's own slots leave with it); a
/// remove cut short may count one live slot twice until it leaves or expires.
fn inflight_case(
    name: &str,
    words: &Region,
    worker: Worker,
    now_ms: i64,
    call: impl Fn(&Inflight<Region, Worker>) + Send + Sync + 'static,
) {
    let before = copy(words);
    let after = copy(words);
    call(&inflight(&after, worker));
    let held = |words: &Region| -> Vec<u64> {
        let slots = inflight(&copy(words), Worker::new());
        (0..9)
            .map(|k| slots.inflight_at(&key(k), now_ms).unwrap())
            .collect()
    };
    let kill_points = each_kill_point(
        &before,
        worker,
        move |words, worker| call(&inflight(words, worker)),
        |stores, killed| {
            // Asked now, with the dying worker dead, as the killed copy is.
            let (before, after, found) = (held(&before), held(&after), held(killed));
            assert_eq!(before, after, "{name}: the dying worker's slots are swept");
            for (k, (found, before)) in found.iter().zip(&before).enumerate() {
                assert!(
                    (*before..=before + 1).contains(found),
                    "{name}: killed at store {stores}, key {k} holds {found}, {before} before"
                );
            }
        },
    );
    println!("{name}: {kill_points} kill points");
}

#[test]
fn inflight_enter_leave_sweep_and_new_keys() {
    let config = InflightConfig::new(3, 4, 60_000).unwrap();
    let bytes = Inflight::<Region, Worker>::bytes_for(&config, INFLIGHT_KEY_BYTES, 8).unwrap();
    let words = zeroed(bytes / 8);
    let (setup, workers) = (
        inflight(&words, Worker::new()),
        [Worker::new(), Worker::new()],
    );
    assert_eq!(setup.capacity(), 8, "one set");
    let leaver = Worker::new();
    // Key 0 full: one slot from 0 (expired at 60_000), two live; keys 1..7 one or two live.
    for (k, now_ms) in [(0, 0), (0, 50_000), (0, 50_001)] {
        inflight(&words, workers[k])
            .enter_at(&key(0), now_ms)
            .unwrap();
    }
    for k in 1..8 {
        for i in 0..1 + k % 2 {
            let worker = workers[i % 2];
            let entry = inflight(&words, worker)
                .enter_at(&key(k), 50_000 + k as i64)
                .unwrap();
            assert!(entry.admitted);
        }
    }
    let token = inflight(&words, leaver)
        .enter_at(&key(1), 50_100)
        .unwrap()
        .token;
    let now_ms = 60_500;
    let worker = Worker::new();
    inflight_case(
        "inflight, a held key entered",
        &words,
        worker,
        now_ms,
        move |s| {
            s.enter_at(&key(3), now_ms).unwrap();
        },
    );
    inflight_case(
        "inflight, a full key swept and entered",
        &words,
        worker,
        now_ms,
        move |s| {
            assert!(s.enter_at(&key(0), now_ms).unwrap().admitted);
        },
    );
    inflight_case("inflight, a slot left", &words, leaver, now_ms, move |s| {
        assert!(s.leave_at(&key(1), token).unwrap());
    });
    inflight_case("inflight, a new key", &words, worker, now_ms, move |s| {
        s.enter_at(&key(8), now_ms).unwrap();
    });
}

const LEASE_KEY_BYTES: usize = 16;
/// The words a repair of the one set writes besides the keys' ways (leases.rs): the set's
/// next sweep time and the header's count of repairs.
const LEASE_REPAIR_WORDS: [usize; 2] = [16 + 1, 13];
/// Where the one set's tags and ways are (leases.rs, keys of 16 bytes).
const LEASE_TAGS: usize = 16 + 8;
const LEASE_WAYS: usize = LEASE_TAGS + 8;
const LEASE_WAY_WORDS: usize = 2 + 2 + 20 + 8 * 5;

/// The way word `i` belongs to (its tag, or a word of the way).
fn lease_way_of(i: usize) -> Option<usize> {
    let way = (LEASE_TAGS..LEASE_WAYS)
        .contains(&i)
        .then_some(i - LEASE_TAGS);
    way.or_else(|| (i >= LEASE_WAYS).then(|| (i - LEASE_WAYS) / LEASE_WAY_WORDS))
}

/// The way a call gave a new key (its tag changed), if it did.
fn way_taken(before: &[AtomicU64], after: &[AtomicU64]) -> Option<usize> {
    let tag = |words: &[AtomicU64], way: usize| words[LEASE_TAGS + way].load(Relaxed);
    (0..8).find(|&way| tag(before, way) != tag(after, way))
}

fn leases(words: &Region, owner: Worker) -> Leases<Region, Worker> {
    let config = LeaseConfig::new(1_000, None, 100).unwrap();
    Leases::attach(words.clone(), config, LEASE_KEY_BYTES, owner, [3, 5])
        .unwrap()
        .0
}

/// Units `key` spends at `now_ms` with no call, in a copy of `words`.
fn spendable(words: &Region, key: &[u8], now_ms: i64) -> u64 {
    let table = leases(&copy(words), Worker::new());
    let spent = (0..1_000).take_while(|_| {
        matches!(
            table.spend_at(key, now_ms, 1, &[50]).unwrap(),
            Spent::Admitted { .. }
        )
    });
    spent.count() as u64
}

/// One Leases call on `key` killed at each store: once a survivor took the lock over, every
/// word of the region is as before the call or as after it (so no other key's lease or
/// settlements changed; a new key's way apart), and the key spends no more units with no
/// call than it could before or after.
fn lease_case(
    name: &str,
    words: &Region,
    key: Vec<u8>,
    now_ms: i64,
    call: impl Fn(&Leases<Region, Worker>) + Send + Sync + 'static,
) {
    let before = copy(words);
    let after = copy(words);
    call(&leases(&after, Worker::new()));
    let most = spendable(&before, &key, now_ms).max(spendable(&after, &key, now_ms));
    // A new key's way is emptied, then written: between, its words are neither.
    let taken = way_taken(&before, &after);
    let kill_points = each_kill_point(
        &before,
        Worker::new(),
        move |words, worker| call(&leases(words, worker)),
        |stores, killed| {
            leases(killed, Worker::new())
                .refund_at(&key, now_ms, 0)
                .unwrap();
            for (i, word) in killed.iter().enumerate() {
                let word = word.load(Relaxed);
                let kept = [&before, &after].iter().any(|w| w[i].load(Relaxed) == word);
                assert!(
                    kept || LEASE_REPAIR_WORDS.contains(&i) || lease_way_of(i) == taken,
                    "{name}: killed at store {stores}, word {i} is {word}"
                );
            }
            let found = spendable(killed, &key, now_ms);
            assert!(
                found <= most,
                "{name}: killed at store {stores}: {found} units"
            );
        },
    );
    println!("{name}: {kill_points} kill points");
}

#[test]
fn leases_spend_install_fail_and_settle() {
    let bytes = Leases::<Region, Worker>::bytes_for(LEASE_KEY_BYTES, 8).unwrap();
    let words = zeroed(bytes / 8);
    let table = leases(&words, Worker::new());
    assert_eq!(table.capacity(), 8, "one set");
    let limits = [50];
    let grant = |granted| Grant {
        granted,
        remaining: 20,
        ..Grant::default()
    };
    let mut fetches = Vec::new();
    for k in 0..8 {
        let Spent::Fetch(fetch) = table.spend_at(&key(k), 0, 1, &limits).unwrap() else {
            panic!("no lease yet")
        };
        table
            .install_at(&key(k), &fetch, 1, 1, &limits, &grant(10))
            .unwrap();
        for now_ms in 2..4 {
            table.spend_at(&key(k), now_ms, 1, &limits).unwrap();
        }
        fetches.push(fetch);
    }
    // Key 1 has a failed call to settle; key 2 a call whose answer is due.
    let Spent::Fetch(failed) = table.spend_at(&key(1), 1_500, 1, &limits).unwrap() else {
        panic!("the lease ended")
    };
    table.fail_at(&key(1), &failed, 1_501).unwrap();
    let Spent::Fetch(next) = table.spend_at(&key(2), 1_500, 1, &limits).unwrap() else {
        panic!("the lease ended")
    };
    lease_case("leases, a lease spent", &words, key(0), 5, |t| {
        t.spend_at(&key(0), 5, 1, &[50]).unwrap();
    });
    lease_case(
        "leases, a grant installed",
        &words,
        key(2),
        1_502,
        move |t| {
            t.install_at(&key(2), &next, 1_502, 1, &[50], &grant(10))
                .unwrap();
        },
    );
    let failed_again = failed.clone();
    lease_case("leases, a call failed", &words, key(1), 1_502, move |t| {
        t.fail_at(&key(1), &failed_again, 1_502).unwrap();
    });
    lease_case("leases, settled", &words, key(1), 1_502, move |t| {
        t.settled(&key(1), failed.seq);
    });
    lease_case("leases, a new key evicting", &words, key(8), 1_600, |t| {
        t.spend_at(&key(8), 1_600, 1, &[50]).unwrap();
    });
}

/// Cost given back at an earlier stamp of a key whose windows hold cost before and after it
/// (a reservation settled for less): a log drops entries in the middle and moves the later
/// ones down; buckets and a counter take from the stamp's bucket or fixed window. Or owed
/// there (settled for more, in debt mode).
fn give_back_cases(name: &'static str, rule: Rule) {
    // Key 0: costs 1, 2, 3, 1, 2, ... at 100, 110, ..., 190; the other keys once each.
    let mut setup: Vec<_> = (0..10)
        .map(|i| (key(0), 100 + 10 * i, 1 + i as u64 % 3))
        .collect();
    setup.extend((1..8).map(|k| (key(k), 200 + k as i64, 1)));
    let case = |what: &str, stamp_ms, cost, owe| ZoneCase {
        name: Box::leak(format!("{name}, {what}").into_boxed_str()),
        rule: rule.clone(),
        setup: setup.clone(),
        call: (key(0), 300, cost),
        stamp_ms: Some(stamp_ms),
        owe,
        step_ms: 25,
    };
    case("part of one entry", 140, 1, false).run();
    case("entries dropped, later ones moved", 150, 6, false).run();
    case("everything up to the stamp", 120, 100, false).run();
    case("the newest", 190, 2, false).run();
    // Debts: the entries from the stamp's on raise their sums, the newest first.
    case("owed in the middle", 140, 5, true).run();
    case("owed at the oldest", 100, 3, true).run();
    case("owed past the limit", 150, 50, true).run();
}

#[test]
fn give_backs_and_debts_at_a_stamp() {
    let log = RuleWindow::log(Quota::new(20, 1_000).unwrap());
    give_back_cases("log", Rule::one(max4(log)));
    let buckets = RuleWindow::buckets(BucketQuota::new(20, 1_000, 50).unwrap());
    let counter = RuleWindow::counter(Quota::new(20, 160).unwrap());
    give_back_cases(
        "log, buckets, counter",
        Rule::new([log, buckets, counter].map(max4)).unwrap(),
    );
}
