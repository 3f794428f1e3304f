//! What the limiters share: checking the time, holding it when the clock steps back, and turning
//! "how much cost the window holds" into a [`Decision`]. Each limiter's state only says how it
//! counts, records and expires cost ([`Window`]); the rules of a call live here, once.

use crate::assessment::Assessment;
use crate::clock::check_time;
use crate::reservation::Amend;
use crate::{Decision, Error};

/// The `newest_ms` of a state that has seen no call yet: earlier than every valid time.
pub(crate) const NEVER: i64 = i64::MIN;

/// How a limiter's per-key state counts cost. Every question is asked at the state's
/// `newest_ms`, which only [`Window::advance`] moves, and only forward.
pub(crate) trait Window: Sized {
    /// The validated config the state is read with.
    type Config;

    /// Cost admitted per window.
    fn limit(config: &Self::Config) -> u64;
    /// The newest time the state has been called at, or [`NEVER`].
    fn newest_ms(&self) -> i64;
    /// Move to `now_ms` (later than `newest_ms`), forgetting what expired.
    fn advance(&mut self, config: &Self::Config, now_ms: i64);
    /// Cost counted in the window now.
    fn used(&self, config: &Self::Config) -> u64;
    /// Record `cost` (positive, fitting the limit) now.
    fn record(&mut self, config: &Self::Config, cost: u64);
    /// Give back up to `cost` recorded at `stamp_ms` or before it (at most `newest_ms`),
    /// newest first: the units a call recorded at `stamp_ms` leave as if never recorded, and
    /// when they are gone already, older ones go (the window then counts more than the
    /// truth until they would have left: never less).
    fn unrecord_at(&mut self, config: &Self::Config, stamp_ms: i64, cost: u64);
    /// Record `cost` (positive, keeping the window within twice its limit) as recorded at
    /// `stamp_ms` (at most `newest_ms`), fitting or not: nothing when the stamp left the
    /// window, and where the state cannot tell the stamp from a later time, the later one
    /// (the cost then leaves late: never early).
    fn owe_at(&mut self, config: &Self::Config, stamp_ms: i64, cost: u64);
    /// Milliseconds until the window counts at most `at_most` (less than it counts now),
    /// if nothing else arrives.
    fn wait_ms(&self, config: &Self::Config, at_most: u64) -> u64;
    /// Milliseconds until the window counts nothing.
    fn reset_after_ms(&self, config: &Self::Config) -> u64;
    /// Heap bytes the state owns.
    fn heap_bytes(&self) -> usize;
}

/// A state made on the heap: one that holds nothing. (A state in shared memory is emptied in
/// place instead, by `shared::Slot`.)
pub(crate) trait Fresh: Window {
    /// A state that holds nothing.
    fn empty(config: &Self::Config) -> Self;
}

/// Validate `now_ms` and move `state` to it; a clock that stepped back reads as the newest time
/// seen, so what the window holds is never forgotten early.
#[inline]
fn advance<W: Window>(config: &W::Config, state: &mut W, now_ms: i64) -> Result<(), Error> {
    advance_checked(config, state, check_time("now_ms", now_ms)?);
    Ok(())
}

/// [`advance`] for a time already checked.
#[inline]
fn advance_checked<W: Window>(config: &W::Config, state: &mut W, now_ms: i64) {
    // Same millisecond (most calls under load): nothing can have expired.
    if now_ms > state.newest_ms() {
        state.advance(config, now_ms);
    }
}

/// Move `state` to `now_ms` (already checked) and tell whether `cost` fits under `limit`;
/// record it when it fits and `record_if_fits` (a window alone, [`decide_alone`]: its answer
/// is the call's). Recording here, before the wait of a refusal is looked for, keeps the call
/// short: asked after, the state is read again.
// Always inlined: with two callers (a window alone, the fold of several), the fold's loop
// would otherwise call it out of line, ~50 instructions more for a rule of two windows.
#[inline(always)]
pub(crate) fn assess<W: Window>(
    config: &W::Config,
    state: &mut W,
    now_ms: i64,
    cost: u64,
    limit: u64,
    record_if_fits: bool,
) -> Assessment {
    advance_checked(config, state, now_ms);
    let room = limit.saturating_sub(state.used(config));
    let allowed = cost <= room;
    if allowed && record_if_fits {
        record(config, state, cost);
    }
    let retry_after_ms = match (allowed, limit.checked_sub(cost)) {
        (true, _) => Some(0),
        (false, None) => None,
        (false, Some(at_most)) => Some(state.wait_ms(config, at_most)),
    };
    Assessment {
        allowed,
        room,
        retry_after_ms,
    }
}

/// Move `state` to `now_ms` (already checked) and tell the cost it counts then.
pub(crate) fn used_at<W: Window>(config: &W::Config, state: &mut W, now_ms: i64) -> u64 {
    advance_checked(config, state, now_ms);
    state.used(config)
}

/// Record `cost` in a window [`assess`] found room in.
#[inline]
pub(crate) fn record<W: Window>(config: &W::Config, state: &mut W, cost: u64) {
    if cost > 0 {
        state.record(config, cost);
    }
}

/// [`crate::Limiter::decide`] for every limiter: the one-window case of
/// [`crate::assessment::fold`], without the bookkeeping of several windows.
#[inline]
pub(crate) fn decide<W: Window>(
    config: &W::Config,
    state: &mut W,
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Result<Decision, Error> {
    let now_ms = check_time("now_ms", now_ms)?;
    Ok(decide_alone(
        config,
        state,
        now_ms,
        cost,
        W::limit(config),
        commit,
    ))
}

/// The decision of a window alone under `limit` (`now_ms` checked): it records as it assesses,
/// and answers with its reset read from the same state. A limiter, and a rule of one window
/// on the heap or in shared memory, all decide through here.
#[inline]
pub(crate) fn decide_alone<W: Window>(
    config: &W::Config,
    state: &mut W,
    now_ms: i64,
    cost: u64,
    limit: u64,
    commit: bool,
) -> Decision {
    let found = assess(config, state, now_ms, cost, limit, commit);
    found.decision(cost, limit, state.reset_after_ms(config), 0)
}

/// [`crate::Limiter::amend`] for every limiter: moves to `now_ms`, then changes what was
/// recorded at `stamp_ms` (`None`: the newest time seen, which a clock that stepped back
/// leaves after `now_ms`). A debt is cut so the window counts at most twice `max_limit` (the
/// highest limit it may have).
pub(crate) fn amend<W: Window>(
    config: &W::Config,
    state: &mut W,
    (now_ms, stamp_ms): (i64, Option<i64>),
    amend: Amend,
    max_limit: u64,
) -> Result<(), Error> {
    let stamp_ms = stamp_ms.map(|ms| check_time("stamp_ms", ms)).transpose()?;
    advance(config, state, now_ms)?;
    let newest_ms = state.newest_ms();
    let stamp_ms = stamp_ms.map_or(newest_ms, |ms| ms.min(newest_ms));
    match amend {
        Amend::GiveBack(cost) => state.unrecord_at(config, stamp_ms, cost),
        Amend::Owe(cost) => {
            let most = max_limit.saturating_mul(2);
            let cost = cost.min(most.saturating_sub(state.used(config)));
            if cost > 0 {
                state.owe_at(config, stamp_ms, cost);
            }
        }
    }
    Ok(())
}

/// [`crate::Limiter::is_idle`] for every limiter.
pub(crate) fn is_idle<W: Window>(config: &W::Config, state: &W, now_ms: i64) -> bool {
    idle_in_ms(config, state, now_ms) == 0
}

/// Milliseconds from `now_ms` until `state` holds nothing, if nothing else arrives.
pub(crate) fn idle_in_ms<W: Window>(config: &W::Config, state: &W, now_ms: i64) -> u64 {
    let reset_after_ms = state.reset_after_ms(config);
    // A non-empty state has a real `newest_ms`, so the subtraction only saturates on bad input.
    let since = now_ms.saturating_sub(state.newest_ms()).max(0) as u64;
    reset_after_ms.saturating_sub(since)
}

/// `newest_ms` read from a snapshot: [`NEVER`] or a valid time.
#[cfg(feature = "serde")]
pub(crate) fn check_newest(newest_ms: i64) -> Result<i64, Error> {
    if newest_ms == NEVER {
        Ok(NEVER)
    } else {
        check_time("newest_ms", newest_ms)
    }
}

/// Defines a single-key limiter `$name`: one config and one state, with [`crate::Limiter`]
/// answered by this module's functions over the state's [`Window`].
macro_rules! single_key_limiter {
    ($(#[$attr:meta])* $name:ident($config:ty, $state:ty)) => {
        $(#[$attr])*
        #[derive(Debug, Clone)]
        pub struct $name {
            config: $config,
            state: $state,
        }

        impl $crate::Limiter for $name {
            type Config = $config;
            type State = $state;

            #[inline]
            fn new_state(config: &$config) -> $state {
                $crate::window::Fresh::empty(config)
            }

            #[inline]
            fn decide(
                config: &$config,
                state: &mut $state,
                now_ms: i64,
                cost: u64,
                commit: bool,
            ) -> Result<$crate::Decision, $crate::Error> {
                $crate::window::decide(config, state, now_ms, cost, commit)
            }

            #[inline]
            fn amend(
                config: &$config,
                state: &mut $state,
                now_ms: i64,
                stamp_ms: Option<i64>,
                amend: $crate::reservation::Amend,
            ) -> Result<(), $crate::Error> {
                let max_limit = <$state as $crate::window::Window>::limit(config);
                $crate::window::amend(config, state, (now_ms, stamp_ms), amend, max_limit)
            }

            #[inline]
            fn is_idle(config: &$config, state: &$state, now_ms: i64) -> bool {
                $crate::window::is_idle(config, state, now_ms)
            }

            fn heap_bytes(state: &$state) -> usize {
                $crate::window::Window::heap_bytes(state)
            }

            fn from_config(config: $config) -> Self {
                let state = Self::new_state(&config);
                Self { config, state }
            }

            fn config(&self) -> &$config {
                &self.config
            }

            fn parts_mut(&mut self) -> (&$config, &mut $state) {
                (&self.config, &mut self.state)
            }
        }

        impl $name {
            /// The recorded state (a snapshot with the `serde` feature).
            pub fn state(&self) -> &$state {
                &self.state
            }
        }
    };
}
pub(crate) use single_key_limiter;

/// Serde for the heap form of a generic state (`$state` with its default storage) through its
/// unvalidated `$raw` form, so a snapshot read back is checked like a new state.
#[cfg(feature = "serde")]
macro_rules! serde_via_raw {
    ($state:ty, $raw:ty) => {
        impl serde::Serialize for $state {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&<$raw>::from(self.clone()), serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $state {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let raw: $raw = serde::Deserialize::deserialize(deserializer)?;
                Self::try_from(raw).map_err(serde::de::Error::custom)
            }
        }
    };
}
#[cfg(feature = "serde")]
pub(crate) use serde_via_raw;
