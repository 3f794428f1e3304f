//! The shared lease table against a naive model of one node's leases, and under threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use slidewin::lease::{want, Grant, Lease, LeaseConfig, Settlement, Spend};
use slidewin::shared::{Fetch, Leases, Owner, Spent, SETTLE_SLOTS};

struct Threads;
impl Owner for Threads {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

fn region(keys: usize) -> Vec<AtomicU64> {
    let bytes = Leases::<&[AtomicU64], Threads>::bytes_for(16, keys).unwrap();
    (0..bytes / 8).map(|_| AtomicU64::new(0)).collect()
}

/// One key's leases as plain values: what the table must answer.
#[derive(Default)]
struct ModelKey {
    lease: Lease,
    remote: u64,
    rate: f64,
    refused: Option<(i64, u64)>,
    /// The call in flight that others wait for: its sequence, until when.
    claim: Option<(u64, i64)>,
    settle: Vec<(Settlement, u64, u64)>,
}

struct Model {
    keys: HashMap<u8, ModelKey>,
    /// The V of the next calls: raised by grants that came too late to spend.
    validity: u64,
}

impl Model {
    fn end(&mut self, key: u8, lease: Lease, now: i64) {
        let k = self.keys.entry(key).or_default();
        if k.lease.seq == lease.seq {
            k.lease = Lease::default();
            let elapsed = now - lease.sent_ms;
            k.rate = slidewin::lease::next_rate(k.rate, lease.spent, elapsed);
        }
        if lease.unspent() > 0 {
            k.refused = None;
        }
        k.push(lease.settlement(), lease.unspent());
    }

    fn settle_text(&self, key: u8, node: u64) -> String {
        let k = &self.keys[&key];
        let items: Vec<String> = k.settle.iter().map(|(s, _, _)| s.text(node)).collect();
        items.join(" ")
    }
}

impl ModelKey {
    fn claimed(&self, now: i64) -> bool {
        self.claim.is_some_and(|(_, until)| until > now)
    }

    fn release(&mut self, seq: u64) {
        if self.claim.is_some_and(|(s, _)| s == seq) {
            self.claim = None;
        }
    }

    fn push(&mut self, s: Settlement, unspent: u64) {
        if self.settle.len() == SETTLE_SLOTS {
            let least = (0..SETTLE_SLOTS).min_by_key(|&i| (self.settle[i].1, i));
            self.settle.remove(least.unwrap());
        }
        self.settle.push((s, unspent, 0));
    }
}

#[derive(Debug, Clone)]
enum Op {
    Spend {
        key: u8,
        cost: u64,
    },
    Answer {
        granted: u64,
        retry: u64,
        late: bool,
    },
    Fail,
}

fn op() -> impl Strategy<Value = (i64, Op)> {
    let spend = (0u8..3, 0u64..4).prop_map(|(key, cost)| Op::Spend { key, cost });
    let answer = (0u64..6, 0u64..50, any::<bool>()).prop_map(|(granted, retry, late)| Op::Answer {
        granted,
        retry,
        late,
    });
    (
        0i64..30,
        prop_oneof![3 => spend, 2 => answer, 1 => Just(Op::Fail)],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_table_answers_as_the_naive_model(ops in prop::collection::vec(op(), 1..120)) {
        let config = LeaseConfig::new(100, None, 50).unwrap();
        let words = region(64);
        let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
        let node = table.node_id();
        let mut model = Model { keys: HashMap::new(), validity: 100 };
        let limits = [10u64];
        let mut now = 1i64;
        // The calls in flight: (key, fetch, cost).
        let mut pending: Vec<(u8, Fetch, u64)> = Vec::new();
        for (dt, op) in ops {
            now += dt;
            match op {
                Op::Spend { key, cost } => {
                    let got = table.spend_at(&[key], now, cost, &limits).unwrap();
                    let k = model.keys.entry(key).or_default();
                    let mut lease = k.lease;
                    match lease.spend(&config, now, cost) {
                        Spend::Spent => {
                            k.lease = lease;
                            let Spent::Admitted { remaining, prefetch, .. } = got else {
                                panic!("model spent, table answered {got:?}");
                            };
                            prop_assert_eq!(remaining, lease.unspent() + k.remote);
                            let expected = lease.wants_next(&config, now, k.remote) && !k.claimed(now);
                            prop_assert_eq!(prefetch.is_some(), expected);
                            if let Some(f) = prefetch {
                                prop_assert_eq!(&f.settle, &model.settle_text(key, node));
                                prop_assert_eq!(f.validity_ms, model.validity);
                                let until = now + model.validity as i64;
                                let k = model.keys.get_mut(&key).unwrap();
                                k.settle.iter_mut().for_each(|e| e.2 = f.seq);
                                k.claim = Some((f.seq, until));
                                pending.push((key, f, 0));
                            }
                        }
                        _ => {
                            if lease.seq != 0 {
                                model.end(key, lease, now);
                            }
                            let k = model.keys.get_mut(&key).unwrap();
                            match k.refused {
                                Some((until, c)) if until > now && cost >= c => {
                                    let Spent::Refused { retry_after_ms, .. } = got else {
                                        panic!("model refused, table answered {got:?}");
                                    };
                                    prop_assert_eq!(retry_after_ms as i64, until - now);
                                }
                                _ if k.claimed(now) => {
                                    prop_assert_eq!(got, Spent::Wait);
                                }
                                _ => {
                                    let Spent::Fetch(f) = got else {
                                        panic!("model fetches, table answered {got:?}");
                                    };
                                    prop_assert_eq!(f.want, want(&config, k.rate, cost));
                                    prop_assert_eq!(&f.settle, &model.settle_text(key, node));
                                    prop_assert_eq!(f.validity_ms, model.validity);
                                    let until = now + model.validity as i64;
                                    let k = model.keys.get_mut(&key).unwrap();
                                    k.settle.iter_mut().for_each(|e| e.2 = f.seq);
                                    k.claim = Some((f.seq, until));
                                    pending.push((key, f, cost));
                                }
                            }
                        }
                    }
                }
                Op::Answer { granted, retry, late } => {
                    let Some((key, fetch, cost)) = pending.pop() else { continue };
                    let spend_ms = config.spend_ms_under(fetch.validity_ms);
                    let at = if late { fetch.sent_ms + spend_ms + 1 } else { now };
                    now = now.max(at);
                    let granted = if granted == 0 { 0 } else { granted.max(cost.max(1)) };
                    let grant = Grant {
                        granted, remaining: 7, retry_after_ms: Some(retry), ..Grant::default()
                    };
                    let got = table.install_at(&[key], &fetch, now, cost, &limits, &grant).unwrap();
                    // Settlements this call carried last are gone, its claim too.
                    let k = model.keys.entry(key).or_default();
                    k.settle.retain(|e| e.2 != fetch.seq);
                    k.release(fetch.seq);
                    if granted == 0 {
                        if retry > 0 {
                            k.refused = Some((now + retry as i64, cost.max(1)));
                        }
                        prop_assert_eq!(got, None);
                        continue;
                    }
                    let mut lease = Lease::granted(fetch.seq, granted, fetch.sent_ms, fetch.validity_ms);
                    if lease.spend(&config, now, cost) != Spend::Spent {
                        prop_assert_eq!(got, None);
                        if !lease.is_live(&config, now) {
                            let round_trip = (now - fetch.sent_ms) as u64;
                            let raised = config.raised_validity_ms(fetch.validity_ms, round_trip);
                            model.validity = model.validity.max(raised);
                        }
                        prop_assert_eq!(table.validity_ms(), model.validity);
                        model.end(key, lease, now);
                        continue;
                    }
                    let k = model.keys.get_mut(&key).unwrap();
                    k.refused = None;
                    let current = k.lease;
                    if current.seq != 0 && current.sent_ms > lease.sent_ms {
                        prop_assert_eq!(got.map(|a| a.remaining), Some(current.unspent() + k.remote));
                        model.end(key, lease, now);
                        continue;
                    }
                    if current.seq != 0 {
                        model.end(key, current, now);
                    }
                    let k = model.keys.get_mut(&key).unwrap();
                    k.lease = lease;
                    k.remote = 7;
                    prop_assert_eq!(got.map(|a| a.remaining), Some(lease.unspent() + 7));
                }
                Op::Fail => {
                    let Some((key, fetch, _)) = pending.pop() else { continue };
                    table.fail_at(&[key], &fetch, now).unwrap();
                    let nothing = Settlement { seq: fetch.seq, spent: 0, last_ms: 0 };
                    let k = model.keys.entry(key).or_default();
                    k.release(fetch.seq);
                    k.push(nothing, 1);
                }
            }
        }
        let granted_spent: u64 = table.stats().spent;
        prop_assert!(granted_spent <= table.stats().granted);
    }
}

/// Redis as far as the threads need it: a pool of units that never refills but for what
/// settlements give back.
struct Pool {
    left: u64,
    granted: u64,
    outstanding: HashMap<String, u64>,
}

impl Pool {
    fn call(&mut self, table: &Leases<&[AtomicU64], Threads>, fetch: &Fetch, cost: u64) -> Grant {
        for entry in fetch.settle.split(' ').filter(|e| !e.is_empty()) {
            let mut parts = entry.split(':');
            let (id, spent) = (parts.next().unwrap(), parts.next().unwrap());
            if let Some(units) = self.outstanding.remove(id) {
                let spent: u64 = spent.parse().unwrap();
                assert!(spent <= units, "{entry}: more spent than granted");
                self.left += units - spent;
            }
        }
        let granted = fetch.want.min(self.left);
        let granted = if granted < cost.max(1) { 0 } else { granted };
        self.left -= granted;
        self.granted += granted;
        self.outstanding
            .insert(table.id(fetch.seq).to_string(), granted);
        // Dry: refused for good, which the table then answers with no call.
        let retry = if granted == 0 { 1 << 40 } else { 0 };
        Grant {
            granted,
            retry_after_ms: Some(retry),
            ..Grant::default()
        }
    }
}

#[test]
fn threads_never_spend_a_unit_twice_nor_more_than_granted() {
    const THREADS: usize = 8;
    const SPENDS: usize = 4_000;
    let config = LeaseConfig::new(1_000_000, None, 64).unwrap();
    let words: &'static [AtomicU64] = Box::leak(region(64).into_boxed_slice());
    let (table, _) = Leases::attach(words, config, 16, Threads, [5, 6]).unwrap();
    let table = Arc::new(table);
    let pool = Arc::new(Mutex::new(Pool {
        left: 20_000,
        granted: 0,
        outstanding: HashMap::new(),
    }));
    let clock = Arc::new(AtomicU64::new(1));
    let admitted = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (table, pool, clock, admitted) =
                (table.clone(), pool.clone(), clock.clone(), admitted.clone());
            std::thread::spawn(move || {
                let mut decided = 0;
                while decided < SPENDS {
                    let now = clock.fetch_add(1, Ordering::Relaxed) as i64;
                    let answer =
                        |fetch: &Fetch, cost: u64| pool.lock().unwrap().call(&table, fetch, cost);
                    match table.spend_at(b"hot", now, 1, &[1]).unwrap() {
                        Spent::Admitted { prefetch, .. } => {
                            admitted.fetch_add(1, Ordering::Relaxed);
                            if let Some(f) = prefetch {
                                let g = answer(&f, 0);
                                table.install_at(b"hot", &f, now, 0, &[1], &g).unwrap();
                            }
                        }
                        Spent::Fetch(f) => {
                            let g = answer(&f, 1);
                            if table
                                .install_at(b"hot", &f, now, 1, &[1], &g)
                                .unwrap()
                                .is_some()
                            {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Spent::Refused { .. } => {}
                        // Another thread's call is in flight: ask again.
                        Spent::Wait => continue,
                    }
                    decided += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = table.stats();
    let granted = pool.lock().unwrap().granted;
    let admitted = admitted.load(Ordering::Relaxed);
    assert_eq!(stats.granted, granted);
    assert_eq!(stats.spent, admitted, "every admission is one unit spent");
    assert!(
        admitted <= 20_000,
        "{admitted} admitted of a pool of 20,000"
    );
    // What the last leases hold, unsettled, is at most a lease and a settle list's worth.
    let held = 64 * (1 + SETTLE_SLOTS as u64);
    assert!(admitted + held >= 20_000, "{admitted} admitted: units lost");
    assert!(
        stats.calls < admitted / 4,
        "{} calls for {admitted}",
        stats.calls
    );
}

#[test]
fn a_sweep_names_the_keys_whose_ended_leases_hold_units_once_per_period() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let words = region(64);
    let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
    let Spent::Fetch(f) = table.spend_at(b"k", 0, 1, &[5]).unwrap() else {
        panic!()
    };
    let grant = Grant {
        granted: 5,
        ..Grant::default()
    };
    assert!(table
        .install_at(b"k", &f, 1, 1, &[5], &grant)
        .unwrap()
        .is_some());
    assert_eq!(table.sweep_at(50, 10, 100).unwrap(), vec![], "still live");
    let swept = table.sweep_at(91, 10, 100).unwrap();
    assert_eq!(swept.len(), 1);
    let (key, call) = &swept[0];
    assert_eq!(key, b"k");
    assert_eq!(call.settle, format!("{}:1:1", table.id(f.seq)));
    assert_eq!(
        table.sweep_at(95, 10, 100).unwrap(),
        vec![],
        "one sweep a period"
    );
    table.settled(b"k", call.seq);
    assert_eq!(table.sweep_at(200, 10, 100).unwrap(), vec![], "settled");
    let stats = table.stats();
    assert_eq!((stats.returned, stats.expired), (4, 4));
    // A fully spent lease waits for the key's next call.
    let Spent::Fetch(f) = table.spend_at(b"k", 300, 2, &[5]).unwrap() else {
        panic!()
    };
    let grant = Grant {
        granted: 2,
        ..Grant::default()
    };
    assert!(table
        .install_at(b"k", &f, 301, 2, &[5], &grant)
        .unwrap()
        .is_some());
    assert_eq!(table.sweep_at(500, 10, 100).unwrap(), vec![]);
    let Spent::Fetch(next) = table.spend_at(b"k", 501, 1, &[5]).unwrap() else {
        panic!()
    };
    assert_eq!(next.settle, format!("{}:2:1", table.id(f.seq)));
}

#[test]
fn a_sweep_leaves_units_too_few_to_matter_to_the_keys_next_call() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let words = region(64);
    let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
    let Spent::Fetch(f) = table.spend_at(b"k", 0, 1, &[1000]).unwrap() else {
        panic!()
    };
    // 3 units unspent of a key Redis still had 900 of room for: not worth a call.
    let grant = Grant {
        granted: 4,
        remaining: 900,
        ..Grant::default()
    };
    assert!(table
        .install_at(b"k", &f, 1, 1, &[1000], &grant)
        .unwrap()
        .is_some());
    assert_eq!(table.sweep_at(91, 10, 100).unwrap(), vec![], "3 of 900");
    let Spent::Fetch(next) = table.spend_at(b"k", 200, 1, &[1000]).unwrap() else {
        panic!()
    };
    assert_eq!(
        next.settle,
        format!("{}:1:1", table.id(f.seq)),
        "on the next call"
    );
}

#[test]
fn other_limits_end_the_lease_and_a_refusal_is_answered_until_its_time() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let words = region(8);
    let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
    let Spent::Fetch(f) = table.spend_at(b"k", 0, 1, &[5]).unwrap() else {
        panic!()
    };
    let grant = Grant {
        granted: 3,
        ..Grant::default()
    };
    table.install_at(b"k", &f, 1, 1, &[5], &grant).unwrap();
    let Spent::Fetch(g) = table.spend_at(b"k", 2, 1, &[4]).unwrap() else {
        panic!("a lease of other limits is not spent")
    };
    assert_eq!(g.settle, format!("{}:1:1", table.id(f.seq)));
    let refusal = Grant {
        granted: 0,
        remaining: 0,
        retry_after_ms: Some(30),
        reset_after_ms: 900,
        window: 0,
    };
    assert_eq!(
        table.install_at(b"k", &g, 3, 1, &[4], &refusal).unwrap(),
        None
    );
    assert_eq!(
        table.spend_at(b"k", 10, 1, &[4]).unwrap(),
        Spent::Refused {
            remaining: 0,
            retry_after_ms: 23,
            reset_after_ms: 893,
            window: 0
        }
    );
    let Spent::Fetch(other) = table.spend_at(b"k", 10, 1, &[5]).unwrap() else {
        panic!("a refusal under other limits does not hold")
    };
    assert_eq!(
        table.spend_at(b"k", 11, 1, &[5]).unwrap(),
        Spent::Wait,
        "a call in flight"
    );
    table.fail_at(b"k", &other, 12).unwrap();
    assert!(matches!(
        table.spend_at(b"k", 33, 1, &[4]).unwrap(),
        Spent::Fetch(_)
    ));
    assert_eq!(table.stats().refusals_cached, 1);
}

#[test]
fn a_lease_redis_recorded_is_never_settled_nor_swept_and_still_teaches_the_rate() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let words = region(8);
    let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
    let Spent::Fetch(f) = table.spend_ahead_at(b"k", 0, 1, &[5]).unwrap() else {
        panic!()
    };
    assert_eq!(f.want, 1, "a cold key wants its cost");
    assert!(
        matches!(
            table.spend_ahead_at(b"k", 0, 1, &[5]).unwrap(),
            Spent::Fetch(_)
        ),
        "a check ahead is not waited for"
    );
    let grant = Grant {
        granted: 1,
        remaining: 4,
        ..Grant::default()
    };
    let admitted = table.install_recorded_at(b"k", &f, 1, 1, &[5], &grant);
    assert_eq!(admitted.unwrap().map(|a| a.remaining), Some(4));
    assert_eq!(
        table.sweep_at(200, 10, 100).unwrap(),
        vec![],
        "nothing to settle"
    );
    // Seen again 2 ms after the send: nothing to settle, and, a new key, a rate of half a
    // unit a ms (a key with a rate would count the unit over 66 ms, sample_floor_ms).
    let Spent::Fetch(g) = table.spend_at(b"k", 2, 1, &[5]).unwrap() else {
        panic!()
    };
    assert_eq!(g.settle, "");
    assert_eq!(g.want, want(&config, 0.25, 1));
    // Never refunded into (Redis takes the refund back), and answered later than
    // ahead_spend_ms (40 ms) after its send: not spent, nothing to settle either.
    let grant = Grant {
        granted: 1,
        remaining: 3,
        ..Grant::default()
    };
    assert!(table
        .install_recorded_at(b"k", &g, 3, 1, &[5], &grant)
        .unwrap()
        .is_some());
    assert!(!table.refund_at(b"k", 4, 1).unwrap());
    let Spent::Fetch(h) = table.spend_at(b"k", 200, 1, &[5]).unwrap() else {
        panic!()
    };
    assert_eq!(
        table
            .install_recorded_at(b"k", &h, 241, 1, &[5], &grant)
            .unwrap(),
        None
    );
    let Spent::Fetch(i) = table.spend_at(b"k", 242, 1, &[5]).unwrap() else {
        panic!()
    };
    assert_eq!(i.settle, "");
    let stats = table.stats();
    assert_eq!(
        (stats.granted, stats.spent, stats.returned, stats.calls),
        (3, 2, 0, 5)
    );
}

#[test]
fn a_grant_too_late_to_spend_raises_the_next_calls_validity_and_theirs_holds() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let words = region(8);
    let (table, _) = Leases::attach(&words[..], config, 16, Threads, [3, 4]).unwrap();
    let grant = Grant {
        granted: 5,
        remaining: 40,
        ..Grant::default()
    };
    let Spent::Fetch(f) = table.spend_at(b"k", 0, 1, &[50]).unwrap() else {
        panic!()
    };
    assert_eq!(f.validity_ms, 100);
    // Answered 120 ms after the send: past V - margin (90 ms), not spent.
    assert_eq!(
        table.install_at(b"k", &f, 120, 1, &[50], &grant).unwrap(),
        None
    );
    assert_eq!(table.validity_ms(), 250, "2 x 120 + margin 10");
    assert_eq!(table.stats().validity_ms, 250);
    let Spent::Fetch(g) = table.spend_at(b"k", 121, 1, &[50]).unwrap() else {
        panic!()
    };
    assert_eq!(g.validity_ms, 250);
    // Its grant, as late, is spent: V - margin is now 240 ms.
    let admitted = table.install_at(b"k", &g, 241, 1, &[50], &grant).unwrap();
    assert!(admitted.is_some());
    assert!(matches!(
        table.spend_at(b"k", 121 + 240, 1, &[50]).unwrap(),
        Spent::Admitted { .. }
    ));
    assert!(
        !matches!(
            table.spend_at(b"k", 121 + 241, 1, &[50]).unwrap(),
            Spent::Admitted { .. }
        ),
        "ended at its own V - margin"
    );
    // Never past the ceiling (4 V by default), however late.
    let Spent::Fetch(h) = table.spend_at(b"j", 400, 1, &[50]).unwrap() else {
        panic!()
    };
    assert_eq!(
        table.install_at(b"j", &h, 5_000, 1, &[50], &grant).unwrap(),
        None
    );
    assert_eq!(table.validity_ms(), 400);
}
