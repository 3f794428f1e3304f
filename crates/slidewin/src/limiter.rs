//! The one trait every rate limiter implements.
//!
//! A limiter is split into a validated `Config` (shared by every key) and a compact per-key
//! `State`. The algorithm is written once, as associated functions over `(config, state)`;
//! the single-key limiters ([`crate::SlidingLog`] and friends) and the keyed store
//! ([`crate::Keyed`]) both call those functions, so no algorithm exists twice.

use crate::reservation::Amend;
use crate::{Clock, Decision, Error};

/// A sliding-window rate limiter.
pub trait Limiter {
    /// Validated configuration (limit, window, ...), shared by every key of a keyed store.
    type Config: Clone;
    /// Per-key state: what the window has recorded.
    type State;

    /// An empty state for `config`.
    fn new_state(config: &Self::Config) -> Self::State;

    /// Decide whether `cost` fits at `now_ms`; record it when it fits and `commit` is true.
    fn decide(
        config: &Self::Config,
        state: &mut Self::State,
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error>;

    /// At `now_ms`, change what was recorded at `stamp_ms` (`None`: the newest time recorded
    /// at; a request that was admitted but not served). A give-back takes cost recorded at the
    /// stamp or before it, the newest first, and no more than the window still holds: what a
    /// call recorded at `stamp_ms` leaves the window as if never recorded, so later calls are
    /// counted as they were. A debt is recorded at the stamp, fitting or not
    /// ([`crate::reservation`]).
    fn amend(
        config: &Self::Config,
        state: &mut Self::State,
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error>;

    /// Whether the window holds nothing at `now_ms`, so the state may be dropped.
    fn is_idle(config: &Self::Config, state: &Self::State, now_ms: i64) -> bool;

    /// Heap bytes the state owns beyond its own size (for memory estimates).
    fn heap_bytes(state: &Self::State) -> usize;

    /// A single-key limiter from a config.
    fn from_config(config: Self::Config) -> Self
    where
        Self: Sized;

    /// The limiter's config.
    fn config(&self) -> &Self::Config;

    /// The config and the state, for the provided methods.
    fn parts_mut(&mut self) -> (&Self::Config, &mut Self::State);

    /// Decide and, when allowed, record `cost` at `now_ms`.
    fn check_at(&mut self, now_ms: i64, cost: u64) -> Result<Decision, Error> {
        let (config, state) = self.parts_mut();
        Self::decide(config, state, now_ms, cost, true)
    }

    /// Decide without recording anything.
    fn peek_at(&mut self, now_ms: i64, cost: u64) -> Result<Decision, Error> {
        let (config, state) = self.parts_mut();
        Self::decide(config, state, now_ms, cost, false)
    }

    /// Refund `cost` recorded earlier, the newest first.
    fn uncommit_at(&mut self, now_ms: i64, cost: u64) -> Result<(), Error> {
        let (config, state) = self.parts_mut();
        Self::amend(config, state, now_ms, None, Amend::GiveBack(cost))
    }

    /// At `now_ms`, change what a call recorded at `stamp_ms` (a reservation settled,
    /// [`crate::reservation`]).
    fn amend_at(&mut self, now_ms: i64, stamp_ms: i64, amend: Amend) -> Result<(), Error> {
        let (config, state) = self.parts_mut();
        Self::amend(config, state, now_ms, Some(stamp_ms), amend)
    }

    /// Forget everything recorded.
    fn reset(&mut self) {
        let (config, state) = self.parts_mut();
        *state = Self::new_state(config);
    }

    /// [`Limiter::check_at`] with the time read from `clock`.
    fn check(&mut self, clock: &impl Clock, cost: u64) -> Result<Decision, Error> {
        self.check_at(clock.now_ms(), cost)
    }

    /// [`Limiter::peek_at`] with the time read from `clock`.
    fn peek(&mut self, clock: &impl Clock, cost: u64) -> Result<Decision, Error> {
        self.peek_at(clock.now_ms(), cost)
    }

    /// [`Limiter::uncommit_at`] with the time read from `clock`.
    fn uncommit(&mut self, clock: &impl Clock, cost: u64) -> Result<(), Error> {
        self.uncommit_at(clock.now_ms(), cost)
    }
}
