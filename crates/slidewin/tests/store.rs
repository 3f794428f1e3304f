//! The store seam (`slidewin::store::Store`): the in-process store, a zone and a directory's
//! rule answer a trace alike, and a directory's rule follows the rule put again by its name.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use proptest::prelude::*;
use slidewin::reservation::Amend;
use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
use slidewin::shared::{Directory, LiveLimits, Owner, RegionKind, Zone};
use slidewin::store::{DirectoryRule, LocalRule, Store};
use slidewin::{BucketQuota, Call, Error, Keyed, Quota};

#[derive(Clone)]
struct OneProcess;
impl Owner for OneProcess {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

type Words = Arc<[AtomicU64]>;

fn words(n: usize) -> Words {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// `rule` in each store, each over words of its own.
fn stores(
    rule: &Rule,
) -> (
    LocalRule<Words>,
    Zone<Words, OneProcess>,
    DirectoryRule<Words, OneProcess>,
) {
    let keyed = Keyed::<RuleLimiter, Vec<u8>>::new(rule.clone(), 100).unwrap();
    let live = LiveLimits::attach(words(LiveLimits::<Words>::WORDS), rule);
    let local = LocalRule::new(keyed, live);
    let (zone, _) = Zone::attach(words(1 << 14), rule.clone(), 16, OneProcess, [1, 2]).unwrap();
    let rules = Arc::new(Directory::attach(words(1 << 16), 4, OneProcess, [3, 4]).unwrap());
    let found = rules.put(b"api", rule, 16, 64 << 10, 0).unwrap();
    let by_name = DirectoryRule::new(rules, b"api".to_vec(), found, OneProcess).unwrap();
    (local, zone, by_name)
}

fn rule(limit: u64) -> Rule {
    Rule::new([
        RuleWindow::log(Quota::new(limit, 1_000).unwrap())
            .with_max_limit(20)
            .unwrap(),
        RuleWindow::buckets(BucketQuota::new(limit * 3, 10_000, 1_000).unwrap()),
    ])
    .unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Decide {
        key: u8,
        cost: u64,
        call: Call,
    },
    /// Gives back cost recorded `back_ms` before now or earlier.
    Refund {
        key: u8,
        cost: u64,
        back_ms: i64,
    },
    Reset {
        key: u8,
    },
    SetLimit {
        limit: u64,
    },
}

fn ops() -> impl Strategy<Value = Vec<(Op, i64)>> {
    let op = prop_oneof![
        6 => (0..4_u8, 0..4_u64, prop_oneof![Just(Call::Peek), Just(Call::Check), Just(Call::DryRun)])
            .prop_map(|(key, cost, call)| Op::Decide { key, cost, call }),
        1 => (0..4_u8, 1..3_u64, prop_oneof![Just(0_i64), 0..2_000_i64])
            .prop_map(|(key, cost, back_ms)| Op::Refund { key, cost, back_ms }),
        1 => (0..4_u8).prop_map(|key| Op::Reset { key }),
        1 => (1..=20_u64).prop_map(|limit| Op::SetLimit { limit }),
    ];
    prop::collection::vec((op, 0..400_i64), 1..120)
}

/// What a store answers to `op` at `now_ms`, as one comparable string.
fn apply(store: &mut dyn Store, op: &Op, now_ms: i64) -> String {
    match *op {
        Op::Decide { key, cost, call } => {
            format!("{:?}", store.decide(&[key], now_ms, cost, call, None))
        }
        Op::Refund { key, cost, back_ms } => {
            format!(
                "{:?}",
                store.amend(
                    &[key],
                    now_ms,
                    (back_ms > 0).then_some(now_ms - back_ms),
                    Amend::GiveBack(cost)
                )
            )
        }
        Op::Reset { key } => {
            store.reset(&[key]);
            String::new()
        }
        Op::SetLimit { limit } => {
            let set = store.set_limit(0, limit);
            format!("{set:?} {:?}", &*store.limits())
        }
    }
}

proptest! {
    #[test]
    fn the_three_stores_answer_a_trace_alike(trace in ops()) {
        let (mut local, mut zone, mut by_name) = stores(&rule(4));
        let mut now_ms = 0;
        for (op, step) in &trace {
            now_ms += step;
            let answer = apply(&mut local, op, now_ms);
            let (z, d) = (apply(&mut zone, op, now_ms), apply(&mut by_name, op, now_ms));
            prop_assert_eq!(&z, &answer, "zone at {}: {:?}", now_ms, op);
            prop_assert_eq!(&d, &answer, "directory at {}: {:?}", now_ms, op);
            for key in 0..4_u8 {
                let peek = local.key_window(&[key], now_ms, 1).unwrap().decision;
                prop_assert_eq!(zone.key_window(&[key], now_ms, 1).unwrap().decision, peek);
            }
        }
        let (z, d, l) = (zone.stats(), by_name.stats(), local.stats());
        prop_assert_eq!((z.allowed, z.rejected, z.would_reject), (l.allowed, l.rejected, l.would_reject));
        prop_assert_eq!((d.allowed, d.rejected, d.would_reject), (l.allowed, l.rejected, l.would_reject));
    }
}

#[test]
fn a_directory_rule_follows_its_name_with_versions_that_only_go_on() -> Result<(), Error> {
    let rules = Arc::new(Directory::attach(words(1 << 16), 4, OneProcess, [3, 4])?);
    let found = rules.put(b"api", &rule(2), 16, 64 << 10, 0)?;
    let mut store = DirectoryRule::new(Arc::clone(&rules), b"api".to_vec(), found, OneProcess)?;
    assert!(store.decide(b"k", 0, 2, Call::Check, None)?.allowed);
    let first = store.version();
    // Other windows: a new rule under the same name, which the store moves to at its next call.
    let other = Rule::one(RuleWindow::counter(Quota::new(5, 500)?));
    rules.put(b"api", &other, 16, 64 << 10, 10)?;
    assert_eq!(store.rule(), &rule(2), "nothing moves before a call");
    store.follow()?;
    assert_eq!(store.rule(), &other);
    assert!(store.version() > first);
    assert_eq!(
        store.decide(b"k", 20, 1, Call::Check, None)?.remaining,
        4,
        "a fresh rule"
    );
    rules.remove(b"api", 30);
    assert_eq!(
        store.decide(b"k", 40, 1, Call::Check, None).unwrap_err(),
        Error::RuleRemoved
    );
    Ok(())
}

#[test]
fn a_caller_limits_are_checked_against_the_rule_in_every_store() -> Result<(), Error> {
    let (mut local, mut zone, mut by_name) = stores(&rule(4));
    for store in [&mut local as &mut dyn Store, &mut zone, &mut by_name] {
        assert_eq!(
            store.decide(b"k", 0, 1, Call::Check, Some(&[2, 6]))?.limit,
            2
        );
        let error = store
            .decide(b"k", 0, 1, Call::Check, Some(&[21, 6]))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "limit must be a positive integer at most the window's max_limit, got 21"
        );
    }
    Ok(())
}

#[test]
fn a_region_kind_ignores_limits_but_not_lengths() -> Result<(), Error> {
    let kind = |limit, window_ms| {
        let window = RuleWindow::log(Quota::new(limit, window_ms).unwrap());
        RegionKind::rule(&Rule::one(window.with_max_limit(50).unwrap()), 64)
    };
    assert_eq!(
        kind(10, 1_000),
        kind(20, 1_000),
        "a limit may change in place"
    );
    assert_ne!(kind(10, 1_000), kind(10, 2_000));
    let RegionKind::Rule { windows, .. } = kind(10, 1_000) else {
        unreachable!("a rule's kind")
    };
    assert_eq!(windows[0].to_string(), "log max_limit 50 window_ms 1000");
    assert_ne!(
        RegionKind::Directory { max_rules: 8 },
        RegionKind::Directory { max_rules: 9 }
    );
    Ok(())
}
