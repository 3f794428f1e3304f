//! Leases: the node's half of deciding locally without ever going over a limit kept in Redis.
//!
//! Redis grants a node `n` units of a key's rule (every window at once) at Redis time `g`,
//! spendable until `g + V` (`V`: the call's validity). The node spends them on
//! requests with no call, and settles later: how many it spent, and when the last one was
//! spent, as an offset from the moment it *sent* the lease call. This module holds the node's
//! rules; [`crate::shared::Leases`] keeps them in shared memory for every worker of a node,
//! and the Redis script (`lua/redis/`) holds the other half.
//!
//! ## Why the node never makes a window go over
//!
//! Redis counts each outstanding lease's `n` units in every decision as if spent at `g + V`.
//! The node keeps two promises, and the bound follows from them:
//!
//! 1. **A unit is spent within `[g, g + V]`.** A lease is spent only once its grant arrived,
//!    so after `g`. Its clock is the node's monotonic clock read *before* the call was sent
//!    (`sent_ms`, earlier than `g`), and a unit is spent only while
//!    `now - sent_ms <= V - margin` ([`Lease::spend`]): by then less than `V` passed since
//!    `g`, with `margin` left for the two clocks' rates to differ.
//! 2. **A settlement never stamps a unit earlier than it was spent.** It says `last_ms`, the
//!    last spend's offset from `sent_ms`; Redis re-stamps the spent units at
//!    `g + min(last_ms, V)`, at or after `sent_ms + last_ms`, the real time of the last spend.
//!    Unspent units go back. A lease the node never saw granted (the call failed or timed
//!    out) is settled with 0 spent; one the node lost track of (its entry dropped) stays
//!    counted at `g + V` until Redis forgets it: later is always safe, only less efficient.
//!
//! So every spent unit sits in Redis's count at or after the moment it was spent, and before
//! it leaves a window. Take any window `(a - W, a]` and let `g*` be the latest grant whose
//! units were spent in it: each other unit spent in it is stamped after `a - W >= g* - W`, so
//! Redis counted it when it decided `g*`, and `g*` granted only what still fitted. A
//! per-request decision is a lease of `cost` spent at once, stamped at `g`; a check ahead
//! ([`LeaseConfig::ahead_ms`]) one stamped at `g + ahead`, spent only within
//! `ahead - margin` of the send.
//!
//! ## Sizing, ids and settlements
//!
//! - [`want`]: units to ask for, from the key's spend rate at the node (an exponentially
//!   weighted average, [`next_rate`]) over 1.5 validities, plus the cost of the request
//!   waiting, within `max(cost, 1)..=max_units`. A cold key (fewer than two units in that
//!   time) asks for its cost: one call per request, as without leases, a check ahead with
//!   nothing left to settle. Redis shrinks grants as its windows fill.
//! - [`lease_id`]: `"<node id, 16 hex digits>-<sequence>"`, unique per node; a retried call
//!   with the same id is answered the same grant.
//! - [`Settlement`]: `"ID:SPENT:LAST_MS"`, the words of the script's `settle` option.
//! - Validity: each call asks for its own `V` and Redis keeps it with the grant. It starts at
//!   [`LeaseConfig::validity_ms`]; a grant that comes back after `V - margin` cannot be spent,
//!   so the next calls ask for room for a round trip twice as long
//!   ([`LeaseConfig::raised_validity_ms`]), up to [`LeaseConfig::max_validity_ms`].
//!
//! ```
//! use slidewin::lease::{want, Lease, LeaseConfig, Spend};
//!
//! let config = LeaseConfig::new(100, None, 1_000)?; // V 100 ms, margin 10 ms
//! // A cold key asks for its cost; one spending 2 units a ms asks for 1.5 validities' worth.
//! assert_eq!(want(&config, 0.0, 1), 1);
//! assert_eq!(want(&config, 2.0, 1), 301);
//! // Sent at 1_000 (node clock), granted 3 units.
//! let mut lease = Lease::granted(7, 3, 1_000, config.validity_ms());
//! assert_eq!(lease.spend(&config, 1_005, 2), Spend::Spent);
//! assert_eq!(lease.spend(&config, 1_010, 2), Spend::Short); // 1 unit left
//! assert_eq!(lease.spend(&config, 1_091, 1), Spend::Ended); // past V - margin = 90 ms
//! assert_eq!(lease.settlement().text(0xab), "00000000000000ab-7:2:5");
//! # Ok::<(), slidewin::Error>(())
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

use crate::rule::Rule;
use crate::window_name::WindowNames;
use crate::window_spec::Algorithm;
use crate::{Error, Value};

/// Whether `rule`'s decisions can be leased: a lease's units are counted where they were
/// spent, which only an exact window ([`Algorithm::exact`]) does. The error names the first
/// window (as `names` names it) that cannot be.
///
/// ```
/// use slidewin::rule::{Rule, RuleWindow};
/// use slidewin::window_name::WindowNames;
/// use slidewin::Quota;
///
/// let rule = Rule::new(vec![RuleWindow::counter(Quota::new(10, 1_000)?)])?;
/// let names = WindowNames::new("api", [(Some("l".to_string()), 1_000)]).unwrap();
/// assert_eq!(
///     slidewin::lease::check_windows(&rule, &names).unwrap_err(),
///     "lease needs windows of algorithm \"log\" or \"buckets\"; window \"l\" is \"counter\" \
///      (an estimate, decided per request)"
/// );
/// let exact = Rule::new(vec![RuleWindow::log(Quota::new(10, 1_000)?)])?;
/// assert_eq!(slidewin::lease::check_windows(&exact, &names), Ok(()));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub fn check_windows(rule: &Rule, names: &WindowNames) -> Result<(), String> {
    let Some((i, window)) =
        (rule.windows().iter().enumerate()).find(|(_, w)| !w.algorithm().exact())
    else {
        return Ok(());
    };
    let exact: Vec<String> = (Algorithm::ALL.iter().filter(|a| a.exact()))
        .map(|a| alloc::format!("\"{}\"", a.name()))
        .collect();
    let (last, first) = exact.split_last().expect("an exact algorithm");
    let expected = match first {
        [] => last.clone(),
        _ => alloc::format!("{} or {last}", first.join(", ")),
    };
    Err(alloc::format!(
        "lease needs windows of algorithm {expected}; window \"{}\" is \"{}\" (an estimate, \
         decided per request)",
        names.name(i, window.window_ms()),
        window.algorithm().name()
    ))
}

/// The longest validity a lease can have (about 12 days), so node times never overflow.
pub const MAX_VALIDITY_MS: u64 = 1 << 30;
/// The most units one lease can ask for.
pub const MAX_UNITS: u64 = 1 << 32;
/// The most units one lease asks for unless configured: a hot key's lease is then at most
/// 1,000 requests' worth.
pub const DEFAULT_MAX_UNITS: u64 = 1_000;
/// Leases' worth of spend a request asks for: 1.5 validities, so the next lease arrives
/// (fetched at half) before this one runs out.
const WANT_VALIDITIES: f64 = 1.5;

/// A limiter's lease options: `validity_ms` (V), `margin_ms` (default `max(2, V / 10)`),
/// `max_units` (the most units one lease asks for), `max_validity_ms` (how far V is raised
/// when lease calls take longer than `V - margin`; default `4 V`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    validity_ms: u64,
    margin_ms: u64,
    max_units: u64,
    max_validity_ms: u64,
}

impl LeaseConfig {
    /// Errors name the option: `validity_ms` from 1 to 2^30, `margin_ms` below it,
    /// `max_units` from 1 to 2^32.
    pub fn new(validity_ms: u64, margin_ms: Option<u64>, max_units: u64) -> Result<Self, Error> {
        if !(1..=MAX_VALIDITY_MS).contains(&validity_ms) {
            let expected = "a positive integer at most 2^30";
            return Err(Error::invalid(
                "validity_ms",
                expected,
                Value::UInt(validity_ms),
            ));
        }
        let margin_ms = margin_ms.unwrap_or((validity_ms / 10).max(2));
        if margin_ms >= validity_ms {
            let expected = "below validity_ms (default max(2, validity_ms / 10))";
            return Err(Error::invalid(
                "margin_ms",
                expected,
                Value::UInt(margin_ms),
            ));
        }
        if !(1..=MAX_UNITS).contains(&max_units) {
            let expected = "a positive integer at most 2^32";
            return Err(Error::invalid(
                "max_units",
                expected,
                Value::UInt(max_units),
            ));
        }
        Ok(Self {
            validity_ms,
            margin_ms,
            max_units,
            max_validity_ms: validity_ms.saturating_mul(4).min(MAX_VALIDITY_MS),
        })
    }

    /// The same options with V raised no further than `max_validity_ms`: from `validity_ms`
    /// (no raise) to 2^30.
    pub fn with_max_validity_ms(mut self, max_validity_ms: u64) -> Result<Self, Error> {
        if !(self.validity_ms..=MAX_VALIDITY_MS).contains(&max_validity_ms) {
            let expected = "from validity_ms to 2^30";
            return Err(Error::invalid(
                "max_validity_ms",
                expected,
                Value::UInt(max_validity_ms),
            ));
        }
        self.max_validity_ms = max_validity_ms;
        Ok(self)
    }

    /// The most V is raised to.
    pub fn max_validity_ms(&self) -> u64 {
        self.max_validity_ms
    }

    /// The V of the next calls after one under `current` was answered `round_trip_ms` after it
    /// was sent: unchanged while the answer leaves time to spend, else room for a round trip
    /// twice as long (and at least half again `current`, so raises are few), at most
    /// [`LeaseConfig::max_validity_ms`].
    pub fn raised_validity_ms(&self, current: u64, round_trip_ms: u64) -> u64 {
        if round_trip_ms.saturating_add(self.margin_ms) <= current {
            return current;
        }
        let wanted = round_trip_ms
            .saturating_mul(2)
            .saturating_add(self.margin_ms)
            .max(current.saturating_add(current / 2));
        wanted.min(self.max_validity_ms).max(current)
    }

    /// V: how long Redis counts a lease's units as outstanding, from its grant.
    pub fn validity_ms(&self) -> u64 {
        self.validity_ms
    }

    /// What the node keeps back from V for the two clocks' rates.
    pub fn margin_ms(&self) -> u64 {
        self.margin_ms
    }

    /// The most units one lease asks for.
    pub fn max_units(&self) -> u64 {
        self.max_units
    }

    /// How long after its call was sent a lease is spent: `V - margin`.
    pub fn spend_ms(&self) -> i64 {
        self.spend_ms_under(self.validity_ms)
    }

    /// [`LeaseConfig::spend_ms`] for a call made under `validity_ms` (raised or not).
    pub fn spend_ms_under(&self, validity_ms: u64) -> i64 {
        validity_ms.saturating_sub(self.margin_ms) as i64
    }

    /// A check ahead's stamp, from Redis's now: `V / 2`, when more than the margin (else
    /// `None`: every call is a lease call). A call that wants its cost alone (a cold key) goes
    /// as a check ahead, a grant of its cost Redis records at once at this distance ahead,
    /// nothing to settle; half V keeps what it delays (units leave the windows that much
    /// later, and later stamps of the key join its bucket) to half a lease's.
    pub fn ahead_ms(&self) -> Option<u64> {
        let ahead = self.validity_ms / 2;
        (ahead > self.margin_ms).then_some(ahead)
    }

    /// The least time a check ahead's rate sample spans, once the key has a rate (its grant
    /// is one request's cost):
    /// `2 V / 3`. Requests that keep coming faster raise [`want`] above the cost after a few
    /// (the rate nears `1.5 / V`, `want`'s threshold `2 / (1.5 V)` is below it), while pairs
    /// of requests with long gaps between them (a page's burst) never do (the rate stays
    /// near two thirds of that): their next unit would go unspent, returned by a call more.
    pub fn sample_floor_ms(&self) -> i64 {
        (2 * self.validity_ms / 3) as i64
    }

    /// How long after its call was sent a check ahead's grant is spent: `ahead - margin`
    /// (promise 1 of the [module docs](self) with the stamp `g + ahead`).
    pub fn ahead_spend_ms(&self) -> i64 {
        self.ahead_ms()
            .map_or(-1, |ahead| (ahead - self.margin_ms) as i64)
    }
}

/// Units to ask for: `clamp(ahead + cost, max(cost, 1), max_units)` with `ahead =
/// ceil(rate * V * 1.5)`, or 0 when `rate * V * 1.5` is below 2; `rate` in units per ms
/// (negative or not finite: 0).
pub fn want(config: &LeaseConfig, rate_per_ms: f64, cost: u64) -> u64 {
    let rate = if rate_per_ms.is_finite() && rate_per_ms > 0.0 {
        rate_per_ms
    } else {
        0.0
    };
    let expected = rate * config.validity_ms as f64 * WANT_VALIDITIES;
    // A unit or so ahead saves at most the call that settles it when it goes unspent: a key
    // that spends fewer than two units in that time (a cold key) asks for its cost alone.
    let ahead = if expected < 2.0 {
        0
    } else {
        libm::ceil(expected) as u64 // saturates above u64::MAX
    };
    let wanted = ahead.saturating_add(cost);
    let floor = cost.max(1);
    wanted.clamp(floor, config.max_units.max(floor))
}

/// The spend rate after a lease spent `spent` units over `elapsed_ms`: half the old rate,
/// half the new (a lease's worth of history weighs as much as all before it).
pub fn next_rate(rate_per_ms: f64, spent: u64, elapsed_ms: i64) -> f64 {
    let sample = spent as f64 / elapsed_ms.max(1) as f64;
    let old = if rate_per_ms.is_finite() {
        rate_per_ms
    } else {
        0.0
    };
    (old + sample) / 2.0
}

/// A lease's id as the script takes it: `"<node id hex>-<sequence>"`.
pub fn lease_id(node_id: u64, seq: u64) -> LeaseId {
    LeaseId { node_id, seq }
}

/// See [`lease_id`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseId {
    node_id: u64,
    seq: u64,
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}-{}", self.node_id, self.seq)
    }
}

/// What a spend found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spend {
    /// The units were taken.
    Spent,
    /// Too few units left for this cost (the lease stays, smaller costs may fit).
    Short,
    /// Past `V - margin` since the call was sent, or no lease: never spent again.
    Ended,
}

/// A key's lease at the node: `seq` its id's sequence (0: none), `units` granted, `spent`,
/// `sent_ms` the node's monotonic time before the call was sent, `last_ms` the last spend's
/// offset from it, `validity_ms` the V its call asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lease {
    /// The sequence of the lease's id (0: no lease).
    pub seq: u64,
    /// Units granted.
    pub units: u64,
    /// Units spent.
    pub spent: u64,
    /// The node's monotonic ms before the lease call was sent.
    pub sent_ms: i64,
    /// The last spend, in ms after `sent_ms`.
    pub last_ms: u64,
    /// The V its call asked for (0: none, the configured V).
    pub validity_ms: u64,
}

impl Lease {
    /// A lease of `units` whose call, asking for `validity_ms`, was sent at `sent_ms`, nothing
    /// spent.
    pub fn granted(seq: u64, units: u64, sent_ms: i64, validity_ms: u64) -> Self {
        Self {
            seq,
            units,
            spent: 0,
            sent_ms,
            last_ms: 0,
            validity_ms,
        }
    }

    /// How long after its call was sent it is spent: its `V - margin`.
    pub fn spend_ms(&self, config: &LeaseConfig) -> i64 {
        match self.validity_ms {
            0 => config.spend_ms(),
            validity_ms => config.spend_ms_under(validity_ms),
        }
    }

    /// Whether it is still spent at `now_ms` (promise 1 of the [module docs](self)).
    pub fn is_live(&self, config: &LeaseConfig, now_ms: i64) -> bool {
        self.seq != 0 && now_ms.saturating_sub(self.sent_ms) <= self.spend_ms(config)
    }

    /// Takes `cost` units at `now_ms` when the lease is live and holds them.
    pub fn spend(&mut self, config: &LeaseConfig, now_ms: i64, cost: u64) -> Spend {
        if !self.is_live(config, now_ms) {
            return Spend::Ended;
        }
        if self.units - self.spent < cost {
            return Spend::Short;
        }
        self.spent += cost;
        // A clock read before sent_ms (another worker's earlier read) counts as sent_ms.
        self.last_ms = self
            .last_ms
            .max(now_ms.saturating_sub(self.sent_ms).max(0) as u64);
        Spend::Spent
    }

    /// Units not spent.
    pub fn unspent(&self) -> u64 {
        self.units - self.spent
    }

    /// Whether the next lease should be fetched now: half its units spent or half its
    /// spending time passed, while Redis had room for two more leases this size when it
    /// granted this one (`remote`). Redis grants a fetch ahead at most half the room, but at
    /// least one unit: nearer the limit it could take the last units away from the request
    /// that needs them, so the key is decided a call at a time, as without leases.
    pub fn wants_next(&self, config: &LeaseConfig, now_ms: i64, remote: u64) -> bool {
        let half = self.spent * 2 >= self.units
            || now_ms.saturating_sub(self.sent_ms) * 2 >= self.spend_ms(config);
        half && remote >= self.units.saturating_mul(2)
    }

    /// What Redis must be told once it ended.
    pub fn settlement(&self) -> Settlement {
        Settlement {
            seq: self.seq,
            spent: self.spent,
            last_ms: self.last_ms,
        }
    }
}

/// One ended lease for the script's `settle` option: SPENT units, the last spent LAST_MS
/// after the call was sent (a call that failed: 0 and 0, all given back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settlement {
    /// The sequence of the lease's id.
    pub seq: u64,
    /// Units spent.
    pub spent: u64,
    /// The last spend, in ms after the call was sent.
    pub last_ms: u64,
}

impl Settlement {
    /// `"ID:SPENT:LAST_MS"` for node `node_id`.
    pub fn text(&self, node_id: u64) -> alloc::string::String {
        let mut text = alloc::string::String::new();
        let _ = self.write(&mut text, node_id);
        text
    }

    /// Writes `"ID:SPENT:LAST_MS"` for node `node_id`.
    pub fn write(&self, out: &mut impl Write, node_id: u64) -> fmt::Result {
        let id = lease_id(node_id, self.seq);
        write!(out, "{id}:{}:{}", self.spent, self.last_ms)
    }
}

/// Redis's answer to a lease call, as the script replies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grant {
    /// Units granted (0: refused).
    pub granted: u64,
    /// The least room over the windows after the grant.
    pub remaining: u64,
    /// Refused: when the cost fits (`None`: never); granted: 0.
    pub retry_after_ms: Option<u64>,
    /// When the answer's window empties.
    pub reset_after_ms: u64,
    /// The window the answer describes (0-based).
    pub window: usize,
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig::new(100, None, 1_000).unwrap()
    }

    #[test]
    fn options_are_checked_by_name() {
        let err = |r: Result<LeaseConfig, Error>| r.unwrap_err().to_string();
        assert_eq!(
            err(LeaseConfig::new(0, None, 1)),
            "validity_ms must be a positive integer at most 2^30, got 0"
        );
        assert_eq!(
            err(LeaseConfig::new(2, None, 1)),
            "margin_ms must be below validity_ms (default max(2, validity_ms / 10)), got 2"
        );
        assert_eq!(
            err(LeaseConfig::new(100, Some(5), 0)),
            "max_units must be a positive integer at most 2^32, got 0"
        );
        let c = LeaseConfig::new(1_000, None, 5).unwrap();
        assert_eq!((c.margin_ms(), c.spend_ms()), (100, 900));
        assert_eq!(LeaseConfig::new(3, None, 1).unwrap().spend_ms(), 1);
        assert_eq!((c.ahead_ms(), c.ahead_spend_ms()), (Some(500), 400));
        assert_eq!(c.sample_floor_ms(), 666);
        let short = LeaseConfig::new(4, None, 1).unwrap();
        assert_eq!((short.ahead_ms(), short.ahead_spend_ms()), (None, -1));
    }

    #[test]
    fn want_follows_the_rate_within_its_bounds() {
        let c = config();
        assert_eq!(want(&c, 0.0, 0), 1, "a prefetch of a cold key asks for one");
        assert_eq!(want(&c, f64::NAN, 3), 3);
        assert_eq!(want(&c, -1.0, 3), 3);
        assert_eq!(want(&c, 0.02, 1), 4, "ceil(0.02 * 150) + 1");
        assert_eq!(want(&c, 0.0134, 1), 4, "ceil(2.01) + 1");
        assert_eq!(
            want(&c, 0.0133, 1),
            1,
            "a unit or so ahead is not worth its settle call"
        );
        assert_eq!(want(&c, 1e30, 1), 1_000, "max_units");
        let small = LeaseConfig::new(100, None, 2).unwrap();
        assert_eq!(want(&small, 1.0, 5), 5, "never below the cost");
    }

    #[test]
    fn checks_ahead_warm_a_steady_key_but_not_one_of_pairs() {
        let c = config();
        let floor = c.sample_floor_ms();
        let (mut steady, mut pairs) = (0.0, 0.0);
        for _ in 0..20 {
            steady = next_rate(steady, 1, floor.max(3));
            pairs = next_rate(next_rate(pairs, 1, floor.max(3)), 1, 1_000);
            pairs = next_rate(pairs, 1, floor);
        }
        assert!(want(&c, steady, 1) > 1, "{steady}");
        assert_eq!(want(&c, pairs, 1), 1, "{pairs}");
    }

    #[test]
    fn the_rate_weighs_the_last_lease_as_all_before() {
        assert_eq!(next_rate(0.0, 10, 10), 0.5);
        assert_eq!(next_rate(0.5, 0, 100), 0.25);
        assert_eq!(next_rate(f64::NAN, 4, 0), 2.0, "elapsed 0 counts as 1 ms");
    }

    #[test]
    fn a_lease_is_spent_only_until_v_minus_margin_after_its_send() {
        let c = config();
        let mut lease = Lease::granted(1, 10, 500, 100);
        assert_eq!(lease.spend(&c, 590, 1), Spend::Spent);
        assert_eq!(lease.spend(&c, 591, 1), Spend::Ended);
        assert_eq!(
            lease.settlement(),
            Settlement {
                seq: 1,
                spent: 1,
                last_ms: 90
            }
        );
        assert_eq!(Lease::default().spend(&c, 0, 0), Spend::Ended, "no lease");
    }

    #[test]
    fn a_lease_under_a_raised_validity_is_spent_until_its_own_v_minus_margin() {
        let c = config();
        let mut lease = Lease::granted(1, 10, 500, 250);
        assert_eq!(lease.spend(&c, 740, 1), Spend::Spent);
        assert_eq!(lease.spend(&c, 741, 1), Spend::Ended);
    }

    #[test]
    fn validity_is_raised_for_late_answers_only_and_within_its_ceiling() {
        let c = config();
        assert_eq!(c.max_validity_ms(), 400, "default 4 V");
        assert_eq!(
            c.raised_validity_ms(100, 90),
            100,
            "answered at V - margin: spendable"
        );
        assert_eq!(c.raised_validity_ms(100, 91), 192, "2 x 91 + margin 10");
        assert_eq!(c.raised_validity_ms(100, 95), 200, "2 x 95 + 10");
        assert_eq!(
            c.raised_validity_ms(200, 195),
            400,
            "2 x 195 + 10, at the ceiling"
        );
        assert_eq!(c.raised_validity_ms(100, 5_000), 400);
        assert_eq!(c.raised_validity_ms(150, 141), 292);
        let wide = LeaseConfig::new(100, Some(60), 1_000).unwrap();
        assert_eq!(wide.raised_validity_ms(100, 41), 150, "at least half again");
        let capped = c.with_max_validity_ms(100).unwrap();
        assert_eq!(capped.raised_validity_ms(100, 500), 100, "no raise");
        let err = c.with_max_validity_ms(99).unwrap_err().to_string();
        assert!(
            err.contains("max_validity_ms") && err.contains("99"),
            "{err}"
        );
    }

    #[test]
    fn last_ms_never_moves_back() {
        let c = config();
        let mut lease = Lease::granted(1, 10, 500, 100);
        assert_eq!(lease.spend(&c, 520, 1), Spend::Spent);
        assert_eq!(lease.spend(&c, 499, 1), Spend::Spent);
        assert_eq!(lease.last_ms, 20);
    }

    #[test]
    fn the_next_lease_is_wanted_at_half_units_or_half_time_with_room_for_it() {
        let c = config();
        let mut lease = Lease::granted(1, 10, 0, 100);
        assert!(!lease.wants_next(&c, 44, 20));
        assert!(lease.wants_next(&c, 45, 20));
        assert!(!lease.wants_next(&c, 45, 19), "near the limit");
        assert_eq!(lease.spend(&c, 1, 5), Spend::Spent);
        assert!(lease.wants_next(&c, 1, 20));
    }

    #[test]
    fn ids_and_settlements_read_as_the_script_takes_them() {
        assert_eq!(lease_id(0x1f, 42).to_string(), "000000000000001f-42");
        let s = Settlement {
            seq: 3,
            spent: 0,
            last_ms: 0,
        };
        assert_eq!(s.text(u64::MAX), "ffffffffffffffff-3:0:0");
    }
}
