//! Rules of 1 to 4 windows of mixed algorithms against a naive model (one `common::Model` per
//! window, combined the obvious way), on random traces of checks, peeks, uncommits,
//! give-backs at an earlier stamp, clock steps and limit changes (live `set_limit` and per-call limits up to `max_limit`): the
//! in-process `RuleLimiter`, a `shared::Zone` over a region of words and `Keyed` per-key rules
//! give the model's every `Decision` field.

mod common;

use common::process::Thread;
use common::{Counting, Model};
use proptest::prelude::*;
use slidewin::reservation::Amend;
use slidewin::rule::{Rule, RuleLimiter, RuleState, RuleWindow};
use slidewin::shared::Zone;
use slidewin::{BucketQuota, Call, Decision, Keyed, Limiter, Quota};
use std::sync::atomic::AtomicU64;

/// A window drawn for a rule: its algorithm and how the model counts it.
#[derive(Debug, Clone, Copy)]
struct Drawn {
    window: RuleWindow,
    counting: Counting,
}

/// Small windows (the model tries every millisecond) of every algorithm, with room to raise
/// the limit a little, or near to where doubles stop being exact.
/// the limit.
fn window() -> impl Strategy<Value = Drawn> {
    let limit = 1..=8u64;
    let raise = prop_oneof![8 => 0..=8u64, 1 => Just(1u64 << 53)];
    let log = (limit.clone(), 1..=40i64).prop_map(|(l, w)| Drawn {
        window: RuleWindow::log(Quota::new(l, w).unwrap()),
        counting: Counting::Exact,
    });
    let counter = (limit.clone(), 1..=40i64).prop_map(|(l, w)| Drawn {
        window: RuleWindow::counter(Quota::new(l, w).unwrap()),
        counting: Counting::TwoWindows,
    });
    let buckets = (limit, 1..=6i64, 1..=6i64).prop_map(|(l, n, b)| Drawn {
        window: RuleWindow::buckets(BucketQuota::new(l, n * b, b).unwrap()),
        counting: Counting::Buckets(b),
    });
    (prop_oneof![log, counter, buckets], raise).prop_map(|(drawn, raise)| Drawn {
        window: drawn
            .window
            .with_max_limit(drawn.window.limit() + raise)
            .unwrap(),
        ..drawn
    })
}

/// One call of a trace, after the clock moved by its gap.
#[derive(Debug, Clone)]
enum Op {
    /// A check (`commit`) or peek on key 0 or 1, under the live limits or the call's own
    /// (sometimes out of range or of the wrong length: an error).
    Decide {
        key: usize,
        cost: u64,
        commit: bool,
        limits: Option<Vec<u64>>,
    },
    Uncommit {
        key: usize,
        cost: u64,
    },
    /// Gives back cost recorded `back_ms` before now or earlier, or owes it there (sometimes
    /// out of the clock's range: an error that changes nothing).
    Amend {
        key: usize,
        back_ms: i64,
        cost: u64,
        owe: bool,
    },
    /// A live limit change (sometimes out of range: an error that changes nothing).
    SetLimit {
        window: usize,
        limit: u64,
    },
}

/// How long before now a give-back's stamp is: the same millisecond, a few back, past a
/// window, a stamp ahead of now (the clock stepped back since), or out of the clock's range.
fn back_ms() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        6 => 1..=8i64,
        3 => 1..=60i64,
        1 => -5..0i64,
        1 => Just(1i64 << 60),
    ]
}

/// A limit for a window of `max_limit`: mostly in `1..=max_limit`, now and then 0 or above.
fn limit_upto(max_limit: u64) -> impl Strategy<Value = u64> {
    prop_oneof![12 => 1..=max_limit, 1 => Just(0), 1 => Just(max_limit + 1)]
}

fn trace(windows: &[Drawn]) -> impl Strategy<Value = Vec<(i64, Op)>> {
    let max_limits: Vec<u64> = windows.iter().map(|d| d.window.max_limit()).collect();
    let most = *max_limits.iter().max().unwrap();
    let n = windows.len();
    let plan = max_limits
        .iter()
        .map(|&m| limit_upto(m).boxed())
        .collect::<Vec<_>>();
    let limits = prop_oneof![
        3 => Just(None),
        2 => plan.prop_map(Some),
        1 => proptest::collection::vec(1..=most, 0..=5).prop_map(Some),
    ];
    // Ordinary costs, up to past the largest limit, and hostile ones.
    let cost = prop_oneof![
        12 => 0..=3u64,
        2 => 0..=most.saturating_add(1),
        1 => Just(1 << 53),
        1 => Just(u64::MAX),
    ];
    let key = 0..2usize;
    let set_limit = (0..=n, 0..=most + 1).prop_flat_map(move |(window, _)| {
        let max_limit = max_limits.get(window).copied().unwrap_or(most);
        limit_upto(max_limit).prop_map(move |limit| Op::SetLimit { window, limit })
    });
    let op = prop_oneof![
        8 => (key.clone(), cost.clone(), any::<bool>(), limits).prop_map(|(key, cost, commit, limits)| {
            Op::Decide { key, cost, commit, limits }
        }),
        2 => (key.clone(), cost.clone()).prop_map(|(key, cost)| Op::Uncommit { key, cost }),
        4 => (key, back_ms(), cost, any::<bool>())
            .prop_map(|(key, back_ms, cost, owe)| Op::Amend { key, back_ms, cost, owe }),
        2 => set_limit,
    ];
    // Same-millisecond bursts, steps, far jumps, the clock stepping back (near or far).
    let gap = prop_oneof![
        8 => Just(0i64),
        8 => 1..=3i64,
        4 => 1..=60i64,
        2 => -30..0i64,
        1 => Just(1_000_000_000i64),
        1 => Just(-1_000_000i64),
    ];
    proptest::collection::vec((gap, op), 1..150)
}

/// A rule as its windows' models decide it, each window by itself and combined the obvious
/// way: admitted when every window admits (then recorded in all); `remaining` the least room;
/// the wait the first millisecond at which every window admits; the window described, when
/// refused, the refusing one with the longest wait (never = longest; ties: the lower index),
/// when admitted, the one with the least remaining (ties: the lower index).
#[derive(Debug, Clone)]
struct RuleModel {
    windows: Vec<Model>,
}

impl RuleModel {
    fn new(windows: &[Drawn]) -> Self {
        let model = |d: &Drawn| Model::new(d.window.limit(), d.window.window_ms(), d.counting);
        Self {
            windows: windows.iter().map(model).collect(),
        }
    }

    fn decide(&mut self, now_ms: i64, cost: u64, commit: bool, limits: &[u64]) -> Decision {
        let alone: Vec<Decision> = (self.windows.iter_mut().zip(limits))
            .map(|(m, &limit)| {
                m.limit = limit;
                m.decide(now_ms, cost, false)
            })
            .collect();
        let now = self.windows[0].newest_ms.unwrap();
        let rooms: Vec<u64> = (self.windows.iter())
            .map(|m| m.limit.saturating_sub(m.used(now)))
            .collect();
        let allowed = alone.iter().all(|d| d.allowed);
        let fits_at = |d: i64| {
            self.windows
                .iter()
                .all(|m| m.used(now + d) + cost <= m.limit)
        };
        let retry_after_ms = if allowed {
            Some(0)
        } else if self.windows.iter().any(|m| cost > m.limit) {
            None
        } else {
            (1..).find(|&d| fits_at(d)).map(|d| d as u64)
        };
        let window = if allowed {
            (0..limits.len()).min_by_key(|&w| rooms[w]).unwrap()
        } else {
            let wait = |w: usize| alone[w].retry_after_ms.unwrap_or(u64::MAX);
            let refusing = (0..limits.len()).filter(|&w| !alone[w].allowed);
            // The first of the longest waits: max_by_key keeps the last, so compare reversed.
            refusing.min_by_key(|&w| u64::MAX - wait(w)).unwrap()
        };
        if allowed && commit && cost > 0 {
            self.windows.iter_mut().for_each(|m| m.admit(cost));
        }
        let least_room = *rooms.iter().min().unwrap();
        Decision {
            allowed,
            limit: limits[window],
            // Whatever an admitted call would record, refused nothing.
            remaining: least_room - cost * u64::from(allowed),
            retry_after_ms,
            reset_after_ms: self.windows[window].reset_after_ms(),
            window,
        }
    }

    fn amend(&mut self, now_ms: i64, stamp_ms: Option<i64>, amend: Amend, windows: &[Drawn]) {
        for (m, d) in self.windows.iter_mut().zip(windows) {
            match amend {
                Amend::GiveBack(cost) => m.give_back(now_ms, stamp_ms, cost),
                Amend::Owe(cost) => m.owe(now_ms, stamp_ms, cost, d.window.max_limit()),
            }
        }
    }

    /// Whether every window counts nothing at the newest time.
    fn is_idle(&self) -> bool {
        (self.windows.iter()).all(|m| m.newest_ms.is_none_or(|now| m.used(now) == 0))
    }
}

/// A model of one key as one implementation holds it: a key the implementation does not hold
/// answers as a fresh one (it forgets the newest time a peek or a refusal showed it).
struct Held {
    model: RuleModel,
    held: bool,
}

impl Held {
    fn new(windows: &[Drawn], held: bool) -> Self {
        Self {
            model: RuleModel::new(windows),
            held,
        }
    }

    fn model(&mut self, windows: &[Drawn]) -> &mut RuleModel {
        if !self.held {
            self.model = RuleModel::new(windows);
        }
        &mut self.model
    }
}

/// The three implementations of one rule and a model of each of their keys.
struct Subjects<'r> {
    windows: Vec<Drawn>,
    rule: Rule,
    /// The live limits `set_limit` made, for the in-process rules.
    live: Vec<u64>,
    limiters: [RuleLimiter; 2],
    zone: Zone<&'r [AtomicU64], Thread>,
    keyed: Keyed<RuleLimiter, Vec<u8>>,
    /// Models of keys 0 and 1 as the limiters, the zone and the keyed store hold them.
    models: [[Held; 2]; 3],
}

const KEYS: [&[u8]; 2] = [b"alice", b"a key longer than max_key_bytes"];
// Subjects, in the order of `Subjects::models`.
const ZONE: usize = 1;
const KEYED: usize = 2;

impl<'r> Subjects<'r> {
    fn new(windows: Vec<Drawn>, words: &'r [AtomicU64]) -> Self {
        let rule = Rule::new(windows.iter().map(|d| d.window)).unwrap();
        let (zone, _) = Zone::attach(words, rule.clone(), 16, Thread(1), [3, 4]).unwrap();
        assert!(zone.capacity() >= KEYS.len(), "{}", zone.capacity());
        let keyed = Keyed::new(rule.clone(), 16)
            .unwrap()
            .with_max_key_bytes(8)
            .unwrap();
        // A limiter holds its key from the start; the zone and the keyed store once stored.
        let models = [true, false, false].map(|held| [0, 1].map(|_| Held::new(&windows, held)));
        Self {
            live: rule.limits().to_vec(),
            limiters: [0, 1].map(|_| RuleLimiter::from_config(rule.clone())),
            windows,
            rule,
            zone,
            keyed,
            models,
        }
    }

    fn decide(
        &mut self,
        key: usize,
        now: i64,
        cost: u64,
        commit: bool,
        asked: Option<&[u64]>,
    ) -> Result<(), TestCaseError> {
        let limits = self.rule.check_limits(asked.unwrap_or(&self.live));
        let decide_with = |rule: &Rule, state: &mut RuleState, commit| {
            rule.decide_with(state, now, cost, commit, &limits.clone()?)
        };
        let limiter = &mut self.limiters[key];
        let got = [
            match (asked.is_none() && self.live == *self.rule.limits(), commit) {
                // The `Limiter` calls decide under the configured limits.
                (true, true) => limiter.check_at(now, cost),
                (true, false) => limiter.peek_at(now, cost),
                (false, _) => {
                    let (rule, state) = limiter.parts_mut();
                    decide_with(rule, state, commit)
                }
            },
            match asked {
                None if commit => self.zone.check_at(KEYS[key], now, cost),
                None => self.zone.peek_at(KEYS[key], now, cost),
                Some(_) => limits.clone().and_then(|l| {
                    let call = if commit { Call::Check } else { Call::Peek };
                    self.zone.decide_at(KEYS[key], now, cost, call, &l)
                }),
            },
            self.keyed
                .decide_bytes_by(KEYS[key], now, commit, decide_with),
        ];
        for (subject, got) in got.into_iter().enumerate() {
            let limits = match &limits {
                Ok(limits) => limits,
                Err(err) => {
                    prop_assert_eq!(got.map_err(|e| e.to_string()).err(), Some(err.to_string()));
                    continue;
                }
            };
            let held = &mut self.models[subject][key];
            let want = held.model(&self.windows).decide(now, cost, commit, limits);
            prop_assert_eq!(got, Ok(want), "subject {} key {} at {}", subject, key, now);
            // The zone stores a key at its first check; the keyed store once it holds cost.
            held.held |= match subject {
                ZONE => commit,
                KEYED => commit && !held.model.is_idle(),
                _ => true,
            };
        }
        Ok(())
    }

    fn uncommit(&mut self, key: usize, now: i64, cost: u64) -> Result<(), TestCaseError> {
        prop_assert_eq!(self.limiters[key].uncommit_at(now, cost), Ok(()));
        prop_assert_eq!(self.zone.uncommit_at(KEYS[key], now, cost), Ok(()));
        prop_assert_eq!(self.keyed.uncommit_bytes_at(KEYS[key], now, cost), Ok(()));
        for models in &mut self.models {
            let give_back = Amend::GiveBack(cost);
            (models[key].model(&self.windows)).amend(now, None, give_back, &self.windows);
        }
        Ok(())
    }

    fn amend(
        &mut self,
        key: usize,
        now: i64,
        stamp: i64,
        amend: Amend,
    ) -> Result<(), TestCaseError> {
        let got = [
            self.limiters[key].amend_at(now, stamp, amend),
            self.zone.amend_at(KEYS[key], now, Some(stamp), amend),
            self.keyed
                .amend_bytes_at(KEYS[key], now, Some(stamp), amend),
        ];
        let in_range = (-(1i64 << 53)..=1i64 << 53).contains(&stamp);
        for (subject, got) in got.into_iter().enumerate() {
            if !in_range {
                let err = got.map_err(|e| e.to_string()).unwrap_err();
                prop_assert!(err.contains("stamp_ms"), "subject {}: {}", subject, err);
                continue;
            }
            prop_assert_eq!(got, Ok(()), "subject {}", subject);
            self.models[subject][key].model(&self.windows).amend(
                now,
                Some(stamp),
                amend,
                &self.windows,
            );
        }
        Ok(())
    }

    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), TestCaseError> {
        let version = self.zone.limits_version();
        let set = self.zone.set_limit(window, limit);
        let max_limit = self.windows.get(window).map(|d| d.window.max_limit());
        match max_limit {
            Some(max) if (1..=max).contains(&limit) => {
                prop_assert_eq!(set, Ok(()));
                self.live[window] = limit;
                prop_assert_eq!(self.zone.limits_version(), version + 1);
            }
            _ => {
                prop_assert!(set.is_err(), "window {} limit {}", window, limit);
                prop_assert_eq!(self.zone.limits_version(), version);
            }
        }
        prop_assert_eq!(&*self.zone.limits(), &self.live[..]);
        Ok(())
    }
}

/// Where a trace starts: near 0, or near an end of the clock's range (±2^53), leaving room
/// for the trace's jumps (at most 150 of 10^9 ms ahead, or of 10^6 ms back).
fn start_ms() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => -1_000..=1_000i64,
        1 => Just((1i64 << 53) - 200_000_000_000),
        1 => Just(-(1i64 << 53) + 200_000_000),
    ]
}

fn replay(windows: Vec<Drawn>, start: i64, trace: &[(i64, Op)]) -> Result<(), TestCaseError> {
    let words: Vec<AtomicU64> = (0..(64 << 10) / 8).map(|_| AtomicU64::new(0)).collect();
    let mut subjects = Subjects::new(windows, &words);
    let mut now = start;
    for (gap, op) in trace {
        now += gap;
        match op {
            Op::Decide {
                key,
                cost,
                commit,
                limits,
            } => subjects.decide(*key, now, *cost, *commit, limits.as_deref())?,
            Op::Uncommit { key, cost } => subjects.uncommit(*key, now, *cost)?,
            Op::Amend {
                key,
                back_ms,
                cost,
                owe,
            } => {
                let amend = match owe {
                    true => Amend::Owe(*cost),
                    false => Amend::GiveBack(*cost),
                };
                subjects.amend(*key, now, now - back_ms, amend)?
            }
            Op::SetLimit { window, limit } => subjects.set_limit(*window, *limit)?,
        }
    }
    prop_assert_eq!(subjects.zone.stats().evictions, 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn limiter_zone_and_keyed_rules_agree_with_the_model(
        start in start_ms(),
        (windows, trace) in proptest::collection::vec(window(), 1..=4)
            .prop_flat_map(|w| { let t = trace(&w); (Just(w), t) }),
    ) {
        replay(windows, start, &trace)?;
    }
}
