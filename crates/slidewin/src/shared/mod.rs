//! A keyed rule over one region of shared memory, for every process that maps it: the
//! workers of one nginx count each key once, exactly as one in-process [`crate::Keyed`] would.
//!
//! The region is anything that reads as a slice of [`AtomicU64`] words (the host maps the
//! memory; this crate has no `unsafe`). It holds a header and `sets` of [`WAYS`] keys each, like a set-associative cache:
//! a key's seeded hash picks its set, and each set has its own lock word, so calls on different
//! keys rarely wait for each other and a hot key only holds up the keys of its set.
//!
//! - **Same answers as in process.** A key's way holds the state of every window of the
//!   [`Rule`], each the limiter's own state type with its arrays in the region
//!   ([`crate::storage`]); one lock and one [`crate::rule`] decision cover all windows. A log
//!   keeps room for `min(max_limit, window_ms) + 1` entries per key: the most it can hold,
//!   and one spare.
//! - **Live limits.** Each window's limit is a word of the region's header: [`Zone::set_limit`]
//!   changes it for every process at once, and windows keep their history (a lowered limit
//!   refuses until the window drains, a raised one admits at once). [`Zone::decide_at`] takes
//!   a caller's own limits (a plan) up to each window's `max_limit`.
//! - **Bounded.** Everything lives in the region: its size fixes how many keys fit
//!   ([`Zone::capacity`]). Keys of up to `max_key_bytes` are stored as they are; longer keys
//!   as a 128-bit keyed digest (SipHash under the region's secret seed), never refused.
//! - **Full.** A new key takes an empty way of its set, else an idle one (its window holds
//!   nothing: reclaimed, no answer changes), else the least recently used one (evicted).
//!   Eviction is per set, so it approximates least-recently-used over the whole region.
//! - **Crash safe.** A lock word names its owner ([`Owner`]); a process killed while holding
//!   one is found dead by the next waiter, which takes the lock and repairs the set: ways whose
//!   key does not match its tag are dropped, states the algorithm cannot have made are emptied
//!   (a half-written log or bucket ring), derived totals are recounted. [`ZoneStats::repairs`]
//!   counts such takeovers.
//! - **Reusable.** A region made for the same layout (windows, their `max_limit`, key length,
//!   size) is attached as it is ([`Attached::Reused`]): an nginx reload keeps every key's
//!   window, and its live limits unless the new config changed a window's limit.
//!
//! ```
//! use core::sync::atomic::AtomicU64;
//! use slidewin::rule::{Rule, RuleWindow};
//! use slidewin::shared::{Owner, Zone};
//! use slidewin::Quota;
//!
//! struct OneProcess;
//! impl Owner for OneProcess {
//!     fn id(&self) -> u64 { 1 }
//!     fn is_alive(&self, _: u64) -> bool { true }
//! }
//!
//! let words: Vec<AtomicU64> = (0..4096).map(|_| AtomicU64::new(0)).collect();
//! let rule = Rule::one(RuleWindow::log(Quota::new(2, 1_000)?).with_max_limit(10)?);
//! let (zone, _) = Zone::attach(&words, rule, 64, OneProcess, [7, 9])?;
//! assert!(zone.check_at(b"alice", 0, 1)?.allowed);
//! assert!(zone.check_at(b"alice", 10, 1)?.allowed);
//! assert_eq!(zone.check_at(b"alice", 20, 1)?.retry_after_ms, Some(980));
//! assert!(zone.check_at(b"bob", 20, 1)?.allowed);
//! assert_eq!(zone.stats().keys, 2);
//! zone.set_limit(0, 3)?; // raised for every process: alice fits once more at once
//! assert!(zone.check_at(b"alice", 30, 1)?.allowed);
//! assert!(!zone.check_at(b"alice", 40, 1)?.allowed);
//! # Ok::<(), slidewin::Error>(())
//! ```

mod directory;
mod evictions;
mod export;
#[cfg(feature = "fault-points")]
pub mod fault;
#[cfg(not(feature = "fault-points"))]
pub(crate) mod fault;
mod inflight;
mod keys;
mod layout;
mod leases;
mod limits;
mod lock;
mod scan;
mod state;
#[cfg(test)]
mod tests;

pub use directory::{Directory, DirectoryStats, Found, Part, GRACE_MS, PAGE_BYTES};
pub use evictions::{Evicted, EvictionWatch};
pub use export::ZoneExport;
pub use inflight::{Entry, Inflight, InflightConfig, InflightStats, LIVENESS_CHECK_MS};
pub use layout::{RegionKind, WindowShape};
pub use leases::{Admitted, Fetch, LeaseStats, Leases, Spent, SETTLE_SLOTS};
pub use limits::LiveLimits;
pub use lock::Owner;
#[cfg(feature = "std")]
pub use lock::ProcessOwner;
pub use scan::{HeavyHitter, KeyWindow, Scan, StoredKey, Usage, Walk, USAGE_BOUNDS};

use core::ops::Range;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::clock::check_time;
use crate::rule::{Limits, Rule, RuleLimiter};
use crate::{Clock, Decision, Error, Limiter};
use keys::{Key, KeyCodec};
use layout::Layout;
use lock::Taken;

/// Keys per set.
pub const WAYS: usize = 8;

/// A fresh secret seed for a new region's hashes, from the process's random source.
#[cfg(feature = "std")]
pub fn random_seed() -> [u64; 2] {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new();
    [random.hash_one(1_u8), random.hash_one(2_u8)]
}
/// The room a region may give each key, in bytes (`max_key_bytes`): from a long key's
/// 16-byte digest to 64 KiB.
pub const KEY_BYTES: core::ops::RangeInclusive<usize> = 16..=65_536;

/// `max_key_bytes` checked against [`KEY_BYTES`], for every kind of region.
fn check_key_bytes(max_key_bytes: usize) -> Result<(), Error> {
    if KEY_BYTES.contains(&max_key_bytes) {
        return Ok(());
    }
    let got = crate::Value::UInt(max_key_bytes as u64);
    Err(Error::invalid("max_key_bytes", "from 16 to 65536", got))
}

/// Header words of the region.
const HEADER_WORDS: usize = 32;
const MAGIC: u64 = u64::from_le_bytes(*b"slidewn3");
// Header word indices.
const H_MAGIC: usize = 0;
const H_FINGERPRINT: usize = 1;
const H_SEED: usize = 2; // two words
/// Keys evicted with units in their windows, over every set: one word that a host reads on
/// each call to notice a zone too small (written only when a key is evicted).
const H_EVICTIONS: usize = 4;
/// New keys refused because every way of their set held units ([`Full::Refuse`]).
const H_FULL_REFUSALS: usize = 5;
/// The live limits ([`LiveLimits`]).
const H_LIMITS: usize = 8;

// Words of a set: a header, the ways' tags (0: empty), then the ways.
const S_LOCK: usize = 0;
const S_ALLOWED: usize = 1;
const S_REJECTED: usize = 2;
const S_EVICTIONS: usize = 3;
const S_RECLAIMED: usize = 4;
const S_REPAIRS: usize = 5;
const S_KEYS: usize = 6;
const S_WOULD_REJECT: usize = 7;
const SET_HEADER: usize = 8;
const S_TAGS: usize = SET_HEADER;

// Words of a way: the key's length word, when it was last used, the key, then the state.
const W_LEN: usize = 0;
const W_USED_MS: usize = 1;
const W_KEY: usize = 2;
/// After the key, a zone's way keeps its refusals since its windows were last all empty
/// (scan.rs), then the windows' states.
const REFUSED_WORDS: usize = 1;

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

/// Whether [`Zone::attach`] found the region ready for this layout or laid it out afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// The region was empty or made for another layout: laid out anew, every key forgotten.
    Fresh,
    /// The region already held this layout: its keys and windows are kept.
    Reused,
}

/// Counters of a region, summed over its sets (for every process that shares it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZoneStats {
    /// Keys held now.
    pub keys: u64,
    /// Keys the region can hold.
    pub capacity: u64,
    /// Live keys dropped to make room.
    pub evictions: u64,
    /// Idle keys (empty window) dropped to make room.
    pub reclaimed: u64,
    /// Locks taken over from a dead process (its set repaired).
    pub repairs: u64,
    /// Calls admitted.
    pub allowed: u64,
    /// Calls refused (a dry run's apart).
    pub rejected: u64,
    /// Refusals of dry runs ([`Zone::check_dry_run_at`]): the calls went on.
    pub would_reject: u64,
    /// New keys refused because their set was full of keys holding units ([`Full::Refuse`];
    /// also counted in `rejected`).
    pub full_refusals: u64,
}

/// What a decision does besides deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// Records nothing (an unknown key is not stored).
    Peek,
    /// Records the cost when it fits; a refusal is counted as one.
    Check,
    /// Records as `Check`; the caller lets a refused call through, a would-be refusal.
    DryRun,
}

/// A keyed [`Rule`] over a shared region; see the [module docs](self).
pub struct Zone<R, O: Owner> {
    region: R,
    rule: Rule,
    layout: Layout,
    codec: KeyCodec,
    owner: O,
    full: Full,
}

/// The magic word while one caller lays a region out: this bit and the caller's owner id.
const LAYING_OUT: u64 = 1 << 63;

/// The header of a region: laid out afresh for `magic` and `fingerprint` (every word of the
/// region zeroed, `seed` stored) unless it holds them already; how, and the region's seed.
/// Callers attaching at once are safe: one claims the layout in the magic word and the others
/// wait for it (taking the claim over when its owner died), so none zeroes a region another
/// has started to use.
fn attach_header(
    words: &[AtomicU64],
    magic: u64,
    fingerprint: u64,
    seed: [u64; 2],
    owner: &impl Owner,
) -> (Attached, [u64; 2]) {
    let attached = loop {
        let seen = words[H_MAGIC].load(Ordering::Acquire);
        if seen == magic && words[H_FINGERPRINT].load(Ordering::Relaxed) == fingerprint {
            break Attached::Reused;
        }
        if seen & LAYING_OUT != 0 && owner.is_alive(seen & !LAYING_OUT) {
            owner.pause();
            continue;
        }
        let claim = LAYING_OUT | owner.id();
        let claimed =
            words[H_MAGIC].compare_exchange(seen, claim, Ordering::Acquire, Ordering::Relaxed);
        if claimed.is_err() {
            continue;
        }
        for word in &words[1..] {
            word.store(0, Ordering::Relaxed);
        }
        words[H_FINGERPRINT].store(fingerprint, Ordering::Relaxed);
        words[H_SEED].store(seed[0], Ordering::Relaxed);
        words[H_SEED + 1].store(seed[1], Ordering::Relaxed);
        words[H_MAGIC].store(magic, Ordering::Release);
        break Attached::Fresh;
    };
    let seed = [0, 1].map(|i| words[H_SEED + i].load(Ordering::Relaxed));
    (attached, seed)
}

/// Counters `fields` of sets `sets`, summed (read without locks: each is exact, the sum is a
/// moment's view); sets of `set_words` follow `header` words.
fn set_totals<const N: usize>(
    words: &[AtomicU64],
    header: usize,
    set_words: usize,
    sets: Range<usize>,
    fields: [usize; N],
) -> [u64; N] {
    let mut totals = [0; N];
    for set in sets {
        let base = header + set * set_words;
        for (total, field) in totals.iter_mut().zip(fields) {
            *total += words[base + field].load(Ordering::Relaxed);
        }
    }
    totals
}

/// The set `key` lives in, of `sets`: the high half of its hash, scaled.
fn set_of(key: &Key, sets: usize) -> usize {
    (((key.hash >> 32) * sets as u64) >> 32) as usize
}

/// Locks set `index` of `words` (sets of `set_words` after `header` words) for `owner`,
/// calling `repair` on it first when its last owner died holding it.
fn lock_set<'w>(
    words: &'w [AtomicU64],
    (header, set_words): (usize, usize),
    index: usize,
    owner: &impl Owner,
    repair: impl FnOnce(&Set<'w>),
) -> Set<'w> {
    let base = header + index * set_words;
    let set = Set {
        words: &words[base..base + set_words],
    };
    if lock::lock(&set.words[S_LOCK], owner) == Taken::FromDead {
        repair(&set);
    }
    set
}

/// One set, locked.
struct Set<'z> {
    words: &'z [AtomicU64],
}

impl Drop for Set<'_> {
    fn drop(&mut self) {
        lock::unlock(&self.words[S_LOCK]);
    }
}

impl<'z> Set<'z> {
    fn get(&self, i: usize) -> u64 {
        self.words[i].load(Ordering::Relaxed)
    }
    fn set(&self, i: usize, value: u64) {
        self.words[i].store(value, Ordering::Relaxed);
        fault::point();
    }
    fn add(&self, i: usize, n: u64) {
        self.set(i, self.get(i).wrapping_add(n));
    }
    /// The stored key (length word, last use, key words) of `way`, in ways of `way_words`
    /// with room for `key_words`.
    fn stored_key(&self, way: usize, way_words: usize, key_words: usize) -> &'z [AtomicU64] {
        let at = S_TAGS + WAYS + way * way_words;
        &self.words[at..at + W_KEY + key_words]
    }
    /// Drops the ways whose key does not match its tag (a key half written by a process that
    /// died): which ways hold a key now.
    fn drop_torn_keys(&self, codec: &KeyCodec, way_words: usize, key_words: usize) -> [bool; WAYS] {
        core::array::from_fn(|way| {
            let tag = self.get(S_TAGS + way);
            let torn = codec.stored_tag(self.stored_key(way, way_words, key_words)) != Some(tag);
            if tag != 0 && torn {
                self.set(S_TAGS + way, 0);
            }
            tag != 0 && !torn
        })
    }
    /// The way holding `key`, in ways of `way_words` with room for `key_words`.
    fn find(&self, key: &Key, way_words: usize, key_words: usize) -> Option<usize> {
        let (tag, tags) = (key.tag(), &self.words[S_TAGS..S_TAGS + WAYS]);
        (0..WAYS).find(|&way| {
            tags[way].load(Ordering::Relaxed) == tag
                && key.matches(self.stored_key(way, way_words, key_words))
        })
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Zone<R, O> {
    /// Bytes one key takes in a region (its share of a set), for sizing: a region of `size`
    /// bytes holds about `size / bytes_per_key` keys.
    pub fn bytes_per_key(rule: &Rule, max_key_bytes: usize) -> Result<usize, Error> {
        let (key_words, offsets) = Layout::per_key(rule, max_key_bytes)?;
        let state_words = offsets[rule.windows().len()];
        let set_words =
            (SET_HEADER + WAYS + WAYS * (W_KEY + key_words + REFUSED_WORDS + state_words))
                .next_multiple_of(8);
        Ok(set_words * 8 / WAYS)
    }

    /// How many keys a region of `size_bytes` holds for `config`: an error naming `size`
    /// when not one set of keys fits, before any memory is mapped.
    pub fn capacity_for(
        rule: &Rule,
        max_key_bytes: usize,
        size_bytes: usize,
    ) -> Result<usize, Error> {
        Ok(Layout::new(rule, max_key_bytes, size_bytes / 8)?.sets * WAYS)
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
        let words = region.as_ref();
        let layout = Layout::new(&rule, max_key_bytes, words.len())?;
        let fingerprint = layout.fingerprint(&rule, words.len());
        let (attached, seed) = attach_header(words, MAGIC, fingerprint, seed, &owner);
        LiveLimits::attach(&words[H_LIMITS..H_LIMITS + LiveLimits::<R>::WORDS], &rule);
        let codec = KeyCodec::new(seed, layout.key_words * 8);
        let zone = Self {
            region,
            rule,
            layout,
            codec,
            owner,
            full: Full::Evict,
        };
        Ok((zone, attached))
    }

    /// The rule over `words` laid out already by an [`Zone::attach`] for the same rule, key
    /// length and size (another module of the process attached it): nothing is written
    /// when the layout differs, an error naming the region's fingerprint is.
    pub fn open(region: R, rule: Rule, max_key_bytes: usize, owner: O) -> Result<Self, Error> {
        let words = region.as_ref();
        let layout = Layout::new(&rule, max_key_bytes, words.len())?;
        let fingerprint = layout.fingerprint(&rule, words.len());
        let seen = words[H_FINGERPRINT].load(Ordering::Relaxed);
        if words[H_MAGIC].load(Ordering::Acquire) != MAGIC || seen != fingerprint {
            let expected = "the fingerprint of a region laid out for this rule and size";
            return Err(Error::invalid("region", expected, crate::Value::UInt(seen)));
        }
        let seed = [0, 1].map(|i| words[H_SEED + i].load(Ordering::Relaxed));
        LiveLimits::attach(&words[H_LIMITS..H_LIMITS + LiveLimits::<R>::WORDS], &rule);
        let codec = KeyCodec::new(seed, layout.key_words * 8);
        Ok(Self {
            region,
            rule,
            layout,
            codec,
            owner,
            full: Full::Evict,
        })
    }

    /// This process's zone with `full` for new keys in a full set ([`Full::Evict`] unless
    /// set): every process of the region should say the same.
    pub fn with_full(self, full: Full) -> Self {
        Self { full, ..self }
    }

    /// Keys evicted with units in their windows so far, over the whole region: one word,
    /// cheap enough to read on every call to notice a zone too small.
    pub fn evictions(&self) -> u64 {
        self.words()[H_EVICTIONS].load(Ordering::Relaxed)
    }

    /// Keys the region holds at most.
    pub fn capacity(&self) -> usize {
        self.layout.sets * WAYS
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
            words: &self.words()[H_LIMITS..H_LIMITS + LiveLimits::<R>::WORDS],
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
    pub fn check_now(
        &self,
        key: &[u8],
        clock: &impl Clock,
        cost: u64,
        dry_run: bool,
    ) -> Result<(Decision, i64), Error> {
        let call = if dry_run { Call::DryRun } else { Call::Check };
        let now_ms = || check_time("now_ms", clock.now_ms());
        self.decide_checked(key, now_ms, cost, call, &self.limits())
    }

    /// Give back `cost` recorded for `key` (nothing for an unknown key).
    pub fn uncommit_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        check_time("now_ms", now_ms)?;
        let key = self.codec.key(key);
        let set = self.lock(&key);
        match self.find(&set, &key) {
            Some(way) => self.state(&set, way).refund(now_ms, cost),
            None => Ok(()),
        }
    }

    /// Take back a call [`Zone::check_at`] admitted at `now_ms` that another limit then
    /// refused (nginx's `limit_req` charges no zone for a request another one refuses): its
    /// `cost` given back and its admission no longer counted.
    pub fn withdraw_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        check_time("now_ms", now_ms)?;
        let key = self.codec.key(key);
        let set = self.lock(&key);
        if let Some(way) = self.find(&set, &key) {
            self.state(&set, way).refund(now_ms, cost)?;
            set.add(S_ALLOWED, u64::MAX);
        }
        Ok(())
    }

    /// Forget `key`.
    pub fn reset(&self, key: &[u8]) {
        let key = self.codec.key(key);
        let set = self.lock(&key);
        if let Some(way) = self.find(&set, &key) {
            set.set(S_TAGS + way, 0);
            set.add(S_KEYS, u64::MAX);
        }
    }

    /// Counters summed over every set (read without locks: each is exact, the sum is a
    /// moment's view). A walk a slice at a time: [`Walk::counters`].
    pub fn stats(&self) -> ZoneStats {
        let mut stats = ZoneStats::default();
        self.add_counters(&mut stats, 0..self.layout.sets);
        stats
    }

    /// Adds the counters of sets `sets` to `stats`, and sets its capacity.
    fn add_counters(&self, stats: &mut ZoneStats, sets: Range<usize>) {
        let fields = [
            S_KEYS,
            S_EVICTIONS,
            S_RECLAIMED,
            S_REPAIRS,
            S_ALLOWED,
            S_REJECTED,
            S_WOULD_REJECT,
        ];
        let [keys, evictions, reclaimed, repairs, allowed, rejected, would_reject] = set_totals(
            self.words(),
            HEADER_WORDS,
            self.layout.set_words,
            sets,
            fields,
        );
        stats.keys += keys;
        stats.evictions += evictions;
        stats.reclaimed += reclaimed;
        stats.repairs += repairs;
        stats.allowed += allowed;
        stats.rejected += rejected;
        stats.would_reject += would_reject;
        stats.capacity = self.capacity() as u64;
        stats.full_refusals = self.words()[H_FULL_REFUSALS].load(Ordering::Relaxed);
    }

    /// Decide for `key` at `now_ms` under `limits` (the live ones, or a caller's from
    /// [`Rule::check_limits`]), recording `cost` in every window when all admit it and
    /// `commit` is true (an unknown key is stored only then).
    pub fn decide_at(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: &Limits,
    ) -> Result<Decision, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        // Limits made for another rule would leave windows unchecked, or index past them.
        let limits = &self.rule.check_limits(limits)?;
        let call = if commit { Call::Check } else { Call::Peek };
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
        let key = self.codec.key(key);
        let set = self.lock(&key);
        let now_ms = now_ms()?;
        let decision = self.decide_locked(&set, &key, now_ms, cost, call, limits)?;
        Ok((decision, now_ms))
    }

    /// [`Zone::decide_checked`] in the set locked for `key`, at `now_ms`.
    #[inline(always)]
    fn decide_locked(
        &self,
        set: &Set<'_>,
        key: &Key,
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: &Limits,
    ) -> Result<Decision, Error> {
        let commit = call != Call::Peek;
        let way = match self.find(set, key) {
            Some(way) => way,
            // A peek at an unknown key answers for empty windows and stores nothing.
            None if !commit => {
                let mut empty = RuleLimiter::new_state(&self.rule);
                return self
                    .rule
                    .decide_with(&mut empty, now_ms, cost, false, limits);
            }
            None => match self.insert(set, key, now_ms) {
                Some(way) => way,
                None => return Ok(self.refuse_full(set, now_ms, limits)),
            },
        };
        let refused = &set.words[self.refused_at(way)];
        // Only a key refused before pays for the check that its windows drained since.
        let drained =
            commit && refused.load(Ordering::Relaxed) != 0 && self.state(set, way).is_idle(now_ms);
        let decision =
            crate::assessment::fold(&mut self.state(set, way), limits, now_ms, cost, commit);
        set.set(self.way(way) + W_USED_MS, now_ms as u64);
        if commit {
            scan::count_refusal(refused, drained, decision.allowed);
            let outcome = match (decision.allowed, call) {
                (true, _) => S_ALLOWED,
                (false, Call::DryRun) => S_WOULD_REJECT,
                (false, _) => S_REJECTED,
            };
            set.add(outcome, 1);
        }
        Ok(decision)
    }

    /// Locks the set of `key`, repairing it first when its last owner died holding it.
    fn words(&self) -> &[AtomicU64] {
        self.region.as_ref()
    }

    fn lock(&self, key: &Key) -> Set<'_> {
        self.lock_index(set_of(key, self.layout.sets))
    }

    /// Locks set `index`, repairing it first when its last owner died holding it.
    fn lock_index(&self, index: usize) -> Set<'_> {
        let cut = (HEADER_WORDS, self.layout.set_words);
        lock_set(self.words(), cut, index, &self.owner, |set| {
            self.repair(set)
        })
    }

    /// First word of `way` within its set.
    fn way(&self, way: usize) -> usize {
        S_TAGS + WAYS + way * self.layout.way_words
    }

    /// The word of `way` counting its refusals (scan.rs).
    fn refused_at(&self, way: usize) -> usize {
        self.way(way) + W_KEY + self.layout.key_words
    }

    fn state<'s>(&'s self, set: &Set<'s>, way: usize) -> state::Way<'s> {
        let at = self.refused_at(way) + REFUSED_WORDS;
        state::Way {
            windows: self.rule.windows(),
            offsets: &self.layout.offsets,
            words: &set.words[at..at + self.layout.state_words],
        }
    }

    fn stored_key<'s>(&self, set: &Set<'s>, way: usize) -> &'s [AtomicU64] {
        set.stored_key(way, self.layout.way_words, self.layout.key_words)
    }

    fn find(&self, set: &Set<'_>, key: &Key) -> Option<usize> {
        set.find(key, self.layout.way_words, self.layout.key_words)
    }

    /// A way for `key`: an empty one, else an idle one, else the least recently used (none
    /// when the zone refuses new keys in a full set).
    fn insert(&self, set: &Set<'_>, key: &Key, now_ms: i64) -> Option<usize> {
        let empty = (0..WAYS).find(|&way| set.get(S_TAGS + way) == 0);
        let way = match empty {
            Some(way) => way,
            None => match (0..WAYS).find(|&w| self.state(set, w).is_idle(now_ms)) {
                Some(way) => {
                    set.add(S_RECLAIMED, 1);
                    way
                }
                None if self.full == Full::Refuse => return None,
                None => {
                    set.add(S_EVICTIONS, 1);
                    self.words()[H_EVICTIONS].fetch_add(1, Ordering::Relaxed);
                    let used_ms = |w: usize| set.get(self.way(w) + W_USED_MS) as i64;
                    (0..WAYS).min_by_key(|&w| used_ms(w)).unwrap_or(0)
                }
            },
        };
        if empty.is_some() {
            set.add(S_KEYS, 1);
        }
        // The tag goes last: a process that dies half way leaves a way whose key does not
        // match its tag, which the repair drops.
        set.set(S_TAGS + way, 0);
        key.store(self.stored_key(set, way));
        set.set(self.way(way) + W_USED_MS, now_ms as u64);
        self.state(set, way).clear();
        set.set(self.refused_at(way), 0);
        set.set(S_TAGS + way, key.tag());
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
        self.words()[H_FULL_REFUSALS].fetch_add(1, Ordering::Relaxed);
        Decision {
            allowed: false,
            limit: limits.first().copied().unwrap_or(0),
            remaining: 0,
            retry_after_ms: Some(wait_ms),
            reset_after_ms: wait_ms,
            window: 0,
        }
    }

    /// After a takeover from a dead owner: drop ways whose key does not match its tag, empty
    /// states the algorithm cannot have made, recount the keys.
    fn repair(&self, set: &Set<'_>) {
        let mut keys = 0;
        let held = set.drop_torn_keys(&self.codec, self.layout.way_words, self.layout.key_words);
        for way in (0..WAYS).filter(|&way| held[way]) {
            self.state(set, way).repair();
            keys += 1;
        }
        set.set(S_KEYS, keys);
        set.add(S_REPAIRS, 1);
    }
}
