//! A keyed [`Rule`] over one region of shared memory: [`Zone`].

use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::answers::ZoneStats;
use super::keys::Key;
use super::layout::{Layout, REFUSED_WORDS};
use super::limits::LiveLimits;
use super::lock::Owner;
use super::region::Attached;
use super::state;
use super::table::{Locked, Payload, Set, Table, Vacancy, WAYS};
use crate::clock::check_time;
use crate::reservation::Amend;
use crate::rule::{Limits, Rule, RuleLimiter};
use crate::{Call, Clock, Decision, Error, Limiter};

const MAGIC: u64 = u64::from_le_bytes(*b"slidewn3");
// Header words after the magic, fingerprint and seed (table.rs).
/// Keys evicted with units in their windows, over every set: one word that a host reads on
/// each call to notice a zone too small (written only when a key is evicted).
const H_EVICTIONS: usize = 4;
/// New keys refused because every way of their set held units ([`Full::Refuse`]).
const H_FULL_REFUSALS: usize = 5;
/// The live limits ([`LiveLimits`]).
const H_LIMITS: usize = 8;

// A set's counters after its lock (table.rs).
const S_ALLOWED: usize = 1;
const S_REJECTED: usize = 2;
const S_EVICTIONS: usize = 3;
const S_RECLAIMED: usize = 4;
const S_REPAIRS: usize = 5;
const S_KEYS: usize = 6;
const S_WOULD_REJECT: usize = 7;

/// What a zone does with a new key when every way of its set holds units (no empty or idle
/// one to take).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Full {
    /// Evict the least recently used key: the new key is decided, the evicted one's windows
    /// are forgotten (its next call starts afresh, so a zone too small admits more than the
    /// limit). What nginx's `limit_req` does.
    #[default]
    Evict,
    /// Refuse the new key until a way of its set empties: no window is forgotten, so no key
    /// is ever admitted past its limit, at the cost of refusing new keys while the zone is
    /// full.
    Refuse,
}

/// A keyed [`Rule`] over a shared region; see the [module docs](super).
pub struct Zone<R, O: Owner> {
    pub(super) table: Table<R, O>,
    pub(super) rule: Rule,
    pub(super) layout: Layout,
    pub(super) full: Full,
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Zone<R, O> {
    /// Bytes one key takes in a region (its share of a set), for sizing: a region of `size`
    /// bytes holds about `size / bytes_per_key` keys.
    pub fn bytes_per_key(rule: &Rule, max_key_bytes: usize) -> Result<usize, Error> {
        Layout::bytes_per_key(rule, max_key_bytes)
    }

    /// How many keys a region of `size_bytes` holds for `config`: an error naming `size`
    /// when not one set of keys fits, before any memory is mapped.
    pub fn capacity_for(
        rule: &Rule,
        max_key_bytes: usize,
        size_bytes: usize,
    ) -> Result<usize, Error> {
        Ok(Layout::new(rule, max_key_bytes, size_bytes / 8)?
            .cut
            .capacity())
    }

    /// The rule over `words`, for keys of up to `max_key_bytes` stored as they are.
    /// A region already laid out for the same layout is reused as it is (with its live
    /// limits, but for windows whose configured limit differs from the last attach); any other
    /// is laid out anew with `seed` (secret and random: it keys the hashes). Processes that
    /// attach at once with the same rule all find one layout (nginx attaches in the master,
    /// before the workers fork).
    pub fn attach(
        region: R,
        rule: Rule,
        max_key_bytes: usize,
        owner: O,
        seed: [u64; 2],
    ) -> Result<(Self, Attached), Error> {
        let region_words = region.as_ref().len();
        let layout = Layout::new(&rule, max_key_bytes, region_words)?;
        let fingerprint = layout.fingerprint(&rule, region_words);
        let (table, attached) =
            Table::attach(region, layout.cut, (MAGIC, fingerprint), seed, owner);
        let zone = Self {
            table,
            rule,
            layout,
            full: Full::Evict,
        };
        LiveLimits::attach(zone.live().words, &zone.rule);
        Ok((zone, attached))
    }

    /// The rule over `words` laid out already by an [`Zone::attach`] for the same rule, key
    /// length and size (another module of the process attached it): nothing is written
    /// when the layout differs, an error naming the region's fingerprint is.
    pub fn open(region: R, rule: Rule, max_key_bytes: usize, owner: O) -> Result<Self, Error> {
        let region_words = region.as_ref().len();
        let layout = Layout::new(&rule, max_key_bytes, region_words)?;
        let fingerprint = layout.fingerprint(&rule, region_words);
        let table =
            Table::open(region, layout.cut, (MAGIC, fingerprint), owner).map_err(|seen| {
                let expected = "the fingerprint of a region laid out for this rule and size";
                Error::invalid("region", expected, crate::Value::UInt(seen))
            })?;
        let zone = Self {
            table,
            rule,
            layout,
            full: Full::Evict,
        };
        LiveLimits::attach(zone.live().words, &zone.rule);
        Ok(zone)
    }

    /// This process's zone with `full` for new keys in a full set ([`Full::Evict`] unless
    /// set): every process of the region should say the same.
    pub fn with_full(self, full: Full) -> Self {
        Self { full, ..self }
    }

    /// Keys evicted with units in their windows so far, over the whole region: one word,
    /// cheap enough to read on every call to notice a zone too small.
    pub fn evictions(&self) -> u64 {
        self.table.header().get(H_EVICTIONS)
    }

    /// Keys the region holds at most.
    pub fn capacity(&self) -> usize {
        self.table.cut.capacity()
    }

    /// The rule (with its configured limits).
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The live limits, one per window: what every process decides with now.
    pub fn limits(&self) -> Limits {
        self.live().get(&self.rule)
    }

    /// Sets window `window`'s live limit (`1..=max_limit`) for every process of the region;
    /// the next decision of each uses it, and every key keeps its window.
    pub fn set_limit(&self, window: usize, limit: u64) -> Result<(), Error> {
        self.live().set(&self.rule, window, limit)
    }

    /// How many times a live limit changed ([`LiveLimits::version`]).
    pub fn limits_version(&self) -> u64 {
        self.live().version()
    }

    fn live(&self) -> LiveLimits<&[AtomicU64]> {
        LiveLimits {
            words: &self.table.header().words[H_LIMITS..H_LIMITS + LiveLimits::<R>::WORDS],
        }
    }

    /// Decide for `key` at `now_ms` under the live limits and record `cost` when it fits.
    pub fn check_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        self.decide_live(key, now_ms, cost, Call::Check)
    }

    /// [`Zone::check_at`] for a dry run, which lets a refused call through: the same decision
    /// and record, its refusal counted in [`ZoneStats::would_reject`] instead of `rejected`.
    pub fn check_dry_run_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        self.decide_live(key, now_ms, cost, Call::DryRun)
    }

    /// Decide for `key` without recording anything (an unknown key is not stored).
    pub fn peek_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        self.decide_live(key, now_ms, cost, Call::Peek)
    }

    /// [`Zone::decide_at`] under the live limits, which are not checked again: only
    /// [`LiveLimits`] writes them, each one checked against the rule (one atomic word, so no
    /// crash leaves one half written), and this is every request's path.
    fn decide_live(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
    ) -> Result<Decision, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let decided = self.decide_checked(key, || Ok(now_ms), cost, call, &self.limits());
        decided.map(|(decision, _)| decision)
    }

    /// [`Zone::check_at`] (or [`Zone::check_dry_run_at`]) at the time `clock` gives once the
    /// key's set is locked: the decision and its time. Calls on one key are then stamped in
    /// the order they were decided, also across processes, so a log of the times replays the
    /// zone exactly (a time read before the lock may be older than one recorded already).
    /// `limits`: the key's own (checked here against the zone's rule, so those of another rule
    /// are an error); none: the live ones.
    pub fn check_now(
        &self,
        key: &[u8],
        clock: &impl Clock,
        cost: u64,
        call: Call,
        limits: Option<&Limits>,
    ) -> Result<(Decision, i64), Error> {
        let now_ms = || check_time("now_ms", clock.now_ms());
        // One call of decide_checked, inlined as before the key's own limits came.
        let limits = match limits {
            Some(limits) => self.checked(limits)?,
            None => self.limits(),
        };
        self.decide_checked(key, now_ms, cost, call, &limits)
    }

    /// A key's own `limits` checked against the rule, off the path of the live ones.
    #[cold]
    #[inline(never)]
    fn checked(&self, limits: &Limits) -> Result<Limits, Error> {
        self.rule.check_limits(limits)
    }

    /// Give back `cost` recorded for `key`, the newest first (nothing for an unknown key).
    pub fn uncommit_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.amend_at(key, now_ms, None, Amend::GiveBack(cost))
    }

    /// At `now_ms`, change what `key` recorded at `stamp_ms` (`None`: the newest; a
    /// reservation settled: its stamp, [`crate::reservation`]), as
    /// [`crate::store::Store::amend`]; nothing for an unknown key (an evicted one: the debt
    /// of a key idle enough to go is not kept).
    pub fn amend_at(
        &self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        check_time("now_ms", now_ms)?;
        if let Some(stamp_ms) = stamp_ms {
            check_time("stamp_ms", stamp_ms)?;
        }
        let at = self.table.seek(key, self);
        match at.way {
            Some(way) => self.state(&at.set, way).amend(now_ms, stamp_ms, amend),
            None => Ok(()),
        }
    }

    /// Take back a call [`Zone::check_at`] admitted at `stamp_ms` that another limit then
    /// refused (nginx's `limit_req` charges no zone for a request another one refuses): its
    /// `cost` given back where it was recorded, and its admission no longer counted.
    pub fn withdraw_at(&self, key: &[u8], stamp_ms: i64, cost: u64) -> Result<(), Error> {
        check_time("stamp_ms", stamp_ms)?;
        let at = self.table.seek(key, self);
        if let Some(way) = at.way {
            self.state(&at.set, way)
                .amend(stamp_ms, Some(stamp_ms), Amend::GiveBack(cost))?;
            at.set.add(S_ALLOWED, u64::MAX);
        }
        Ok(())
    }

    /// Forget `key`.
    pub fn reset(&self, key: &[u8]) {
        let at = self.table.seek(key, self);
        if let Some(way) = at.way {
            self.table.forget(&at.set, way);
            at.set.add(S_KEYS, u64::MAX);
        }
    }

    /// Counters summed over every set (read without locks: each is exact, the sum is a
    /// moment's view). A walk a slice at a time: [`super::Walk::counters`].
    pub fn stats(&self) -> ZoneStats {
        let mut stats = ZoneStats::default();
        self.add_counters(&mut stats, 0..self.table.cut.sets);
        stats
    }

    /// Adds the counters of sets `sets` to `stats`, and sets its capacity.
    pub(super) fn add_counters(&self, stats: &mut ZoneStats, sets: Range<usize>) {
        let fields = [
            S_KEYS,
            S_EVICTIONS,
            S_RECLAIMED,
            S_REPAIRS,
            S_ALLOWED,
            S_REJECTED,
            S_WOULD_REJECT,
        ];
        let [keys, evictions, reclaimed, repairs, allowed, rejected, would_reject] =
            self.table.totals(fields, sets);
        stats.keys += keys;
        stats.evictions += evictions;
        stats.reclaimed += reclaimed;
        stats.repairs += repairs;
        stats.allowed += allowed;
        stats.rejected += rejected;
        stats.would_reject += would_reject;
        stats.capacity = self.capacity() as u64;
        stats.full_refusals = self.table.header().get(H_FULL_REFUSALS);
    }

    /// Decide for `key` at `now_ms` under `limits` (the live ones, or a caller's from
    /// [`Rule::check_limits`]), recording `cost` in every window when all admit it and `call`
    /// commits (an unknown key is stored only then).
    pub fn decide_at(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: &Limits,
    ) -> Result<Decision, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        // Limits made for another rule would leave windows unchecked, or index past them.
        let limits = &self.rule.check_limits(limits)?;
        let decided = self.decide_checked(key, || Ok(now_ms), cost, call, limits);
        decided.map(|(decision, _)| decision)
    }

    /// [`Zone::decide_at`] with `limits` checked, at the time `now_ms` gives (checked) once the
    /// key's set is locked: the decision and its time.
    #[inline(always)]
    fn decide_checked(
        &self,
        key: &[u8],
        now_ms: impl FnOnce() -> Result<i64, Error>,
        cost: u64,
        call: Call,
        limits: &Limits,
    ) -> Result<(Decision, i64), Error> {
        let at = self.table.seek(key, self);
        let now_ms = now_ms()?;
        let decision = self.decide_locked(&at, now_ms, cost, call, limits)?;
        Ok((decision, now_ms))
    }

    /// [`Zone::decide_checked`] in the set locked for a key, at `now_ms`.
    #[inline(always)]
    fn decide_locked(
        &self,
        at: &Locked<'_, '_>,
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: &Limits,
    ) -> Result<Decision, Error> {
        let (set, commit) = (&at.set, call.commits());
        let way = match at.way {
            Some(way) => way,
            // A peek at an unknown key answers for empty windows and stores nothing.
            None if !commit => {
                let mut empty = RuleLimiter::new_state(&self.rule);
                return self
                    .rule
                    .decide_with(&mut empty, now_ms, cost, false, limits);
            }
            None => match self.insert(set, &at.key, now_ms) {
                Some(way) => way,
                None => return Ok(self.refuse_full(set, now_ms, limits)),
            },
        };
        let refused = &set.words[self.refused_at(way)];
        // Only a key refused before pays for the check that its windows drained since.
        let drained = commit && refused.load(Relaxed) != 0 && self.state(set, way).is_idle(now_ms);
        let decision =
            crate::assessment::fold(&mut self.state(set, way), limits, now_ms, cost, commit);
        self.table.touch(set, way, now_ms);
        if commit {
            count_refusal(refused, drained, decision.allowed);
            let outcome = match (decision.allowed, call) {
                (true, _) => S_ALLOWED,
                (false, Call::DryRun) => S_WOULD_REJECT,
                (false, _) => S_REJECTED,
            };
            set.add(outcome, 1);
        }
        Ok(decision)
    }

    /// The word of `way` counting its refusals (scan.rs): the first of its payload.
    pub(super) fn refused_at(&self, way: usize) -> usize {
        self.table.cut.payload(way)
    }

    pub(super) fn state<'s>(&'s self, set: &Set<'s>, way: usize) -> state::Way<'s> {
        let at = self.refused_at(way) + REFUSED_WORDS;
        state::Way {
            windows: self.rule.windows(),
            offsets: &self.layout.offsets,
            words: &set.words[at..at + self.layout.state_words],
        }
    }

    /// A way for `key` ([`Table::insert`]), its set's count of keys or of idle ways
    /// reclaimed raised.
    fn insert(&self, set: &Set<'_>, key: &Key, now_ms: i64) -> Option<usize> {
        let (way, vacancy) = self.table.insert(set, key, now_ms, self)?;
        match vacancy {
            Vacancy::Empty => set.add(S_KEYS, 1),
            Vacancy::Idle => set.add(S_RECLAIMED, 1),
            Vacancy::Full => {}
        }
        Some(way)
    }

    /// The refusal of a new key whose set is full ([`Full::Refuse`]): it may retry when the
    /// first way of the set empties.
    fn refuse_full(&self, set: &Set<'_>, now_ms: i64, limits: &Limits) -> Decision {
        let wait_ms = (0..WAYS)
            .map(|w| self.state(set, w).idle_in_ms(now_ms))
            .min()
            .unwrap_or(0);
        set.add(S_REJECTED, 1);
        self.table.header().count(H_FULL_REFUSALS, 1);
        Decision {
            allowed: false,
            limit: limits.first().copied().unwrap_or(0),
            remaining: 0,
            retry_after_ms: Some(wait_ms),
            reset_after_ms: wait_ms,
            window: 0,
        }
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Payload for Zone<R, O> {
    /// A key whose windows hold nothing.
    fn is_idle(&self, set: &Set<'_>, way: usize, now_ms: i64) -> bool {
        self.state(set, way).is_idle(now_ms)
    }

    /// The least recently used key is evicted, or the new key refused ([`Full`]).
    fn full(&self, set: &Set<'_>, _: i64) -> Option<usize> {
        if self.full == Full::Refuse {
            return None;
        }
        set.add(S_EVICTIONS, 1);
        self.table.header().count(H_EVICTIONS, 1);
        Some(self.table.least_recently_used(set))
    }

    fn clear(&self, set: &Set<'_>, way: usize, _: i64) {
        self.state(set, way).clear();
        set.set(self.refused_at(way), 0);
    }

    /// States the algorithm cannot have made emptied, the keys recounted.
    fn repair(&self, set: &Set<'_>, held: [bool; WAYS]) {
        let mut keys = 0;
        for way in (0..WAYS).filter(|&way| held[way]) {
            self.state(set, way).repair();
            keys += 1;
        }
        set.set(S_KEYS, keys);
        set.add(S_REPAIRS, 1);
    }
}

/// After a committed call: a key whose windows had drained starts a new streak of refusals;
/// a refused call adds one.
fn count_refusal(word: &AtomicU64, drained: bool, allowed: bool) {
    let before = if drained { 0 } else { word.load(Relaxed) };
    if drained || !allowed {
        word.store(before.saturating_add(u64::from(!allowed)), Relaxed);
        super::fault::point();
    }
}
