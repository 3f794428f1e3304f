//! Rules made and removed at run time (`slidewin::shared::Directory`): found by name from every
//! process, memory reused within a fixed region, refused with the size they need, and a table
//! lock left by a dead process taken over.

use std::sync::atomic::AtomicU64;

use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Directory, Owner, GRACE_MS, PAGE_BYTES};
use slidewin::Quota;

#[derive(Clone)]
struct Thread(u64);
impl Owner for Thread {
    fn id(&self) -> u64 {
        self.0
    }
    fn is_alive(&self, id: u64) -> bool {
        id != 99 // owner 99 died
    }
    fn pause(&self) {
        std::thread::yield_now();
    }
}

fn region(bytes: usize) -> Vec<AtomicU64> {
    (0..bytes / 8).map(|_| AtomicU64::new(0)).collect()
}

fn log_rule(limit: u64, window_ms: i64) -> Rule {
    let window = RuleWindow::log(Quota::new(limit, window_ms).unwrap());
    Rule::one(window.with_max_limit(limit.max(10)).unwrap())
}

#[test]
fn a_rule_put_by_one_process_is_found_and_shared_by_another() {
    let words = region(1 << 20);
    let a = Directory::attach(&words[..], 32, Thread(1), [1, 2]).unwrap();
    let b = Directory::attach(&words[..], 32, Thread(2), [3, 4]).unwrap();
    let put = a.put(b"api", &log_rule(3, 1_000), 64, 16 << 10, 0).unwrap();
    let zone_a = a.zone(&put, Thread(1)).unwrap();
    let found = b.find(b"api").expect("found by the other process");
    assert_eq!(found, put);
    let zone_b = b.zone(&found, Thread(2)).unwrap();
    assert!(zone_a.check_at(b"k", 0, 2).unwrap().allowed);
    assert!(zone_b.check_at(b"k", 1, 1).unwrap().allowed);
    assert!(
        !zone_a.check_at(b"k", 2, 1).unwrap().allowed,
        "one window for both"
    );
    assert_eq!(a.names(), vec![b"api".to_vec()]);
}

#[test]
fn putting_a_rule_again_with_other_limits_keeps_its_windows() {
    let words = region(1 << 20);
    let rules = Directory::attach(&words[..], 8, Thread(1), [1, 2]).unwrap();
    let put = rules
        .put(b"api", &log_rule(3, 1_000), 64, 8 << 10, 0)
        .unwrap();
    let zone = rules.zone(&put, Thread(1)).unwrap();
    assert!(zone.check_at(b"k", 0, 3).unwrap().allowed);
    // Limits only: same pages, the new limit is live, the window kept.
    let again = rules
        .put(b"api", &log_rule(5, 1_000), 64, 8 << 10, 10)
        .unwrap();
    assert!(rules.is_current(&put) && rules.is_current(&again));
    assert_eq!(zone.limits()[0], 5);
    assert_eq!(zone.check_at(b"k", 20, 3).unwrap().remaining, 2);
    // Another window: a new rule in other pages, the old one no longer current.
    let other = rules
        .put(b"api", &log_rule(5, 2_000), 64, 8 << 10, 30)
        .unwrap();
    assert!(!rules.is_current(&put) && rules.is_current(&other));
    let fresh = rules.zone(&other, Thread(1)).unwrap();
    assert_eq!(fresh.check_at(b"k", 40, 1).unwrap().remaining, 4);
}

#[test]
fn a_thousand_rules_added_and_removed_reuse_the_same_pages() {
    // Room for 150 one-page rules; a removed rule's pages wait GRACE_MS, and one rule comes
    // and goes every 10 ms, so at most about 100 are held at a time.
    let words = region(150 * PAGE_BYTES + (1 << 16));
    let rules = Directory::attach(&words[..], 160, Thread(1), [5, 6]).unwrap();
    let mut now_ms = 0;
    let mut most_used = 0;
    for i in 0..1_000 {
        let name = format!("rule-{i}");
        let put = rules
            .put(name.as_bytes(), &log_rule(2, 1_000), 16, PAGE_BYTES, now_ms)
            .unwrap();
        let zone = rules.zone(&put, Thread(1)).unwrap();
        assert_eq!(
            zone.check_at(b"k", now_ms, 1).unwrap().remaining,
            1,
            "a fresh zone for {name}"
        );
        assert!(rules.remove(name.as_bytes(), now_ms));
        most_used = most_used.max(rules.stats(now_ms).pages_used);
        now_ms += 10;
    }
    assert!(
        most_used <= (GRACE_MS / 10 + 1) as u64,
        "{most_used} pages held at once"
    );
    assert_eq!(rules.stats(now_ms + GRACE_MS).pages_used, 0);
    assert!(rules.names().is_empty());
}

#[test]
fn a_rule_that_does_not_fit_is_refused_naming_the_size_it_needs() {
    let words = region(8 * PAGE_BYTES + (1 << 14));
    let rules = Directory::attach(&words[..], 4, Thread(1), [5, 6]).unwrap();
    let stats = rules.stats(0);
    rules
        .put(b"a", &log_rule(2, 1_000), 16, 4 * PAGE_BYTES, 0)
        .unwrap();
    let err = rules
        .put(b"b", &log_rule(2, 1_000), 16, 8 * PAGE_BYTES, 0)
        .unwrap_err();
    let free = (stats.pages - 4) as usize * PAGE_BYTES;
    assert_eq!(
        err.to_string(),
        format!(
            "size must be at most the zone's largest free space ({free} of {} bytes) for this \
             rule, got 32768: remove rules or make the zone larger",
            stats.pages as usize * PAGE_BYTES
        )
    );
    let err = rules
        .put(b"", &log_rule(2, 1_000), 16, PAGE_BYTES, 0)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "name must be from 1 to 64 bytes long, got 0"
    );
    // A size too small for one set of keys names it too.
    let big = Rule::one(RuleWindow::log(Quota::new(10_000, 60_000).unwrap()));
    let err = rules.put(b"big", &big, 16, PAGE_BYTES, 0).unwrap_err();
    assert!(
        err.to_string().starts_with("size must be at least "),
        "{err}"
    );
}

#[test]
fn a_table_lock_left_by_a_dead_process_is_taken_over() {
    let words = region(1 << 20);
    let rules = Directory::attach(&words[..], 8, Thread(1), [1, 2]).unwrap();
    rules
        .put(b"api", &log_rule(3, 1_000), 64, PAGE_BYTES, 0)
        .unwrap();
    // Owner 99 took the table's lock (word 4 of the header) and died.
    words[4].store(99, std::sync::atomic::Ordering::Relaxed);
    assert!(rules.find(b"api").is_some());
    assert!(rules.remove(b"api", 5));
}

#[test]
fn threads_add_use_and_remove_rules_at_once() {
    let words = region(4 << 20);
    let shared = Directory::attach(&words[..], 256, Thread(1), [1, 2]).unwrap();
    let hot = shared
        .put(b"hot", &log_rule(50, 60_000), 64, 8 * PAGE_BYTES, 0)
        .unwrap();
    let admitted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let words = &words;
                let hot = hot.clone();
                s.spawn(move || {
                    let rules = Directory::attach(&words[..], 256, Thread(t + 10), [0, 0]).unwrap();
                    let zone = rules.zone(&hot, Thread(t + 10)).unwrap();
                    let mut admitted = 0;
                    for i in 0..200 {
                        let name = format!("t{t}-{i}");
                        let put = rules
                            .put(name.as_bytes(), &log_rule(2, 1_000), 16, PAGE_BYTES, i * 20)
                            .unwrap();
                        rules
                            .zone(&put, Thread(t + 10))
                            .unwrap()
                            .check_at(b"k", i * 20, 1)
                            .unwrap();
                        admitted += usize::from(zone.check_at(b"hot", i * 20, 1).unwrap().allowed);
                        assert!(rules.remove(name.as_bytes(), i * 20));
                    }
                    admitted
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(
        admitted, 50,
        "exactly the hot rule's limit, whatever else came and went"
    );
    assert!(shared.is_current(&hot));
}

#[test]
fn limits_made_for_another_rule_are_an_error_not_a_panic() {
    let words = region(1 << 20);
    let rules = Directory::attach(&words[..], 8, Thread(1), [1, 2]).unwrap();
    let put = rules
        .put(b"one", &log_rule(3, 1_000), 64, 16 << 10, 0)
        .unwrap();
    let zone = rules.zone(&put, Thread(1)).unwrap();
    let three =
        Rule::new([1_000, 2_000, 3_000].map(|w| RuleWindow::log(Quota::new(3, w).unwrap())))
            .unwrap();
    let err = zone
        .decide_at(b"k", 0, 1, slidewin::Call::Check, &three.limits())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "limits must be one limit per window of the rule, got 3"
    );
    let high = Rule::one(RuleWindow::log(Quota::new(500, 1_000).unwrap()));
    let err = zone
        .decide_at(b"k", 0, 1, slidewin::Call::Check, &high.limits())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "limit must be a positive integer at most the window's max_limit, got 500"
    );
}
