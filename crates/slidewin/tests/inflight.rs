//! Concurrency limits in a shared region (slidewin::shared::Inflight): the limit holds under
//! threads, and slots come back from dead owners, from leases that run out, and live limits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use slidewin::shared::{Attached, Inflight, InflightConfig, Owner, LIVENESS_CHECK_MS};

/// Processes 1..=8, each alive until marked dead; this caller is `me`.
#[derive(Clone)]
struct Procs {
    me: u64,
    alive: Arc<[AtomicBool; 9]>,
}

impl Procs {
    fn new() -> Self {
        Self {
            me: 1,
            alive: Arc::new(std::array::from_fn(|_| AtomicBool::new(true))),
        }
    }
    fn as_process(&self, me: u64) -> Self {
        Self {
            me,
            alive: self.alive.clone(),
        }
    }
}

impl Owner for Procs {
    fn id(&self) -> u64 {
        self.me
    }
    fn is_alive(&self, id: u64) -> bool {
        self.alive[id as usize].load(Ordering::Relaxed)
    }
}

fn region(config: &InflightConfig, keys: usize) -> Vec<AtomicU64> {
    let bytes = Inflight::<&[AtomicU64], Procs>::bytes_for(config, 64, keys).unwrap();
    (0..bytes / 8).map(|_| AtomicU64::new(0)).collect()
}

#[test]
fn threads_never_hold_more_than_the_limit_and_every_slot_comes_back() {
    let config = InflightConfig::new(5, 5, 60_000).unwrap();
    let words = region(&config, 64);
    let procs = Procs::new();
    let concurrent = AtomicU64::new(0);
    let most = AtomicU64::new(0);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 1..=8 {
            let (words, procs) = (&words, procs.as_process(t));
            let (concurrent, most, admitted) = (&concurrent, &most, &admitted);
            s.spawn(move || {
                let (slots, _) = Inflight::attach(&words[..], config, 64, procs, [3, 4]).unwrap();
                for i in 0..20_000 {
                    let e = slots.enter_at(b"hot", i).unwrap();
                    if !e.admitted {
                        continue;
                    }
                    let now = concurrent.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    admitted.fetch_add(1, Ordering::Relaxed);
                    std::hint::spin_loop();
                    concurrent.fetch_sub(1, Ordering::SeqCst);
                    assert!(slots.leave_at(b"hot", e.token).unwrap());
                }
            });
        }
    });
    assert!(most.load(Ordering::SeqCst) <= 5);
    let (slots, attached) = Inflight::attach(&words[..], config, 64, procs, [3, 4]).unwrap();
    assert_eq!(attached, Attached::Reused);
    let stats = slots.stats_at(20_000).unwrap();
    assert_eq!(stats.inflight, 0);
    assert_eq!(stats.admitted, admitted.load(Ordering::Relaxed));
    assert_eq!(stats.admitted + stats.refused, 8 * 20_000);
}

#[test]
fn a_dead_owners_slots_are_freed_when_the_key_is_full() {
    let config = InflightConfig::new(3, 3, 60_000).unwrap();
    let words = region(&config, 8);
    let procs = Procs::new();
    let (victim, _) =
        Inflight::attach(&words[..], config, 64, procs.as_process(2), [5, 6]).unwrap();
    let (survivor, _) = Inflight::attach(&words[..], config, 64, procs.clone(), [5, 6]).unwrap();
    for t in 0..2 {
        assert!(victim.enter_at(b"k", t).unwrap().admitted);
    }
    let mine = survivor.enter_at(b"k", 2).unwrap();
    assert!(mine.admitted);
    assert!(
        !survivor.enter_at(b"k", 3).unwrap().admitted,
        "full, owners alive"
    );
    procs.alive[2].store(false, Ordering::Relaxed); // SIGKILLed
    let soon = 3 + LIVENESS_CHECK_MS;
    assert!(survivor.enter_at(b"k", soon).unwrap().admitted);
    assert!(survivor.enter_at(b"k", soon).unwrap().admitted);
    assert!(!survivor.enter_at(b"k", soon).unwrap().admitted);
    let stats = survivor.stats_at(soon).unwrap();
    assert_eq!((stats.dead_owner, stats.inflight, stats.expired), (2, 3, 0));
    assert!(
        survivor.leave_at(b"k", mine.token).unwrap(),
        "a live owner's slot was kept"
    );
}

#[test]
fn counts_leave_out_dead_owners_and_ended_leases_without_a_new_enter() {
    let config = InflightConfig::new(3, 3, 500).unwrap();
    let words = region(&config, 64);
    let procs = Procs::new();
    let (victim, _) =
        Inflight::attach(&words[..], config, 64, procs.as_process(2), [5, 6]).unwrap();
    let (survivor, _) = Inflight::attach(&words[..], config, 64, procs.clone(), [5, 6]).unwrap();
    for key in [&b"k"[..], b"j"] {
        assert!(victim.enter_at(key, 0).unwrap().admitted);
        assert!(victim.enter_at(key, 0).unwrap().admitted);
    }
    assert!(survivor.enter_at(b"k", 100).unwrap().admitted);
    assert!(survivor.enter_at(b"idle", 100).unwrap().admitted);
    assert_eq!(survivor.inflight_at(b"k", 100).unwrap(), 3);
    assert_eq!(survivor.stats_at(100).unwrap().inflight, 6);
    // Process 2 is SIGKILLed; the counts read at once (within LIVENESS_CHECK_MS of the last
    // check), no key entered again.
    procs.alive[2].store(false, Ordering::Relaxed);
    assert_eq!(survivor.inflight_at(b"k", 101).unwrap(), 1);
    let stats = survivor.stats_at(101).unwrap();
    assert_eq!(
        (stats.inflight, stats.dead_owner),
        (2, 4),
        "k's and idle's own"
    );
    assert_eq!(survivor.inflight_at(b"j", 101).unwrap(), 0);
    // The leases taken at 100 end at 600, whatever the key's traffic.
    assert_eq!(survivor.inflight_at(b"idle", 599).unwrap(), 1);
    assert_eq!(survivor.inflight_at(b"idle", 600).unwrap(), 0);
    let stats = survivor.stats_at(600).unwrap();
    assert_eq!((stats.inflight, stats.expired), (0, 2));
    assert_eq!(
        survivor
            .inflight_at(b"k", i64::MAX)
            .unwrap_err()
            .to_string(),
        "now_ms must be between -2^53 and 2^53, got 9223372036854775807"
    );
}

#[test]
fn a_slot_whose_leave_never_comes_is_freed_after_max_hold_ms() {
    let config = InflightConfig::new(2, 2, 500).unwrap();
    let words = region(&config, 8);
    let (slots, _) = Inflight::attach(&words[..], config, 64, Procs::new(), [7, 8]).unwrap();
    let lost = slots.enter_at(b"k", 1_000).unwrap();
    assert!(slots.enter_at(b"k", 1_100).unwrap().admitted);
    assert!(!slots.enter_at(b"k", 1_499).unwrap().admitted);
    let e = slots.enter_at(b"k", 1_500).unwrap();
    assert!(e.admitted, "the first lease ended at 1500");
    assert_eq!((e.inflight, slots.stats_at(1_500).unwrap().expired), (2, 1));
    assert!(!slots.leave_at(b"k", lost.token).unwrap(), "already freed");
    assert!(slots.leave_at(b"k", e.token).unwrap());
    // A full sweep frees the rest, and counts them.
    slots.sweep_at(1_600).unwrap();
    let stats = slots.stats_at(1_600).unwrap();
    assert_eq!((stats.inflight, stats.expired), (0, 2));
}

#[test]
fn the_live_limit_moves_for_every_process_and_survives_a_reattach() {
    let config = InflightConfig::new(2, 10, 60_000).unwrap();
    let words = region(&config, 8);
    let procs = Procs::new();
    let (a, _) = Inflight::attach(&words[..], config, 64, procs.clone(), [1, 1]).unwrap();
    let (b, _) = Inflight::attach(&words[..], config, 64, procs.as_process(2), [1, 1]).unwrap();
    a.set_limit(4).unwrap();
    let admitted = (0..6)
        .filter(|&t| b.enter_at(b"k", t).unwrap().admitted)
        .count();
    assert_eq!(admitted, 4);
    assert_eq!(
        a.set_limit(11).unwrap_err().to_string(),
        "limit must be a positive integer at most max_limit, got 11"
    );
    let (again, attached) =
        Inflight::attach(&words[..], config, 64, procs.clone(), [1, 1]).unwrap();
    assert_eq!(
        (attached, again.limit(), again.inflight_at(b"k", 6).unwrap()),
        (Attached::Reused, 4, 4)
    );
    let changed = InflightConfig::new(3, 10, 60_000).unwrap();
    let (again, _) = Inflight::attach(&words[..], changed, 64, procs, [1, 1]).unwrap();
    assert_eq!(again.limit(), 3, "a new configured limit applies");
}

#[test]
fn a_new_key_in_a_set_of_busy_keys_is_refused_not_evicting_their_counts() {
    let config = InflightConfig::new(1, 1, 60_000).unwrap();
    let words = region(&config, 8);
    let (slots, _) = Inflight::attach(&words[..], config, 64, Procs::new(), [2, 3]).unwrap();
    assert_eq!(slots.capacity(), 8);
    let tokens: Vec<_> = (0..8)
        .map(|k| slots.enter_at(format!("k{k}").as_bytes(), 0).unwrap())
        .collect();
    assert!(tokens.iter().all(|e| e.admitted));
    assert!(!slots.enter_at(b"new", 1).unwrap().admitted);
    assert_eq!(slots.stats_at(1).unwrap().full, 1);
    assert!(slots.leave_at(b"k3", tokens[3].token).unwrap());
    assert!(
        slots.enter_at(b"new", 2).unwrap().admitted,
        "k3's idle way is reused"
    );
}

#[test]
fn bad_configs_name_the_argument() {
    let msg = |r: Result<InflightConfig, slidewin::Error>| r.unwrap_err().to_string();
    assert_eq!(
        msg(InflightConfig::new(0, 5, 10)),
        "limit must be a positive integer at most max_limit, got 0"
    );
    assert_eq!(
        msg(InflightConfig::new(6, 5, 10)),
        "limit must be a positive integer at most max_limit, got 6"
    );
    assert_eq!(
        msg(InflightConfig::new(1, 1 << 17, 10)),
        "max_limit must be a positive integer at most 65536, got 131072"
    );
    assert_eq!(
        msg(InflightConfig::new(1, 5, 0)),
        "max_hold_ms must be a positive integer at most 2^40, got 0"
    );
}

#[test]
fn threads_attaching_at_once_find_one_layout_and_keep_each_others_slots() {
    let config = InflightConfig::new(8, 8, 60_000).unwrap();
    let words = region(&config, 4096);
    let procs = Procs::new();
    let start = std::sync::Barrier::new(8);
    let fresh = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 1..=8 {
            let (words, procs, start, fresh) = (&words, procs.as_process(t), &start, &fresh);
            s.spawn(move || {
                start.wait();
                let (slots, attached) =
                    Inflight::attach(&words[..], config, 64, procs, [3, 4]).unwrap();
                if attached == Attached::Fresh {
                    fresh.fetch_add(1, Ordering::SeqCst);
                }
                assert!(slots.enter_at(b"k", 1).unwrap().admitted);
            });
        }
    });
    assert_eq!(
        fresh.load(Ordering::SeqCst),
        1,
        "one thread lays the region out"
    );
    let (slots, _) = Inflight::attach(&words[..], config, 64, procs, [3, 4]).unwrap();
    assert_eq!(
        slots.inflight_at(b"k", 1).unwrap(),
        8,
        "no layout zeroed a slot taken before it"
    );
}
