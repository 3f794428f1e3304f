//! A rule: one to [`MAX_WINDOWS`] windows ("10 per second and 1,000 per hour") decided as one
//! step. A call is admitted only when every window admits it; a refusal records nothing in any
//! window, so a request refused by the hour window costs nothing in the second window.
//!
//! Each window has its own algorithm and limit, and a `max_limit` the limit may be raised to
//! later (a shared region is sized for it). Limits are given per call
//! ([`Limits`]): the configured ones, limits changed while running, or a caller's plan.
//!
//! The [`crate::Decision`] of a rule describes one window (`window`): when refused, the
//! refusing window with the longest wait (its `retry_after_ms` is then the wait until every
//! window admits the call); when admitted, the window with the least remaining. `remaining`
//! is the least over all windows. A one-window rule decides exactly as its limiter alone.
//!
//! ```
//! use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
//! use slidewin::{Limiter, Quota};
//!
//! let rule = Rule::new([
//!     RuleWindow::log(Quota::new(2, 1_000)?),   // 2 per second
//!     RuleWindow::log(Quota::new(3, 10_000)?),  // and 3 per 10 seconds
//! ])?;
//! let mut limiter = RuleLimiter::from_config(rule);
//! assert!(limiter.check_at(0, 1)?.allowed);
//! assert!(limiter.check_at(1, 1)?.allowed);
//! let refused = limiter.check_at(2, 1)?; // the second is full
//! assert_eq!((refused.window, refused.retry_after_ms), (0, Some(998)));
//! assert!(limiter.check_at(1_000, 1)?.allowed);
//! let refused = limiter.check_at(2_000, 1)?; // now the 10 seconds are
//! assert_eq!((refused.window, refused.retry_after_ms), (1, Some(8_000)));
//! # Ok::<(), slidewin::Error>(())
//! ```

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::assessment::{fold, Assessment, States};
use crate::clock::check_time;
use crate::reservation::Amend;
use crate::window::{self, Fresh, Window};
use crate::Value;
use crate::{BucketQuota, BucketState, CounterState, Decision, Error, Limiter, LogState, Quota};
#[cfg(doc)]
use crate::{BucketWindow, SlidingCounter, SlidingLog};

/// The most windows one rule has.
pub const MAX_WINDOWS: usize = 8;

/// One window's algorithm and configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowConfig {
    /// An exact sliding log ([`SlidingLog`]).
    Log(Quota),
    /// A bucketed window ([`BucketWindow`]).
    Buckets(BucketQuota),
    /// A sliding-window counter ([`SlidingCounter`]).
    Counter(Quota),
}

/// A window of a rule: its algorithm and limit, and the most its limit may become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleWindow {
    config: WindowConfig,
    max_limit: u64,
}

impl RuleWindow {
    /// An exact log window; `max_limit` is the quota's limit until [`RuleWindow::with_max_limit`].
    pub const fn log(quota: Quota) -> Self {
        Self::of(WindowConfig::Log(quota))
    }

    /// A bucketed window.
    pub const fn buckets(config: BucketQuota) -> Self {
        Self::of(WindowConfig::Buckets(config))
    }

    /// A sliding-counter window.
    pub const fn counter(quota: Quota) -> Self {
        Self::of(WindowConfig::Counter(quota))
    }

    /// A window of `config` whose limit can be raised up to its own.
    pub const fn of(config: WindowConfig) -> Self {
        let limit = match config {
            WindowConfig::Log(q) | WindowConfig::Counter(q) => q.limit(),
            WindowConfig::Buckets(c) => c.limit(),
        };
        Self {
            config,
            max_limit: limit,
        }
    }

    /// The window with limits up to `max_limit` (at least its configured limit).
    pub fn with_max_limit(self, max_limit: u64) -> Result<Self, Error> {
        if max_limit < self.limit() {
            let got = Value::UInt(max_limit);
            return Err(Error::invalid(
                "max_limit",
                "at least the window's limit",
                got,
            ));
        }
        Ok(Self { max_limit, ..self })
    }

    /// The algorithm and configured limit.
    pub const fn config(&self) -> WindowConfig {
        self.config
    }

    /// The configured limit.
    pub const fn limit(&self) -> u64 {
        match self.config {
            WindowConfig::Log(q) | WindowConfig::Counter(q) => q.limit(),
            WindowConfig::Buckets(c) => c.limit(),
        }
    }

    /// The most the limit may be.
    pub const fn max_limit(&self) -> u64 {
        self.max_limit
    }

    /// The window's length.
    pub const fn window_ms(&self) -> i64 {
        match self.config {
            WindowConfig::Log(q) | WindowConfig::Counter(q) => q.window_ms(),
            WindowConfig::Buckets(c) => c.window_ms(),
        }
    }

    /// Whether `limit` is one this window takes: `1..=max_limit`.
    pub fn check_limit(&self, limit: u64) -> Result<u64, Error> {
        if limit == 0 || limit > self.max_limit {
            let got = Value::UInt(limit);
            return Err(Error::invalid(
                "limit",
                "a positive integer at most the window's max_limit",
                got,
            ));
        }
        Ok(limit)
    }
}

/// One limit per window of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    values: [u64; MAX_WINDOWS],
    len: usize,
}

impl Limits {
    /// Limits from words already checked against a rule (a region's live limits).
    pub(crate) fn from_fn(len: usize, limit: impl Fn(usize) -> u64) -> Self {
        let mut values = [0; MAX_WINDOWS];
        for (i, value) in values.iter_mut().enumerate().take(len) {
            *value = limit(i);
        }
        Self { values, len }
    }
}

impl core::ops::Deref for Limits {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.values[..self.len]
    }
}

/// One to [`MAX_WINDOWS`] windows decided together; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    windows: Vec<RuleWindow>,
}

impl Rule {
    /// A rule of `windows` (one to [`MAX_WINDOWS`]).
    pub fn new(windows: impl IntoIterator<Item = RuleWindow>) -> Result<Self, Error> {
        let windows: Vec<RuleWindow> = windows.into_iter().collect();
        if windows.is_empty() || windows.len() > MAX_WINDOWS {
            let got = Value::UInt(windows.len() as u64);
            return Err(Error::invalid("windows", "from 1 to 8 windows", got));
        }
        Ok(Self { windows })
    }

    /// A rule of one window.
    pub fn one(window: RuleWindow) -> Self {
        Self {
            windows: alloc::vec![window],
        }
    }

    /// The windows.
    pub fn windows(&self) -> &[RuleWindow] {
        &self.windows
    }

    /// The configured limits.
    pub fn limits(&self) -> Limits {
        Limits::from_fn(self.windows.len(), |i| self.windows[i].limit())
    }

    /// `limits` checked: one per window, each in `1..=max_limit`.
    pub fn check_limits(&self, limits: &[u64]) -> Result<Limits, Error> {
        if limits.len() != self.windows.len() {
            let got = Value::UInt(limits.len() as u64);
            return Err(Error::invalid(
                "limits",
                "one limit per window of the rule",
                got,
            ));
        }
        for (window, &limit) in self.windows.iter().zip(limits) {
            window.check_limit(limit)?;
        }
        Ok(Limits::from_fn(limits.len(), |i| limits[i]))
    }

    /// The index of window `window`, checked.
    pub fn check_window(&self, window: usize) -> Result<usize, Error> {
        if window >= self.windows.len() {
            let got = Value::UInt(window as u64);
            return Err(Error::invalid("window", "a window of the rule", got));
        }
        Ok(window)
    }

    /// Decide `cost` at `now_ms` under `limits` (from [`Rule::check_limits`] or
    /// [`Rule::limits`]); record it in every window when all admit it and `commit` is true.
    pub fn decide_with(
        &self,
        state: &mut RuleState,
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: &Limits,
    ) -> Result<Decision, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        // Limits made for another rule would leave windows unchecked, or index past them.
        let limits = self.check_limits(limits)?;
        Ok(fold(&mut Heap(self, state), &limits, now_ms, cost, commit))
    }
}

/// One window's state on the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    /// A [`SlidingLog`]'s.
    Log(LogState),
    /// A [`BucketWindow`]'s.
    Buckets(BucketState),
    /// A [`SlidingCounter`]'s.
    Counter(CounterState),
}

/// The states of one key's windows, in the rule's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    windows: Box<[WindowState]>,
}

impl RuleState {
    /// Each window's state.
    pub fn windows(&self) -> &[WindowState] {
        &self.windows
    }
}

/// Runs `$body` with window `$w`'s config as `$c` and its heap state as `$s`.
macro_rules! on_window {
    ($rule:expr, $states:expr, $w:expr, |$c:ident, $s:ident| $body:expr) => {
        match (&$rule.windows[$w].config, $states) {
            (WindowConfig::Log($c), WindowState::Log($s)) => $body,
            (WindowConfig::Buckets($c), WindowState::Buckets($s)) => $body,
            (WindowConfig::Counter($c), WindowState::Counter($s)) => $body,
            _ => unreachable!("a rule's states are made from its windows"),
        }
    };
}

/// A rule's heap states, for [`fold`].
struct Heap<'a>(&'a Rule, &'a mut RuleState);

impl States for Heap<'_> {
    #[inline]
    fn assess(&mut self, w: usize, now_ms: i64, cost: u64, limit: u64) -> Assessment {
        on_window!(self.0, &mut self.1.windows[w], w, |c, s| window::assess(
            c, s, now_ms, cost, limit, false
        ))
    }
    #[inline]
    fn record(&mut self, w: usize, cost: u64) {
        on_window!(self.0, &mut self.1.windows[w], w, |c, s| window::record(
            c, s, cost
        ))
    }
    #[inline]
    fn reset_after_ms(&self, w: usize) -> u64 {
        on_window!(self.0, &self.1.windows[w], w, |c, s| s.reset_after_ms(c))
    }
    #[inline]
    fn decide_alone(&mut self, now_ms: i64, cost: u64, limit: u64, commit: bool) -> Decision {
        on_window!(self.0, &mut self.1.windows[0], 0, |c, s| {
            window::decide_alone(c, s, now_ms, cost, limit, commit)
        })
    }
}

/// A rule over one key, in process: the [`Limiter`] whose config is a [`Rule`] (decided with
/// its configured limits; [`Rule::decide_with`] takes others).
#[derive(Debug, Clone)]
pub struct RuleLimiter {
    rule: Rule,
    state: RuleState,
}

impl Limiter for RuleLimiter {
    type Config = Rule;
    type State = RuleState;

    fn new_state(rule: &Rule) -> RuleState {
        let state = |w: &RuleWindow| match &w.config {
            WindowConfig::Log(q) => WindowState::Log(Fresh::empty(q)),
            WindowConfig::Buckets(c) => WindowState::Buckets(Fresh::empty(c)),
            WindowConfig::Counter(q) => WindowState::Counter(Fresh::empty(q)),
        };
        RuleState {
            windows: rule.windows.iter().map(state).collect(),
        }
    }

    fn decide(
        rule: &Rule,
        state: &mut RuleState,
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error> {
        rule.decide_with(state, now_ms, cost, commit, &rule.limits())
    }

    fn amend(
        rule: &Rule,
        state: &mut RuleState,
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        for (w, s) in state.windows.iter_mut().enumerate() {
            let max_limit = rule.windows()[w].max_limit();
            on_window!(rule, s, w, |c, s| window::amend(
                c,
                s,
                (now_ms, stamp_ms),
                amend,
                max_limit
            ))?;
        }
        Ok(())
    }

    fn is_idle(rule: &Rule, state: &RuleState, now_ms: i64) -> bool {
        let idle = |(w, s): (usize, &WindowState)| {
            on_window!(rule, s, w, |c, s| window::is_idle(c, s, now_ms))
        };
        state.windows.iter().enumerate().all(idle)
    }

    fn heap_bytes(state: &RuleState) -> usize {
        let own = state.windows.len() * core::mem::size_of::<WindowState>();
        let heap = |s: &WindowState| match s {
            WindowState::Log(s) => s.heap_bytes(),
            WindowState::Buckets(s) => s.heap_bytes(),
            WindowState::Counter(s) => s.heap_bytes(),
        };
        own + state.windows.iter().map(heap).sum::<usize>()
    }

    fn from_config(rule: Rule) -> Self {
        let state = Self::new_state(&rule);
        Self { rule, state }
    }

    fn config(&self) -> &Rule {
        &self.rule
    }

    fn parts_mut(&mut self) -> (&Rule, &mut RuleState) {
        (&self.rule, &mut self.state)
    }
}

impl RuleLimiter {
    /// The windows' states.
    pub fn state(&self) -> &RuleState {
        &self.state
    }
}
