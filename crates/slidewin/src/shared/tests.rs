//! What only the inside can reach: a lock left by a dead owner, a state half written, in a
//! zone, concurrency slots and a lease table.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use super::inflight_way::{record_at, R_DEADLINE, R_OWNER};
use super::keys::W_KEY;
use super::layout::{HEADER_WORDS, REFUSED_WORDS};
use super::lease_way::L_SPENT;
use super::table::{S_LOCK, S_TAGS};
use super::*;
use crate::lease::{Grant, LeaseConfig};
use crate::rule::{Rule, RuleWindow};
use crate::{BucketQuota, Quota};

/// Owner 1 is us; owner 2 died.
struct Survivor;
impl Owner for Survivor {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, id: u64) -> bool {
        id == 1
    }
}

fn region(words: usize) -> Vec<AtomicU64> {
    (0..words).map(|_| AtomicU64::new(0)).collect()
}

/// The set `key` lives in, as the zone computes it.
fn set_base(zone: &Zone<&Vec<AtomicU64>, Survivor>, key: &[u8]) -> usize {
    let hash = zone.table.codec.key(key).hash;
    let set = (((hash >> 32) * zone.table.cut.sets as u64) >> 32) as usize;
    HEADER_WORDS + set * zone.table.cut.set_words
}

#[test]
fn a_lock_left_by_a_dead_owner_is_taken_over_and_the_set_repaired() {
    let words = region(1 << 14);
    let quota = Quota::new(3, 1_000).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::log(quota)),
        16,
        Survivor,
        [1, 2],
    )
    .unwrap();
    assert!(zone.check_at(b"alice", 0, 2).unwrap().allowed);
    let base = set_base(&zone, b"alice");
    // Owner 2 took the lock and died mid-call.
    words[base + S_LOCK].store(2, Ordering::Relaxed);
    let d = zone.check_at(b"alice", 10, 2).unwrap();
    assert!(!d.allowed, "the window recorded before the crash is kept");
    assert_eq!((d.remaining, d.retry_after_ms), (1, Some(990)));
    let stats = zone.stats();
    assert_eq!((stats.repairs, stats.keys), (1, 1));
    assert_eq!(words[base + S_LOCK].load(Ordering::Relaxed), 0, "released");
}

#[test]
fn repair_drops_a_half_written_key_and_empties_an_impossible_state() {
    let words = region(1 << 14);
    let config = BucketQuota::new(10, 1_000, 100).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::buckets(config)),
        16,
        Survivor,
        [3, 4],
    )
    .unwrap();
    for key in [&b"a"[..], b"b"] {
        zone.check_at(key, 0, 4).unwrap();
    }
    let (a, b) = (set_base(&zone, b"a"), set_base(&zone, b"b"));
    let way_of = |base: usize, key: &[u8]| {
        let k = zone.table.codec.key(key);
        (0..WAYS)
            .find(|&w| words[base + S_TAGS + w].load(Ordering::Relaxed) == k.tag())
            .unwrap()
    };
    let state_at = |base: usize, way: usize| base + zone.refused_at(way) + REFUSED_WORDS;
    // "a": a key byte overwritten (a new key half written over it); "b": head out of range.
    let (wa, wb) = (way_of(a, b"a"), way_of(b, b"b"));
    words[a + zone.table.cut.way(wa) + W_KEY].store(0xff, Ordering::Relaxed);
    words[state_at(b, wb) + 2].store(u64::MAX, Ordering::Relaxed);
    for base in [a, b] {
        words[base + S_LOCK].store(2, Ordering::Relaxed);
    }
    let d = zone.check_at(b"a", 1, 10).unwrap();
    assert!(d.allowed, "a's way was dropped: it starts afresh");
    let d = zone.check_at(b"b", 1, 10).unwrap();
    assert!(d.allowed, "b's impossible state was emptied");
    assert_eq!(zone.stats().repairs, if a == b { 1 } else { 2 });
}

#[test]
fn a_repaired_bucket_total_is_recounted() {
    let words = region(1 << 14);
    let config = BucketQuota::new(10, 1_000, 100).unwrap();
    let (zone, _) = Zone::attach(
        &words,
        Rule::one(RuleWindow::buckets(config)),
        16,
        Survivor,
        [5, 6],
    )
    .unwrap();
    zone.check_at(b"k", 0, 6).unwrap();
    let base = set_base(&zone, b"k");
    let k = zone.table.codec.key(b"k");
    let way = (0..WAYS)
        .find(|&w| words[base + S_TAGS + w].load(Ordering::Relaxed) == k.tag())
        .unwrap();
    // Died after adding to a counter, before adding to the total.
    let total = base + zone.refused_at(way) + REFUSED_WORDS + 4;
    words[total].store(0, Ordering::Relaxed);
    words[base + S_LOCK].store(2, Ordering::Relaxed);
    let d = zone.check_at(b"k", 1, 5).unwrap();
    assert!(!d.allowed, "the counter's 6 count again");
    assert_eq!(d.remaining, 4);
}

#[test]
fn open_finds_a_zone_attached_for_the_same_layout_and_never_writes_another() {
    let words = region(1 << 14);
    let rule = |limit| Rule::one(RuleWindow::log(Quota::new(limit, 1_000).unwrap()));
    let (zone, _) = Zone::attach(&words, rule(3), 16, Survivor, [1, 2]).unwrap();
    assert!(zone.check_at(b"alice", 0, 3).unwrap().allowed);
    let opened = Zone::open(&words, rule(3), 16, Survivor).unwrap();
    assert!(
        !opened.check_at(b"alice", 10, 1).unwrap().allowed,
        "the same window"
    );
    let before: Vec<u64> = words.iter().map(|w| w.load(Ordering::Relaxed)).collect();
    let other = Zone::open(&words, rule(4), 16, Survivor).err().unwrap();
    assert!(
        alloc::string::ToString::to_string(&other).starts_with("region must be the fingerprint"),
        "{other}"
    );
    let after: Vec<u64> = words.iter().map(|w| w.load(Ordering::Relaxed)).collect();
    assert_eq!(before, after);
}

#[test]
fn a_lock_left_by_a_dead_owner_is_taken_over_and_records_past_the_count_recounted() {
    let config = InflightConfig::new(3, 4, 60_000).unwrap();
    let bytes = Inflight::<&[AtomicU64], Survivor>::bytes_for(&config, 16, 8).unwrap();
    let words = region(bytes / 8);
    let (slots, _) = Inflight::attach(&words[..], config, 16, Survivor, [1, 2]).unwrap();
    assert_eq!(slots.capacity(), 8, "one set");
    let a = slots.enter_at(b"k", 0).unwrap();
    assert!(a.admitted);
    // Owner 2... died after writing a record, before counting it, holding the lock.
    let record = record_at(slots.table.cut.payload(0), 1);
    let base = slots.table.cut.header;
    words[base + record + R_DEADLINE].store(60_000, Ordering::Relaxed);
    words[base + record + R_OWNER].store(1, Ordering::Relaxed);
    words[base + S_LOCK].store(2, Ordering::Relaxed);
    assert_eq!(
        slots.inflight_at(b"k", 1).unwrap(),
        2,
        "the record past the count counts"
    );
    assert_eq!(slots.stats_at(1).unwrap().repairs, 1);
    assert!(slots.enter_at(b"k", 1).unwrap().admitted);
    assert!(!slots.enter_at(b"k", 2).unwrap().admitted, "3 held");
    assert!(slots.leave_at(b"k", a.token).unwrap());
    assert_eq!(slots.stats_at(2).unwrap().inflight, 2);
}

#[test]
fn a_lease_table_lock_left_by_a_dead_owner_is_taken_over_and_the_set_repaired() {
    let config = LeaseConfig::new(100, None, 50).unwrap();
    let bytes = Leases::<&[AtomicU64], Survivor>::bytes_for(16, 8).unwrap();
    let words = region(bytes / 8);
    let (table, _) = Leases::attach(&words[..], config, 16, Survivor, [1, 2]).unwrap();
    assert_eq!(table.capacity(), 8, "one set");
    let Spent::Fetch(f) = table.spend_at(b"k", 0, 1, &[9]).unwrap() else {
        panic!()
    };
    let grant = Grant {
        granted: 5,
        ..Grant::default()
    };
    assert!(table
        .install_at(b"k", &f, 1, 1, &[9], &grant)
        .unwrap()
        .is_some());
    // Owner 2 died holding the lock, after writing more spent than granted.
    let base = table.table.cut.header;
    words[base + table.table.cut.payload(0) + L_SPENT].store(7, Ordering::Relaxed);
    words[base + S_LOCK].store(2, Ordering::Relaxed);
    let Spent::Fetch(next) = table.spend_at(b"k", 2, 1, &[9]).unwrap() else {
        panic!("the lease was spent out by the repair")
    };
    assert_eq!(next.settle, alloc::format!("{}:5:1", table.id(f.seq)));
    assert_eq!(table.stats().repairs, 1);
    assert_eq!(words[base + S_LOCK].load(Ordering::Relaxed), 0, "released");
}
