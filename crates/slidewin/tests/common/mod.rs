//! Naive reference models and random traces for the limiter property tests.
#![allow(dead_code)] // each test file uses part of this

pub mod process;

use proptest::prelude::*;
use slidewin::{Decision, Limiter};

/// How a model counts what it admitted: exactly, or with the two-fixed-window estimate.
#[derive(Debug, Clone, Copy)]
pub enum Counting {
    /// Every admitted cost counts for `window_ms` ms: `(t - window_ms, t]`.
    Exact,
    /// `ceil(previous · (window - elapsed) / window) + current` over fixed windows.
    TwoWindows,
    /// As `Exact`, but each cost counts as if it arrived at the last millisecond of its bucket
    /// of `bucket_ms` (buckets start at multiples of `bucket_ms`).
    Buckets(i64),
}

/// A limiter written the obvious way: a list of every admitted `(ms, cost)`, answers found by
/// summing it and by trying every later millisecond in turn.
#[derive(Debug, Clone)]
pub struct Model {
    pub limit: u64,
    pub window_ms: i64,
    pub counting: Counting,
    pub admitted: Vec<(i64, u64)>,
    pub newest_ms: Option<i64>,
}

impl Model {
    pub fn new(limit: u64, window_ms: i64, counting: Counting) -> Self {
        Self {
            limit,
            window_ms,
            counting,
            admitted: Vec::new(),
            newest_ms: None,
        }
    }

    /// Whether cost admitted at `ms` still counts at `at_ms`.
    fn counts(&self, ms: i64, at_ms: i64) -> bool {
        match self.counting {
            Counting::Exact => ms > at_ms - self.window_ms,
            Counting::Buckets(bucket_ms) => {
                ms - ms.rem_euclid(bucket_ms) + bucket_ms - 1 > at_ms - self.window_ms
            }
            Counting::TwoWindows => {
                ms.div_euclid(self.window_ms) >= at_ms.div_euclid(self.window_ms) - 1
            }
        }
    }

    /// What the window counts at `at_ms`.
    pub fn used(&self, at_ms: i64) -> u64 {
        let w = self.window_ms;
        match self.counting {
            Counting::Exact | Counting::Buckets(_) => self
                .admitted
                .iter()
                .filter(|(ms, _)| self.counts(*ms, at_ms))
                .map(|e| e.1)
                .sum(),
            Counting::TwoWindows => {
                let k = at_ms.div_euclid(w);
                let sum = |win: i64| -> u64 {
                    self.admitted
                        .iter()
                        .filter(|(ms, _)| ms.div_euclid(w) == win)
                        .map(|e| e.1)
                        .sum()
                };
                let elapsed = at_ms.rem_euclid(w) as u128;
                let previous = sum(k - 1) as u128 * (w as u128 - elapsed);
                previous.div_ceil(w as u128) as u64 + sum(k)
            }
        }
    }

    fn clamp(&mut self, now_ms: i64) -> i64 {
        let now = self.newest_ms.map_or(now_ms, |n| n.max(now_ms));
        self.newest_ms = Some(now);
        now
    }

    pub fn decide(&mut self, now_ms: i64, cost: u64, commit: bool) -> Decision {
        let now = self.clamp(now_ms);
        let used = self.used(now);
        let room = self.limit.saturating_sub(used);
        let allowed = cost <= room;
        if allowed && commit && cost > 0 {
            self.admitted.push((now, cost));
        }
        let retry_after_ms = if allowed {
            Some(0)
        } else if cost > self.limit {
            None
        } else {
            (1..)
                .find(|d| self.used(now + d) + cost <= self.limit)
                .map(|d| d as u64)
        };
        Decision {
            allowed,
            limit: self.limit,
            remaining: if allowed { room - cost } else { room },
            retry_after_ms,
            reset_after_ms: self.reset_after_ms(),
            window: 0,
        }
    }

    /// Milliseconds from the newest time until the window counts nothing.
    pub fn reset_after_ms(&self) -> u64 {
        let now = self.newest_ms.unwrap();
        (0..).find(|d| self.used(now + d) == 0).unwrap() as u64
    }

    /// Record `cost` at the newest time, as another limiter decided.
    pub fn admit(&mut self, cost: u64) {
        self.admitted.push((self.newest_ms.unwrap(), cost));
    }

    /// Give back up to `cost` from the newest admitted cost that still counts.
    pub fn refund(&mut self, now_ms: i64, cost: u64) {
        self.give_back(now_ms, None, cost);
    }

    /// Record `cost` at `stamp_ms` (`None`: the newest time) whether it fits or not, cut so
    /// the window counts at most `2 * max_limit`; nothing when the stamp no longer counts. A
    /// log or buckets keep it with cost admitted before: in the oldest granule (ms, bucket)
    /// holding some from the stamp's on, else the newest holding some.
    pub fn owe(&mut self, now_ms: i64, stamp_ms: Option<i64>, cost: u64, max_limit: u64) {
        let now = self.clamp(now_ms);
        let stamp = stamp_ms.map_or(now, |ms| ms.min(now));
        let cost = cost.min((2 * max_limit).saturating_sub(self.used(now)));
        if cost == 0 || !self.counts(stamp, now) {
            return;
        }
        let granule = |ms: i64| match self.counting {
            Counting::Buckets(bucket_ms) => ms.div_euclid(bucket_ms),
            _ => ms,
        };
        let counting = || (self.admitted.iter().map(|e| e.0)).filter(|&ms| self.counts(ms, now));
        let ms = match self.counting {
            Counting::TwoWindows => stamp,
            _ => (counting().filter(|&ms| granule(ms) >= granule(stamp)).min())
                .or(counting().max())
                .unwrap_or(stamp),
        };
        let at = self.admitted.partition_point(|e| e.0 <= ms);
        self.admitted.insert(at, (ms, cost));
    }

    /// Give back up to `cost` admitted at `stamp_ms` or before (`None`: the newest time),
    /// newest first, among what still counts. Buckets and two windows cannot
    /// tell times within a bucket or a fixed window apart: there, cost admitted after the
    /// stamp in its bucket or window is the stamp's.
    pub fn give_back(&mut self, now_ms: i64, stamp_ms: Option<i64>, mut cost: u64) {
        let stamp = stamp_ms.unwrap_or(i64::MAX);
        let now = self.clamp(now_ms);
        let granule = |ms: i64| match self.counting {
            Counting::Exact => ms,
            Counting::Buckets(bucket_ms) => ms.div_euclid(bucket_ms),
            Counting::TwoWindows => ms.div_euclid(self.window_ms),
        };
        let last = granule(stamp.min(now));
        for i in (0..self.admitted.len()).rev() {
            let (ms, units) = self.admitted[i];
            if cost == 0 || !self.counts(ms, now) {
                break;
            }
            if granule(ms) <= last {
                let taken = cost.min(units);
                self.admitted[i].1 -= taken;
                cost -= taken;
            }
        }
        self.admitted.retain(|&(_, units)| units > 0);
    }
}

/// The most cost `admitted` holds in any interval `(t - window_ms, t]`.
pub fn max_in_any_window(admitted: &[(i64, u64)], window_ms: i64) -> u64 {
    let mut sorted = admitted.to_vec();
    sorted.sort();
    let mut best = 0;
    let mut start = 0;
    let mut sum = 0;
    for &(ms, cost) in &sorted {
        sum += cost;
        while sorted[start].0 <= ms - window_ms {
            sum -= sorted[start].1;
            start += 1;
        }
        best = best.max(sum);
    }
    best
}

/// One call of a trace.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Check(u64),
    Peek(u64),
    Refund(u64),
}

/// A step of a trace: move the clock by `gap_ms` (0 = same-ms burst, negative = clock stepped
/// back), then make the call.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub gap_ms: i64,
    pub op: Op,
}

pub fn steps(limit: u64, window_ms: i64, refunds: bool) -> impl Strategy<Value = Vec<Step>> {
    let gap = prop_oneof![
        4 => Just(0i64),
        4 => 1..=3i64,
        2 => 1..=window_ms * 2,
        1 => -window_ms..0,
    ];
    let cost = prop_oneof![6 => 1..=3u64, 2 => 0..=limit + 2];
    let op = prop_oneof![
        8 => cost.clone().prop_map(Op::Check),
        2 => cost.clone().prop_map(Op::Peek),
        (if refunds { 1 } else { 0 }) => cost.prop_map(Op::Refund),
    ];
    proptest::collection::vec(
        (gap, op).prop_map(|(gap_ms, op)| Step { gap_ms, op }),
        1..200,
    )
}

/// Run `steps` from `start_ms` through `limiter` and `model`, calling `each` with both answers
/// of every decision.
pub fn replay<L: Limiter>(
    limiter: &mut L,
    model: &mut Model,
    start_ms: i64,
    steps: &[Step],
    mut each: impl FnMut(i64, Decision, Decision, &Model),
) {
    let mut now = start_ms;
    for step in steps {
        now += step.gap_ms;
        match step.op {
            Op::Check(cost) | Op::Peek(cost) => {
                let commit = matches!(step.op, Op::Check(_));
                let got = if commit {
                    limiter.check_at(now, cost)
                } else {
                    limiter.peek_at(now, cost)
                };
                let want = model.decide(now, cost, commit);
                each(now, got.unwrap(), want, model);
            }
            Op::Refund(cost) => {
                limiter.uncommit_at(now, cost).unwrap();
                model.refund(now, cost);
            }
        }
    }
}

/// A call on one of a keyed store's keys.
#[derive(Debug, Clone)]
pub enum KeyedOp {
    Check(u16, u64),
    Peek(u16, u64),
    Uncommit(u16, u64),
    Reset(u16),
}

/// Calls on 40 keys, the clock moving forward by up to 600 ms (windows are 1000 ms);
/// now and then a cost above the limit (10).
pub fn keyed_ops() -> impl Strategy<Value = Vec<(KeyedOp, i64)>> {
    let key = 0..40_u16;
    let cost = prop_oneof![6 => 0..4_u64, 1 => Just(11_u64)];
    let op = prop_oneof![
        6 => (key.clone(), cost.clone()).prop_map(|(k, c)| KeyedOp::Check(k, c)),
        2 => (key.clone(), cost.clone()).prop_map(|(k, c)| KeyedOp::Peek(k, c)),
        2 => (key.clone(), cost).prop_map(|(k, c)| KeyedOp::Uncommit(k, c)),
        1 => key.prop_map(KeyedOp::Reset),
    ];
    proptest::collection::vec((op, prop_oneof![3 => 0..50_i64, 1 => 0..600_i64]), 1..400)
}
