//! Concurrency limits over a shared region: [`Inflight`].

use core::sync::atomic::AtomicU64;

use super::answers::{Entry, InflightStats};
use super::inflight_way::{payload_words, Slots};
use super::lock::Owner;
use super::region::Attached;
use super::table::{check_key_bytes, Cut, Payload, Set, Table, WAYS};
use crate::clock::check_time;
use crate::{Error, Value};

/// How often a full key asks whether its slots' owners still live (a system call each).
pub const LIVENESS_CHECK_MS: i64 = 200;
/// The most slots one key can hold: a way keeps room for `max_limit` records.
pub const MAX_LIMIT: u64 = 1 << 16;

const HEADER_WORDS: usize = 16;
const MAGIC: u64 = u64::from_le_bytes(*b"slidewc1");
// Header words after the magic, fingerprint and seed (as in a Zone's).
const H_LIMIT: usize = 4;
const H_CONFIG_LIMIT: usize = 5;

// Words of a set's header after its lock (the tags and ways follow, as in a Zone's).
const S_ADMITTED: usize = 1;
const S_REFUSED: usize = 2;
const S_EXPIRED: usize = 3;
const S_DEAD: usize = 4;
const S_REPAIRS: usize = 5;
const S_FULL: usize = 6;
const S_INFLIGHT: usize = 7;

/// Owners asked about in one sweep, (id, alive): a few at most (one per worker), so a sweep
/// of many keys asks about each once.
type Asked = [(u64, bool); 8];

/// A concurrency limit: `limit` in flight per key now, up to `max_limit` when changed live,
/// each slot held at most `max_hold_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflightConfig {
    limit: u64,
    max_limit: u64,
    max_hold_ms: i64,
}

impl InflightConfig {
    /// `limit` from 1 to `max_limit`, `max_limit` at most `MAX_LIMIT` (2^16), `max_hold_ms` from 1
    /// to 2^40 (35 years).
    pub fn new(limit: u64, max_limit: u64, max_hold_ms: u64) -> Result<Self, Error> {
        if !(1..=MAX_LIMIT).contains(&max_limit) {
            let expected = "a positive integer at most 65536";
            return Err(Error::invalid(
                "max_limit",
                expected,
                Value::UInt(max_limit),
            ));
        }
        if !(1..=max_limit).contains(&limit) {
            let expected = "a positive integer at most max_limit";
            return Err(Error::invalid("limit", expected, Value::UInt(limit)));
        }
        if !(1..=1 << 40).contains(&max_hold_ms) {
            let expected = "a positive integer at most 2^40";
            return Err(Error::invalid(
                "max_hold_ms",
                expected,
                Value::UInt(max_hold_ms),
            ));
        }
        Ok(Self {
            limit,
            max_limit,
            max_hold_ms: max_hold_ms as i64,
        })
    }

    /// The configured limit (the live one may differ: [`Inflight::limit`]).
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The most the live limit can be set to.
    pub fn max_limit(&self) -> u64 {
        self.max_limit
    }
}

/// Concurrency limits over a shared region: at most `limit` calls of a key in flight across
/// every process that maps it (the workers of one nginx), crash safe.
///
/// Each held slot is a record of its owner ([`Owner`], a process id) and its lease deadline
/// (`now + max_hold_ms`). A slot is given back by [`Inflight::leave_at`]; one whose leave
/// never comes is freed once its lease ends, and one whose owner died (SIGKILL: no cleanup
/// runs) as soon as a caller needs the room: when a key is full, its records are swept,
/// expired ones always, those of dead owners at most every [`LIVENESS_CHECK_MS`] (asking
/// whether a process lives costs a system call). The counts ([`Inflight::inflight_at`],
/// [`Inflight::stats_at`]) sweep what they count first, asking about every owner, so they
/// leave out dead owners and ended leases at any time, not only once the key is entered again.
///
/// The region is cut like [`super::Zone`]'s: `sets` of [`WAYS`] keys, each set behind a lock
/// word naming its owner (a process killed holding it is found dead and the set repaired:
/// records recounted, half-written keys dropped). A key's way holds its count, when its
/// owners were last checked, and room for `max_limit` records (the held ones first), so the
/// live limit can move anywhere up to `max_limit` ([`Inflight::set_limit`]) without a new
/// layout. A key whose way has no record is idle and gives its way to a new key; a new key
/// whose set has no idle way is refused (counted in [`InflightStats::full`]): a way with
/// slots in flight is never evicted, or its count would be lost and over-admit.
///
/// ```
/// use core::sync::atomic::AtomicU64;
/// use slidewin::shared::{Inflight, InflightConfig, Owner};
///
/// struct OneProcess;
/// impl Owner for OneProcess {
///     fn id(&self) -> u64 { 1 }
///     fn is_alive(&self, _: u64) -> bool { true }
/// }
///
/// let words: Vec<AtomicU64> = (0..8192).map(|_| AtomicU64::new(0)).collect();
/// let config = InflightConfig::new(2, 10, 30_000)?; // 2 in flight (up to 10 live), 30 s lease
/// let (slots, _) = Inflight::attach(&words, config, 64, OneProcess, [7, 9])?;
/// let a = slots.enter_at(b"api", 0)?;
/// let b = slots.enter_at(b"api", 5)?;
/// assert!(a.admitted && b.admitted);
/// assert!(!slots.enter_at(b"api", 6)?.admitted); // full
/// assert!(slots.leave_at(b"api", a.token)?);
/// assert!(slots.enter_at(b"api", 7)?.admitted);
/// assert!(slots.enter_at(b"api", 30_005)?.admitted); // the leases of a and b ran out
/// # Ok::<(), slidewin::Error>(())
/// ```
pub struct Inflight<R, O: Owner> {
    pub(super) table: Table<R, O>,
    config: InflightConfig,
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Inflight<R, O> {
    /// The limits of `config` over `words`, keys of up to `max_key_bytes` stored as they are
    /// (longer ones as a keyed digest). A region laid out before for the same `max_limit`,
    /// key length and size is reused with every slot it holds (an nginx reload); its live
    /// limit is kept unless `config.limit` differs from the limit it was attached with.
    pub fn attach(
        region: R,
        config: InflightConfig,
        max_key_bytes: usize,
        owner: O,
        seed: [u64; 2],
    ) -> Result<(Self, Attached), Error> {
        let region_words = region.as_ref().len();
        let payload_words = payload_words(config.max_limit);
        let cut = Cut::new(HEADER_WORDS, max_key_bytes, payload_words, region_words)?;
        let fingerprint = cut.fingerprint([config.max_limit], region_words);
        let (table, attached) = Table::attach(region, cut, (MAGIC, fingerprint), seed, owner);
        let header = table.header();
        if header.get(H_CONFIG_LIMIT) != config.limit {
            header.set(H_CONFIG_LIMIT, config.limit);
            header.set(H_LIMIT, config.limit);
        }
        Ok((Self { table, config }, attached))
    }

    /// Bytes a region needs for `config` to hold at least `keys` keys at once; an error names
    /// a `max_key_bytes` out of range (a region for it could never be attached).
    pub fn bytes_for(
        config: &InflightConfig,
        max_key_bytes: usize,
        keys: usize,
    ) -> Result<usize, Error> {
        check_key_bytes(max_key_bytes)?;
        let payload_words = payload_words(config.max_limit);
        Ok(Cut::bytes_for(
            HEADER_WORDS,
            max_key_bytes,
            payload_words,
            keys,
        ))
    }

    /// Keys the region holds at once.
    pub fn capacity(&self) -> usize {
        self.table.cut.capacity()
    }

    /// The config it was attached with.
    pub fn config(&self) -> &InflightConfig {
        &self.config
    }

    /// The live limit, the same for every process.
    pub fn limit(&self) -> u64 {
        self.table.header().get(H_LIMIT)
    }

    /// Sets the live limit for every process at once: slots already held stay held (a lower
    /// limit refuses until enough are left).
    pub fn set_limit(&self, limit: u64) -> Result<(), Error> {
        if !(1..=self.config.max_limit).contains(&limit) {
            let expected = "a positive integer at most max_limit";
            return Err(Error::invalid("limit", expected, Value::UInt(limit)));
        }
        self.table.header().set(H_LIMIT, limit);
        Ok(())
    }

    /// Takes a slot of `key` at `now_ms` when fewer than the live limit are held.
    pub fn enter_at(&self, key: &[u8], now_ms: i64) -> Result<Entry, Error> {
        check_time("now_ms", now_ms)?;
        let limit = self.limit();
        let token = now_ms.saturating_add(self.config.max_hold_ms);
        let at = self.table.seek_or_insert(key, now_ms, self);
        let set = &at.set;
        let Some(way) = at.way else {
            set.add(S_FULL, 1);
            return Ok(Entry {
                admitted: false,
                inflight: 0,
                limit,
                token,
            });
        };
        self.table.touch(set, way, now_ms);
        let mut count = self.slots(set, way).count();
        if count >= limit {
            count = self.sweep_way(set, way, now_ms, false, &mut Asked::default());
        }
        if count >= limit {
            set.add(S_REFUSED, 1);
            return Ok(Entry {
                admitted: false,
                inflight: count,
                limit,
                token,
            });
        }
        let inflight = self.slots(set, way).take(self.table.owner.id(), token);
        set.add(S_INFLIGHT, 1);
        set.add(S_ADMITTED, 1);
        Ok(Entry {
            admitted: true,
            inflight,
            limit,
            token,
        })
    }

    /// Gives back a slot of `key` this process took with `token` (from [`Entry::token`]):
    /// false when it is no longer held (its lease ran out and a sweep freed it).
    pub fn leave_at(&self, key: &[u8], token: i64) -> Result<bool, Error> {
        check_time("token", token)?;
        let at = self.table.seek(key, self);
        let Some(way) = at.way else {
            return Ok(false);
        };
        match self
            .slots(&at.set, way)
            .held_by(self.table.owner.id(), token)
        {
            Some(i) => {
                self.remove(&at.set, way, i);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Slots of `key` held at `now_ms`, after freeing its expired ones and those of dead owners.
    pub fn inflight_at(&self, key: &[u8], now_ms: i64) -> Result<u64, Error> {
        check_time("now_ms", now_ms)?;
        let at = self.table.seek(key, self);
        Ok(at.way.map_or(0, |way| {
            self.sweep_way(&at.set, way, now_ms, true, &mut Asked::default())
        }))
    }

    /// Frees every expired slot, and every slot whose owner died, in the whole region: a read
    /// of each set's count, a lock of those holding slots, a question per owner.
    pub fn sweep_at(&self, now_ms: i64) -> Result<(), Error> {
        check_time("now_ms", now_ms)?;
        let mut asked = Asked::default();
        // A set holding nothing has nothing to free (a slot taken meanwhile is live).
        let holding = |set: usize| self.table.totals([S_INFLIGHT], set..set + 1) != [0];
        for set in self.table.walk(0..self.table.cut.sets, self, holding) {
            for way in self.table.held(&set) {
                self.sweep_way(&set, way, now_ms, true, &mut asked);
            }
        }
        Ok(())
    }

    /// Counters summed over every set at `now_ms`, after a sweep ([`Self::sweep_at`]), so
    /// that `inflight` leaves out expired slots and dead owners' (each counter is exact, the
    /// sum a moment's view).
    pub fn stats_at(&self, now_ms: i64) -> Result<InflightStats, Error> {
        self.sweep_at(now_ms)?;
        let mut stats = InflightStats::default();
        let fields = [
            S_INFLIGHT, S_ADMITTED, S_REFUSED, S_FULL, S_EXPIRED, S_DEAD, S_REPAIRS,
        ];
        [
            stats.inflight,
            stats.admitted,
            stats.refused,
            stats.full,
            stats.expired,
            stats.dead_owner,
            stats.repairs,
        ] = self.table.totals(fields, 0..self.table.cut.sets);
        Ok(stats)
    }

    /// The payload of `way` of `set`.
    fn slots<'s, 'z>(&self, set: &'s Set<'z>, way: usize) -> Slots<'s, 'z> {
        Slots::new(set, self.table.cut.payload(way))
    }

    /// Frees the expired slots of `way` and, when `check_owners` or the last check is
    /// [`LIVENESS_CHECK_MS`] old, those whose owner died (answers kept in `asked`); the count left.
    fn sweep_way(
        &self,
        set: &Set<'_>,
        way: usize,
        now_ms: i64,
        check_owners: bool,
        asked: &mut Asked,
    ) -> u64 {
        let slots = self.slots(set, way);
        let check_owners = slots.check_owners(now_ms, check_owners, LIVENESS_CHECK_MS);
        let mut i = 0;
        while i < slots.count() as usize {
            let (owner, deadline) = slots.holder(i);
            let expired = deadline <= now_ms;
            let dead = !expired && check_owners && !self.alive(asked, owner);
            if expired || dead {
                set.add(if expired { S_EXPIRED } else { S_DEAD }, 1);
                self.remove(set, way, i);
            } else {
                i += 1;
            }
        }
        slots.count()
    }

    fn alive(&self, asked: &mut Asked, owner: u64) -> bool {
        if let Some(&(_, alive)) = asked.iter().find(|(id, _)| *id == owner) {
            return alive;
        }
        let alive = owner == self.table.owner.id() || self.table.owner.is_alive(owner);
        if let Some(slot) = asked.iter_mut().find(|(id, _)| *id == 0) {
            *slot = (owner, alive);
        }
        alive
    }

    /// Removes record `i` of `way`: the last record takes its place.
    fn remove(&self, set: &Set<'_>, way: usize, i: usize) {
        self.slots(set, way).remove(i);
        set.add(S_INFLIGHT, u64::MAX);
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Payload for Inflight<R, O> {
    /// A key holding no slot.
    fn is_idle(&self, set: &Set<'_>, way: usize, _: i64) -> bool {
        self.slots(set, way).count() == 0
    }

    /// The first key with no slot left once its expired ones (and dead owners', when due) are
    /// freed; none when every key holds slots: a way with slots in flight is never evicted.
    fn full(&self, set: &Set<'_>, now_ms: i64) -> Option<usize> {
        let mut asked = Asked::default();
        (0..WAYS).find(|&way| self.sweep_way(set, way, now_ms, false, &mut asked) == 0)
    }

    /// Nothing held; the key's first sweep asks about owners.
    fn clear(&self, set: &Set<'_>, way: usize, now_ms: i64) {
        let checked_ms = now_ms.saturating_sub(LIVENESS_CHECK_MS);
        self.slots(set, way).clear(checked_ms);
    }

    /// Each way's records gathered at its front and recounted ([`Slots::repair`]).
    fn repair(&self, set: &Set<'_>, held: [bool; WAYS]) {
        let max_limit = self.config.max_limit;
        let inflight = (0..WAYS)
            .map(|way| self.slots(set, way).repair(held[way], max_limit))
            .sum();
        set.set(S_INFLIGHT, inflight);
        set.add(S_REPAIRS, 1);
    }
}
