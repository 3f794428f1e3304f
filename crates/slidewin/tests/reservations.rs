//! Reservations settled at their stamp (`slidewin::reservation`, `Store::reserve` and
//! `Store::settle`): a refund at the newest time would admit more than the limit where the
//! settlement does not, and on random traces of reservations settled later for less, no
//! window ever holds more than its limit of what the calls actually used.

mod common;

use std::sync::atomic::AtomicU64;

use common::max_in_any_window;
use common::process::Thread;
use proptest::prelude::*;
use slidewin::keyed::Keyed;
use slidewin::reservation::{Amend, Excess, Reservation};
use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
use slidewin::shared::{LiveLimits, Zone};
use slidewin::store::{LocalRule, Store};
use slidewin::{BucketQuota, Call, Quota};

type Words = Vec<AtomicU64>;

fn words(n: usize) -> Words {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// `rule` in a region and in the process.
fn stores(rule: &Rule) -> (Zone<Words, Thread>, LocalRule<Words>) {
    let (zone, _) = Zone::attach(words(1 << 14), rule.clone(), 16, Thread(1), [1, 2]).unwrap();
    let keyed = Keyed::<RuleLimiter, Vec<u8>>::new(rule.clone(), 100).unwrap();
    let local = LocalRule::new(
        keyed,
        LiveLimits::attach(words(LiveLimits::<Words>::WORDS), rule),
    );
    (zone, local)
}

/// Calls of cost 1 admitted at `probe_ms` after a reservation of 10 at 0 (used: nothing) and a
/// call of 10 at 100 filled a window of 20 per second, the reservation settled at 500 at its
/// stamp, or given back as a refund takes it (the newest units).
fn admitted_after(store: &mut dyn Store, at_the_stamp: bool, probe_ms: i64) -> u64 {
    let (d, reservation) = store.reserve(b"k", 0, 10, None).unwrap();
    assert!(d.allowed);
    assert!(
        store
            .decide(b"k", 100, 10, Call::Check, None)
            .unwrap()
            .allowed
    );
    match at_the_stamp {
        true => store
            .settle(b"k", 500, &reservation.unwrap(), (0, Excess::Refuse))
            .unwrap(),
        false => store.amend(b"k", 500, None, Amend::GiveBack(10)).unwrap(),
    }
    let mut admitted = 0;
    while store
        .decide(b"k", probe_ms, 1, Call::Check, None)
        .unwrap()
        .allowed
    {
        admitted += 1;
    }
    admitted
}

#[test]
fn settled_at_the_stamp_the_window_holds_the_limit_where_a_refund_would_not() {
    // When the reservation's units have left the window and the call's at 100 have not:
    // at 1_000 for the log, once the bucket of 0..99 left for buckets of 100 ms.
    for (window, probe_ms) in [
        (RuleWindow::log(Quota::new(20, 1_000).unwrap()), 1_000),
        (
            RuleWindow::buckets(BucketQuota::new(20, 1_000, 100).unwrap()),
            1_099,
        ),
    ] {
        let rule = Rule::one(window);
        let (mut zone, mut local) = stores(&rule);
        // The call at 100 still counts: room for 10 more.
        assert_eq!(admitted_after(&mut zone, true, probe_ms), 10, "{window:?}");
        assert_eq!(admitted_after(&mut local, true, probe_ms), 10, "{window:?}");
        // A refund took the call's 10 and left the reservation's, which have left: 20 more,
        // 30 in the second after the call against a limit of 20.
        let (mut zone, mut local) = stores(&rule);
        assert_eq!(admitted_after(&mut zone, false, probe_ms), 20, "{window:?}");
        assert_eq!(
            admitted_after(&mut local, false, probe_ms),
            20,
            "{window:?}"
        );
    }
}

/// A window of 10 per second where a reservation of 4 at 100 used 19 (owed: 15) and a call of
/// 1 came at 600: what `probe` answers at each time.
fn owed(store: &mut dyn Store, excess: Excess, probe: &[i64]) -> Vec<(bool, u64, Option<u64>)> {
    let (_, reservation) = store.reserve(b"k", 100, 4, None).unwrap();
    assert!(
        store
            .decide(b"k", 600, 1, Call::Check, None)
            .unwrap()
            .allowed
    );
    store
        .settle(b"k", 700, &reservation.unwrap(), (19, excess))
        .unwrap();
    let answer = |(store, at): (&mut dyn Store, i64)| {
        let d = store.decide(b"k", at, 1, Call::Peek, None).unwrap();
        (d.allowed, d.remaining, d.retry_after_ms)
    };
    probe.iter().map(|&at| answer((&mut *store, at))).collect()
}

#[test]
fn a_debt_holds_the_window_until_its_stamp_leaves_and_no_longer() {
    // Owed at 100: 19 + 1 of 10, refused until the stamp leaves: at 1_100 for the log, with
    // its bucket (100..199) at 1_199 for buckets of 100 ms, and for two fixed windows once the
    // previous one's 20 weigh 9 at most (1_550). The call at 600 still counts after.
    let (r, a) = (|wait| (false, 0, Some(wait)), |left| (true, left, Some(0)));
    let windows = [
        (
            RuleWindow::log(Quota::new(10, 1_000).unwrap()),
            [r(400), r(1), a(8), a(8), a(9), a(9)],
        ),
        (
            RuleWindow::buckets(BucketQuota::new(10, 1_000, 100).unwrap()),
            [r(499), r(100), r(99), a(8), a(8), a(9)],
        ),
        (
            RuleWindow::counter(Quota::new(10, 1_000).unwrap()),
            [r(850), r(451), r(450), r(351), a(1), a(9)],
        ),
    ];
    for (window, expected) in windows {
        let rule = Rule::one(window);
        let (mut zone, mut local) = stores(&rule);
        let probe = [700, 1_099, 1_100, 1_199, 1_600, 2_100];
        assert_eq!(owed(&mut zone, Excess::Owe, &probe), expected, "{window:?}");
        assert_eq!(
            owed(&mut local, Excess::Owe, &probe),
            expected,
            "{window:?}"
        );
        // Clamped, the 15 above are not recorded: the window holds 4 + 1.
        let (mut zone, _) = stores(&rule);
        assert_eq!(
            owed(&mut zone, Excess::Clamp, &[700])[0],
            (true, 4, Some(0))
        );
    }
}

#[test]
fn a_window_counts_at_most_twice_its_max_limit() {
    let rule = Rule::one(
        RuleWindow::log(Quota::new(10, 1_000).unwrap())
            .with_max_limit(15)
            .unwrap(),
    );
    let (mut zone, mut local) = stores(&rule);
    for store in [&mut zone as &mut dyn Store, &mut local] {
        let (_, reservation) = store.reserve(b"k", 0, 5, None).unwrap();
        store
            .settle(b"k", 10, &reservation.unwrap(), (1_000, Excess::Owe))
            .unwrap();
        // 30 counted (5 reserved, 25 owed): room for 1 once 21 left, at 1_000 all of it.
        let d = store.decide(b"k", 999, 1, Call::Peek, None).unwrap();
        assert_eq!((d.allowed, d.retry_after_ms), (false, Some(1)));
        store.set_limit(0, 15).unwrap();
        assert!(
            store
                .decide(b"k", 1_000, 15, Call::Check, None)
                .unwrap()
                .allowed
        );
    }
}

#[test]
fn a_settlement_above_the_reservation_is_an_error_that_changes_nothing() {
    let (mut zone, _) = stores(&Rule::one(RuleWindow::log(Quota::new(5, 1_000).unwrap())));
    let (_, reservation) = zone.reserve(b"k", 0, 3, None).unwrap();
    let err = zone
        .settle(b"k", 10, &reservation.unwrap(), (4, Excess::Refuse))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "actual must be at most the units reserved, got 4"
    );
    assert_eq!(
        zone.decide(b"k", 10, 2, Call::Check, None)
            .unwrap()
            .remaining,
        0
    );
    assert!(
        zone.reserve(b"k", 10, 1, None).unwrap().1.is_none(),
        "full: no reservation"
    );
}

/// One step of a trace: a reservation of `units` that will use `actual` (at most `units`),
/// settled `settle_after_ms` later; or a plain check of `cost`.
#[derive(Debug, Clone)]
enum Step {
    Reserve {
        units: u64,
        actual: u64,
        settle_after_ms: i64,
    },
    Check(u64),
}

fn steps() -> impl Strategy<Value = Vec<(i64, Step)>> {
    let reserve =
        (1..=12u64, 0..=100u64, 0..=1_500i64).prop_map(|(units, share, after)| Step::Reserve {
            units,
            actual: units * share / 100,
            settle_after_ms: after,
        });
    let step = prop_oneof![3 => reserve, 1 => (1..=3u64).prop_map(Step::Check)];
    proptest::collection::vec((0..=120i64, step), 1..200)
}

/// Runs `trace` on `store`, settling each reservation when its time comes (before the calls of
/// that millisecond); the costs the calls used, at the times they were admitted.
fn used(store: &mut dyn Store, trace: &[(i64, Step)]) -> Vec<(i64, u64)> {
    let mut now = 0;
    let mut pending: Vec<(i64, Reservation, u64)> = Vec::new();
    let mut used = Vec::new();
    for (gap, step) in trace {
        now += gap;
        pending.sort_by_key(|p| p.0);
        while pending.first().is_some_and(|p| p.0 <= now) {
            let (at, reservation, actual) = pending.remove(0);
            store
                .settle(b"k", at, &reservation, (actual, Excess::Refuse))
                .unwrap();
        }
        match *step {
            Step::Reserve {
                units,
                actual,
                settle_after_ms,
            } => {
                if let (_, Some(reservation)) = store.reserve(b"k", now, units, None).unwrap() {
                    used.push((now, actual));
                    pending.push((now + settle_after_ms, reservation, actual));
                }
            }
            Step::Check(cost) => {
                if store
                    .decide(b"k", now, cost, Call::Check, None)
                    .unwrap()
                    .allowed
                {
                    used.push((now, cost));
                }
            }
        }
    }
    used
}

proptest! {
    #[test]
    fn no_window_ever_holds_more_than_its_limit_of_actual_use(trace in steps()) {
        let log = RuleWindow::log(Quota::new(20, 1_000).unwrap());
        let buckets = RuleWindow::buckets(BucketQuota::new(30, 2_000, 250).unwrap());
        for (rule, two) in [(Rule::one(log), false), (Rule::new([log, buckets]).unwrap(), true)] {
            let (mut zone, mut local) = stores(&rule);
            let in_zone = used(&mut zone, &trace);
            prop_assert_eq!(&in_zone, &used(&mut local, &trace));
            prop_assert!(max_in_any_window(&in_zone, 1_000) <= 20);
            prop_assert!(!two || max_in_any_window(&in_zone, 2_000) <= 30);
        }
    }
}
