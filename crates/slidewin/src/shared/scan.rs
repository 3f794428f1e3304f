//! The operator's view of a region: its heaviest keys and how full the windows are.
//!
//! [`Zone::scan_at`] walks the sets one at a time, holding each set's lock only for the peek
//! of its [`super::WAYS`] ways (a set's work, like one call), so requests wait at most that
//! long; the answer is a moment's view, not one instant's. A [`Walk`] does the same work a slice of sets
//! at a time ([`Zone::walk_step`]), so that a host serving many requests on one thread (an
//! nginx worker) serves the others between slices: a region of a million keys takes a tenth
//! of a second to walk, too long to keep anyone waiting. A way only adds a word counting its
//! refusals since its windows were last all empty ([`super::zone`]'s `count_refusal`); everything else is
//! read off its windows, under the live limits, recording nothing.
//!
//! A key of a rule with several windows is reported by the window nearest its limit (the
//! highest `count / limit`; ties: the lower index): a key at 9 of 10 per second and 100 of
//! 1000 per hour shows as 9 / 10 of window 0.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;
use core::sync::atomic::AtomicU64;

use super::answers::ZoneStats;
pub use super::keys::Stored as StoredKey;
use super::lock::Owner;
use super::zone::Zone;
use crate::clock::check_time;
use crate::{Decision, Error};

/// Upper bounds of the usage histogram's buckets, as `numerator / denominator` of
/// `count / limit` (a key at its limit falls in the last); keys above every bound (a limit
/// lowered under what the window holds) only in `+Inf`.
pub const USAGE_BOUNDS: [(u64, u64); 5] = [(1, 4), (1, 2), (3, 4), (9, 10), (1, 1)];

/// How full one window of a key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// The window's 0-based index in the rule.
    pub window: usize,
    /// Cost counted in the window now.
    pub count: u64,
    /// The live limit the window is held to.
    pub limit: u64,
}

impl Usage {
    /// Whether `self` is strictly nearer its limit than `other` (count / limit, exact).
    fn nearer_than(&self, other: &Usage) -> bool {
        u128::from(self.count) * u128::from(other.limit)
            > u128::from(other.count) * u128::from(self.limit)
    }

    /// Whether `count / limit <= num / den`.
    fn within(&self, (num, den): (u64, u64)) -> bool {
        u128::from(self.count) * u128::from(den) <= u128::from(self.limit) * u128::from(num)
    }
}

/// One key of a top list: its window nearest the limit, and its refusals since its windows
/// were last all empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeavyHitter {
    /// The key as the region keeps it.
    pub key: StoredKey,
    /// Its window nearest the limit.
    pub usage: Usage,
    /// Refusals since its windows were last all empty.
    pub refused: u64,
}

/// What one walk over a region saw.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scan {
    /// Keys some window of which holds something now.
    pub live: u64,
    /// Live keys with a full window (count >= limit: the next call of cost 1 is refused).
    pub at_limit: u64,
    /// Live keys whose nearest window's `count / limit` is at most each bound of
    /// [`USAGE_BOUNDS`] (cumulative, as Prometheus buckets are).
    pub usage: [u64; USAGE_BOUNDS.len()],
    /// The sum of the nearest window's `count / limit` over live keys.
    pub usage_sum: f64,
    /// The most refused keys (refused > 0), most first; ties by count, then in any order.
    pub refused: Vec<HeavyHitter>,
    /// The live keys nearest their limit, nearest first; ties in any order.
    pub admitted: Vec<HeavyHitter>,
}

impl Scan {
    /// The usage histogram's buckets: each bound of [`USAGE_BOUNDS`] as a number (a
    /// Prometheus `le`) with its cumulative count; `+Inf` is [`Scan::live`].
    pub fn buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let bounds = USAGE_BOUNDS
            .iter()
            .map(|&(num, den)| num as f64 / den as f64);
        bounds.zip(self.usage.iter().copied())
    }
}

/// One walk over a region's sets, done a slice at a time by [`Zone::walk_step`]: what
/// [`Zone::scan_at`] answers and the counters of [`Zone::stats`], or the counters alone.
pub struct Walk {
    /// The next set to walk.
    next: usize,
    /// The scan so far and its two top lists (none for the counters alone).
    keys: Option<(Scan, Top, Top)>,
    stats: ZoneStats,
}

impl Walk {
    /// A walk for the scan with the `top` most refused and nearest their limit, and the counters.
    pub fn scan(top: usize) -> Self {
        Self {
            next: 0,
            keys: Some((Scan::default(), Top::new(top), Top::new(top))),
            stats: ZoneStats::default(),
        }
    }

    /// A walk for the counters alone: a read of each set's header, no lock.
    pub fn counters() -> Self {
        Self {
            next: 0,
            keys: None,
            stats: ZoneStats::default(),
        }
    }

    /// What the walk saw: the scan (none for a walk of the counters alone) and the counters,
    /// each set's as the walk passed it.
    pub fn finish(self) -> (Option<Scan>, ZoneStats) {
        let scan = self.keys.map(|(mut scan, refused, admitted)| {
            scan.refused = refused.into_vec();
            scan.admitted = admitted.into_vec();
            scan
        });
        (scan, self.stats)
    }
}

/// One key's windows now, as the next call of some cost finds them (nothing recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyWindow {
    /// The peek's answer: what that call gets if nothing comes between.
    pub decision: Decision,
    /// Every window's count against its live limit, in the rule's order.
    pub windows: Vec<Usage>,
    /// Refusals since the key's windows were last all empty (0 for a key not held).
    pub refused: u64,
}

impl KeyWindow {
    /// The window nearest its limit.
    pub fn nearest(&self) -> Usage {
        nearest(self.windows.iter().copied())
    }
}

fn nearest(windows: impl Iterator<Item = Usage>) -> Usage {
    windows
        .reduce(|best, u| if u.nearer_than(&best) { u } else { best })
        .unwrap_or_default()
}

/// The `n` best of what is offered, by rank (a min-heap of the kept ones: the worst is dropped).
struct Top {
    n: usize,
    kept: BinaryHeap<Reverse<(Rank, Entry)>>,
}

/// A key's rank: a count (its refusals), then how near its limit its nearest window is.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Rank(u64, Usage);

impl PartialOrd for Rank {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Rank {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        let fraction = if self.1.nearer_than(&other.1) {
            core::cmp::Ordering::Greater
        } else if other.1.nearer_than(&self.1) {
            core::cmp::Ordering::Less
        } else {
            core::cmp::Ordering::Equal
        };
        self.0.cmp(&other.0).then(fraction)
    }
}

/// A kept key; ordered only by rank (the heap's tuple compares the rank first).
struct Entry(HeavyHitter);

impl PartialEq for Entry {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, _: &Self) -> core::cmp::Ordering {
        core::cmp::Ordering::Equal
    }
}

impl Top {
    fn new(n: usize) -> Self {
        Self {
            n,
            kept: BinaryHeap::with_capacity(n + 1),
        }
    }

    /// Offers a key of `rank`; its key is read (copied) only when it is kept.
    fn offer(&mut self, rank: Rank, hitter: impl FnOnce() -> Option<HeavyHitter>) {
        let full = self.kept.len() >= self.n;
        if self.n == 0 || full && self.kept.peek().is_some_and(|Reverse((r, _))| rank <= *r) {
            return;
        }
        if let Some(hitter) = hitter() {
            self.kept.push(Reverse((rank, Entry(hitter))));
            if self.kept.len() > self.n {
                self.kept.pop();
            }
        }
    }

    /// Best first.
    fn into_vec(self) -> Vec<HeavyHitter> {
        // Ascending `Reverse` is best first.
        let sorted = self.kept.into_sorted_vec();
        sorted.into_iter().map(|Reverse((_, e))| e.0).collect()
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Zone<R, O> {
    /// Walks every set at `now_ms` under the live limits: the usage of live keys, and the
    /// `top` most refused keys and the `top` nearest their limit. Holds one set's lock at a
    /// time; records nothing.
    pub fn scan_at(&self, now_ms: i64, top: usize) -> Result<Scan, Error> {
        let mut walk = Walk::scan(top);
        self.walk_step(&mut walk, now_ms, usize::MAX)?;
        let (scan, _) = walk.finish();
        Ok(scan.unwrap_or_default())
    }

    /// Walks up to `sets` more sets of `walk` at `now_ms`, under the live limits: true once
    /// every set is walked. A region laid out anew meanwhile ends the walk at its last set.
    pub fn walk_step(&self, walk: &mut Walk, now_ms: i64, sets: usize) -> Result<bool, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let from = walk.next.min(self.table.cut.sets);
        let to = from.saturating_add(sets).min(self.table.cut.sets);
        walk.next = to;
        self.add_counters(&mut walk.stats, from..to);
        if let Some((scan, refused, admitted)) = &mut walk.keys {
            self.scan_sets(from..to, now_ms, scan, refused, admitted);
        }
        Ok(to == self.table.cut.sets)
    }

    /// Adds the live keys of sets `sets` at `now_ms` to `scan` and offers them to the top lists.
    fn scan_sets(
        &self,
        sets: core::ops::Range<usize>,
        now_ms: i64,
        scan: &mut Scan,
        refused: &mut Top,
        admitted: &mut Top,
    ) {
        let limits = self.limits();
        for set in self.table.walk(sets, self, |_| true) {
            for way in self.table.held(&set) {
                let states = self.state(&set, way);
                let near = nearest(self.windows(|w| states.used(w, now_ms), &limits));
                if near.count == 0 {
                    continue; // every window empty: idle
                }
                let times = set.get(self.refused_at(way));
                let hitter = || {
                    let key = self.table.codec.stored(self.table.stored_key(&set, way))?;
                    Some(HeavyHitter {
                        key,
                        usage: near,
                        refused: times,
                    })
                };
                if times > 0 {
                    refused.offer(Rank(times, near), hitter);
                }
                admitted.offer(Rank(0, near), hitter);
                scan.live += 1;
                scan.at_limit += u64::from(near.count >= near.limit);
                scan.usage_sum += near.count as f64 / near.limit as f64;
                for (bucket, &bound) in scan.usage.iter_mut().zip(&USAGE_BOUNDS) {
                    *bucket += u64::from(near.within(bound));
                }
            }
        }
    }

    /// `key`'s windows at `now_ms` as the next call of `cost` finds them under the live
    /// limits, read under one lock: the decision is what that call gets if nothing comes
    /// between.
    pub fn window_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<KeyWindow, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let limits = self.limits();
        let found = {
            let at = self.table.seek(key, self);
            let set = &at.set;
            at.way.map(|way| {
                let mut states = self.state(set, way);
                let windows = {
                    let states = self.state(set, way);
                    self.windows(|w| states.used(w, now_ms), &limits).collect()
                };
                let decision = crate::assessment::fold(&mut states, &limits, now_ms, cost, false);
                let refused = set.get(self.refused_at(way));
                KeyWindow {
                    decision,
                    windows,
                    refused,
                }
            })
        };
        match found {
            Some(window) => Ok(window),
            // Not held: empty windows (the peek stores nothing).
            None => Ok(KeyWindow {
                decision: self.peek_at(key, now_ms, cost)?,
                windows: self.windows(|_| 0, &limits).collect(),
                refused: 0,
            }),
        }
    }

    /// Every window of the rule with the cost `used` tells, against `limits`.
    fn windows<'a>(
        &self,
        used: impl Fn(usize) -> u64 + 'a,
        limits: &'a [u64],
    ) -> impl Iterator<Item = Usage> + 'a {
        let usage = move |window| Usage {
            window,
            count: used(window),
            limit: limits[window],
        };
        (0..self.rule.windows().len()).map(usage)
    }
}
