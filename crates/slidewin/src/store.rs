//! The store seam: a rule's decisions over keys, wherever the keys live. A host (the Lua
//! module, a server) holds one `Box<dyn Store>` per limiter and asks it the same questions
//! whether the keys are in this process ([`LocalRule`]), in a region of shared memory
//! ([`Zone`]) or in a rule of a directory of runtime rules ([`DirectoryRule`]).
//!
//! Every answer is computed here, by the rule over the key's state; a store only says where
//! that state is and how a process finds it.
//!
//! ```
//! use core::sync::atomic::AtomicU64;
//! use slidewin::reservation::Amend;
//! use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
//! use slidewin::shared::LiveLimits;
//! use slidewin::store::{LocalRule, Store};
//! use slidewin::{Call, Keyed, Quota};
//!
//! let rule = Rule::one(RuleWindow::log(Quota::new(2, 1_000)?).with_max_limit(5)?);
//! let words: Vec<AtomicU64> = (0..LiveLimits::<Vec<AtomicU64>>::WORDS)
//!     .map(|_| AtomicU64::new(0))
//!     .collect(); // in a host: shared memory, so every process sees one set of limits
//! let keyed = Keyed::<RuleLimiter, Vec<u8>>::new(rule.clone(), 100)?;
//! let live = LiveLimits::attach(words, &rule);
//! let mut store: Box<dyn Store> = Box::new(LocalRule::new(keyed, live));
//! assert!(store.decide(b"alice", 0, 1, Call::Check, None)?.allowed);
//! assert!(store.decide(b"alice", 1, 1, Call::Check, None)?.allowed);
//! assert!(!store.decide(b"alice", 2, 1, Call::Check, None)?.allowed);
//! let version = store.version();
//! store.set_limit(0, 3)?; // a live limit: the version moves, so derived headers are rebuilt
//! assert_ne!(store.version(), version);
//! assert_eq!(store.decide(b"alice", 3, 1, Call::Check, None)?.remaining, 0);
//! store.amend(b"alice", 4, None, Amend::GiveBack(1))?; // the newest unit
//! assert_eq!(store.key_window(b"alice", 5, 1)?.windows[0].count, 2);
//! assert_eq!(store.stats().keys, 1);
//! # Ok::<(), slidewin::Error>(())
//! ```

mod directory;
mod local;

pub use directory::DirectoryRule;
pub use local::LocalRule;

use alloc::vec;
use core::sync::atomic::AtomicU64;

use crate::reservation::{Amend, Excess, Reservation};
use crate::rule::{Limits, Rule};
use crate::shared::{KeyWindow, Owner, Usage, Walk, Zone, ZoneStats};
use crate::{Call, Decision, Error};

/// Sets a walk takes between two looks at the clock ([`Store::walk_for`]): tens of
/// microseconds.
pub const WALK_SLICE_SETS: usize = 16;

/// A rule's decisions over keys. Keys are byte strings; times are `now_ms` of one clock.
pub trait Store {
    /// Decide `cost` for `key` at `now_ms` under a caller's `limits` (checked against the
    /// rule: one per window, each up to its `max_limit`), or the live limits; record it when
    /// it fits and `call` commits, a refusal counted as `call` says ([`ZoneStats::rejected`]
    /// or [`ZoneStats::would_reject`]).
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error>;
    /// Changes what `key` recorded at `stamp_ms` (`None`: the newest recorded, for a request
    /// admitted but not served; a reservation settled: its stamp), as [`crate::Limiter::amend`].
    fn amend(
        &mut self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error>;
    /// Reserves `units` for `key` at `now_ms` under `limits` (as [`Store::decide`] checks):
    /// the decision and, when admitted, the [`Reservation`] to settle once the call's cost is
    /// known.
    fn reserve(
        &mut self,
        key: &[u8],
        now_ms: i64,
        units: u64,
        limits: Option<&[u64]>,
    ) -> Result<(Decision, Option<Reservation>), Error> {
        let d = self.decide(key, now_ms, units, Call::Check, limits)?;
        let stamp_ms = now_ms;
        Ok((d, d.allowed.then_some(Reservation { stamp_ms, units })))
    }
    /// Settles `reservation` of `key` at `now_ms` for the `actual` units the call used: what
    /// it did not use is given back at the reservation's stamp, and what it used above it is
    /// as `excess` says ([`crate::reservation`]).
    fn settle(
        &mut self,
        key: &[u8],
        now_ms: i64,
        reservation: &Reservation,
        (actual, excess): (u64, Excess),
    ) -> Result<(), Error> {
        match reservation.settle(actual, excess)? {
            None => Ok(()),
            Some(amend) => self.amend(key, now_ms, Some(reservation.stamp_ms), amend),
        }
    }
    /// Forgets `key`.
    fn reset(&mut self, key: &[u8]);
    /// The store's counters.
    fn stats(&self) -> ZoneStats;
    /// Keys evicted with units in their windows so far ([`ZoneStats::evictions`]), where a
    /// store can tell it cheaply enough to ask often.
    fn evictions(&self) -> u64 {
        self.stats().evictions
    }
    /// The rule decided with (its windows; their live limits are [`Store::limits`]).
    fn rule(&self) -> &Rule;
    /// The live limits.
    fn limits(&self) -> Limits;
    /// Sets window `window`'s live limit (0-based).
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error>;
    /// Moves to the rule in force when it can be replaced while the store lives (a
    /// directory's rule put again with other windows); decisions do it themselves.
    fn follow(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Changes whenever the rule decided with or one of its live limits does: what is derived
    /// from them (a header) is rebuilt when it moves.
    fn version(&self) -> u64;
    /// Walks up to `sets` more sets of `walk` (the heaviest keys, the window usage and the
    /// counters) in a store that can list its keys (a region), else `None`: true once over.
    fn walk_step(
        &self,
        _walk: &mut Walk,
        _now_ms: i64,
        _sets: usize,
    ) -> Option<Result<bool, Error>> {
        None
    }
    /// Walks `walk` on at `now_ms` for about `budget`, [`WALK_SLICE_SETS`] sets at a time (one
    /// slice at least): what [`Store::walk_step`] answered last. A host that serves others on
    /// its thread (an nginx worker) serves them between two calls.
    #[cfg(feature = "std")]
    fn walk_for(
        &self,
        walk: &mut Walk,
        now_ms: i64,
        budget: core::time::Duration,
    ) -> Option<Result<bool, Error>> {
        let started = std::time::Instant::now();
        loop {
            match self.walk_step(walk, now_ms, WALK_SLICE_SETS) {
                Some(Ok(false)) if started.elapsed() < budget => continue,
                over => return over,
            }
        }
    }
    /// Whether [`KeyWindow::refused`] is counted (per key, in a region) or always 0.
    fn counts_refusals(&self) -> bool {
        false
    }
    /// `key`'s windows as the next call of `cost` finds them, recording nothing. This default
    /// knows only the decision's window: its count is what the peek found used.
    fn key_window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<KeyWindow, Error> {
        let d = self.decide(key, now_ms, cost, Call::Peek, None)?;
        let usage = Usage {
            window: d.window,
            count: d.used(cost),
            limit: d.limit,
        };
        Ok(KeyWindow {
            decision: d,
            windows: vec![usage],
            refused: 0,
        })
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Store for Zone<R, O> {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        let limits = match limits {
            Some(limits) => self.rule().check_limits(limits)?,
            None => Zone::limits(self),
        };
        self.decide_at(key, now_ms, cost, call, &limits)
    }
    fn amend(
        &mut self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        self.amend_at(key, now_ms, stamp_ms, amend)
    }
    fn reset(&mut self, key: &[u8]) {
        Zone::reset(self, key);
    }
    fn stats(&self) -> ZoneStats {
        Zone::stats(self)
    }
    fn evictions(&self) -> u64 {
        Zone::evictions(self)
    }
    fn rule(&self) -> &Rule {
        Zone::rule(self)
    }
    fn limits(&self) -> Limits {
        Zone::limits(self)
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        Zone::set_limit(self, window, limit)
    }
    fn version(&self) -> u64 {
        Zone::limits_version(self)
    }
    fn walk_step(&self, walk: &mut Walk, now_ms: i64, sets: usize) -> Option<Result<bool, Error>> {
        Some(Zone::walk_step(self, walk, now_ms, sets))
    }
    fn counts_refusals(&self) -> bool {
        true
    }
    fn key_window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<KeyWindow, Error> {
        self.window_at(key, now_ms, cost)
    }
}
