//! A node's leases over a shared region: [`Leases`], its header and the life of a key's
//! lease (claimed calls, ended leases to settle, the sweep, the counters); what a request
//! does to its key's lease is in lease_requests.rs, a way's words in lease_way.rs.

use alloc::vec::Vec;
use core::sync::atomic::AtomicU64;

use super::answers::{Fetch, LeaseStats};
use super::keys::Stored;
use super::lease_way::{due, Way, LEASE_WORDS, S_DUE};
use super::lease_way::{L_RECORDED, L_REMOTE, L_SEQ, R_UNTIL};
use super::lock::Owner;
use super::region::Attached;
use super::table::{check_key_bytes, Cut, Payload, Set, Table, WAYS};
use crate::clock::check_time;
use crate::lease::{next_rate, want, Lease, LeaseConfig};
use crate::Error;

const HEADER_WORDS: usize = 16;
const MAGIC: u64 = u64::from_le_bytes(*b"slidewl2");
// Header words after the magic, fingerprint and seed (as in a Zone's).
const H_SEQ: usize = 4;
const H_SWEEP_AT: usize = 5;
const H_CALLS: usize = 6;
pub(super) const H_GRANTED: usize = 7;
pub(super) const H_SPENT: usize = 8;
const H_RETURNED: usize = 9;
const H_EXPIRED: usize = 10;
pub(super) const H_LOCAL: usize = 11;
pub(super) const H_CACHED: usize = 12;
const H_REPAIRS: usize = 13;
const H_EVICTIONS: usize = 14;
// The V of the next lease calls, raised when calls come late (0: the configured V).
const H_VALIDITY: usize = 15;

/// A sweep returns a key's unspent units when they are at least 1/WORTH_A_CALL of the room
/// Redis had left at its last grant.
const WORTH_A_CALL: u64 = 8;

/// A node's leases over a shared region: every worker of one nginx spends the same lease of a
/// key ([`crate::lease`]: the rules and why they keep the limit), crash safe, bounded.
///
/// The region is cut like [`super::Zone`]'s: `sets` of [`WAYS`] keys, each set behind a lock
/// word naming its owner (a worker killed holding it is found dead by the next caller, which
/// repairs the set: torn keys dropped, impossible counts clamped). A key's way holds its
/// lease (units, spent, when its call was sent, the last spend), the fetch one worker claimed
/// ahead of time, the key's spend rate, a refusal Redis answered (until when), and up to
/// [`super::SETTLE_SLOTS`] ended leases to settle. Nothing is lost that matters to the limit: a
/// settlement dropped to make room, or with an evicted key, leaves Redis counting the units at
/// the end of their validity (later is always safe), so memory stays bounded.
///
/// Every answer is a step of the key's lease:
/// - [`Leases::spend_at`]: units taken from the lease ([`Spent::Admitted`], with a
///   [`Fetch`] to make in the background when the lease is half used and this caller claimed
///   it), a refusal Redis gave that still holds ([`Spent::Refused`]), a [`Fetch`] to make now
///   ([`Spent::Fetch`]), or, while another caller's call of the key is in flight, a word to
///   ask again shortly ([`Spent::Wait`]): a key has one call in flight per node at a time.
/// - [`Leases::install_at`] / [`Leases::fail_at`]: the lease call's answer, or its failure
///   (the lease, if granted, settled with nothing spent); [`Leases::install_recorded_at`]:
///   the answer to a check ahead (a call wanting its cost alone, which Redis records at the
///   end of the validity: a lease spent at once, never settled).
/// - [`Leases::sweep_at`]: leases that ended with units unspent, to settle without waiting
///   for the key's next call; [`Leases::settled`] once Redis took them.
///
/// [`Spent::Admitted`]: super::Spent::Admitted
/// [`Spent::Refused`]: super::Spent::Refused
/// [`Spent::Fetch`]: super::Spent::Fetch
/// [`Spent::Wait`]: super::Spent::Wait
///
/// ```
/// use core::sync::atomic::AtomicU64;
/// use slidewin::lease::{Grant, LeaseConfig};
/// use slidewin::shared::{Leases, Owner, Spent};
///
/// struct OneProcess;
/// impl Owner for OneProcess {
///     fn id(&self) -> u64 { 1 }
///     fn is_alive(&self, _: u64) -> bool { true }
/// }
///
/// let config = LeaseConfig::new(100, None, 1_000)?;
/// let words: Vec<AtomicU64> = (0..4096).map(|_| AtomicU64::new(0)).collect();
/// let (table, _) = Leases::attach(&words, config, 64, OneProcess, [7, 9])?;
/// let limits = [10];
/// // No lease yet: the caller sends a lease call, then installs Redis's answer.
/// let Spent::Fetch(fetch) = table.spend_at(b"alice", 0, 1, &limits)? else { panic!() };
/// let grant = Grant { granted: 4, remaining: 6, ..Grant::default() };
/// let admitted = table.install_at(b"alice", &fetch, 2, 1, &limits, &grant)?;
/// assert_eq!(admitted.map(|a| a.remaining), Some(9)); // 3 of the lease + 6 in Redis
/// // The next three are spent locally, with no call.
/// for now in 3..6 {
///     assert!(matches!(table.spend_at(b"alice", now, 1, &limits)?, Spent::Admitted { .. }));
/// }
/// assert!(matches!(table.spend_at(b"alice", 6, 1, &limits)?, Spent::Fetch(_)));
/// assert_eq!(table.stats().spent, 4);
/// # Ok::<(), slidewin::Error>(())
/// ```
pub struct Leases<R, O: Owner> {
    pub(super) table: Table<R, O>,
    pub(super) config: LeaseConfig,
    node_id: u64,
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Leases<R, O> {
    /// The table over `region`, keys of up to `max_key_bytes` kept as they are (longer ones
    /// as a keyed digest, which the sweep cannot name: they settle on their next call). A
    /// region laid out before for the same validity, margin, key length and size is reused,
    /// with its leases and its node id (an nginx reload keeps both); leases granted for
    /// another validity are never spent under this one.
    pub fn attach(
        region: R,
        config: LeaseConfig,
        max_key_bytes: usize,
        owner: O,
        seed: [u64; 2],
    ) -> Result<(Self, Attached), Error> {
        let region_words = region.as_ref().len();
        let cut = Cut::new(HEADER_WORDS, max_key_bytes, LEASE_WORDS, region_words)?;
        let payload = [LEASE_WORDS as u64, config.validity_ms(), config.margin_ms()];
        let fingerprint = cut.fingerprint(payload, region_words);
        let (table, attached) = Table::attach(region, cut, (MAGIC, fingerprint), seed, owner);
        let seed = table.seed;
        let leases = Self {
            table,
            config,
            node_id: (seed[0] ^ seed[1].rotate_left(32)) | 1,
        };
        Ok((leases, attached))
    }

    /// Bytes a region needs to hold at least `keys` keys of up to `max_key_bytes`.
    pub fn bytes_for(max_key_bytes: usize, keys: usize) -> Result<usize, Error> {
        check_key_bytes(max_key_bytes)?;
        Ok(Cut::bytes_for(
            HEADER_WORDS,
            max_key_bytes,
            LEASE_WORDS,
            keys,
        ))
    }

    /// Keys the region holds at once.
    pub fn capacity(&self) -> usize {
        self.table.cut.capacity()
    }

    /// The lease options it was attached with.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The node's id in lease ids: random per region, kept while the region is.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The id of the lease `seq`: `"<node id hex>-<seq>"`.
    pub fn id(&self, seq: u64) -> crate::lease::LeaseId {
        crate::lease::lease_id(self.node_id, seq)
    }

    /// Leases that ended by `now_ms` with units unspent worth a call (at least an eighth of
    /// the room Redis had left at the key's last grant), each key's settle list as a call to
    /// make (`want` 0), at most `max` keys; empty unless `period_ms` passed since the last
    /// sweep of any process (one process sweeps at a time). A key kept as a digest is left
    /// to its next call.
    pub fn sweep_at(
        &self,
        now_ms: i64,
        period_ms: i64,
        max: usize,
    ) -> Result<Vec<(Vec<u8>, Fetch)>, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let mut out = Vec::new();
        if !self.table.header().take_turn(H_SWEEP_AT, now_ms, period_ms) || max == 0 {
            return Ok(out);
        }
        let due_by_now = |set: usize| {
            let [due_ms] = self.table.totals([S_DUE], set..set + 1);
            due_ms != 0 && due_ms as i64 <= now_ms
        };
        for set in self.table.walk(0..self.table.cut.sets, self, due_by_now) {
            set.set(S_DUE, 0);
            for way in self.table.held(&set) {
                let stored = self.table.codec.stored(self.table.stored_key(&set, way));
                let way = self.way(&set, way);
                let lease = way.lease();
                let live = lease.is_live(&self.config, now_ms);
                // A lease spent out waits for the key's next call, which learns the key's rate
                // from it: ended here, its rate would be a unit per validity, not per visit.
                if lease.seq != 0 && !live && lease.unspent() > 0 {
                    self.end_current(&way, &lease, now_ms);
                } else if lease.seq != 0 && live {
                    self.due_when_spent(&set, &lease);
                }
                let unspent = way.unspent_to_settle();
                // Units worth a call of their own: a share of the room Redis had left at the
                // key's last grant. Fewer ride on the key's next call, or leave the windows at
                // g + V + W (a key far from its limit: nobody is refused for want of them).
                let worth_a_call =
                    unspent > 0 && unspent.saturating_mul(WORTH_A_CALL) >= way.get(L_REMOTE);
                match stored {
                    Some(Stored::Bytes(bytes)) if worth_a_call && out.len() < max => {
                        out.push((bytes, self.fetch(&way, now_ms, 0)));
                    }
                    _ => {}
                }
                // Looked at again unless the calls settle them first.
                if worth_a_call {
                    due(&set, now_ms.saturating_add(period_ms.max(1)));
                }
            }
            // The sets left wait for the next sweep.
            if out.len() >= max {
                break;
            }
        }
        Ok(out)
    }

    /// The header's counters (each exact, the whole a moment's view).
    pub fn stats(&self) -> LeaseStats {
        let mut stats = LeaseStats {
            validity_ms: self.validity_ms(),
            capacity: self.capacity() as u64,
            ..LeaseStats::default()
        };
        let fields = [
            H_CALLS,
            H_GRANTED,
            H_SPENT,
            H_RETURNED,
            H_EXPIRED,
            H_LOCAL,
            H_CACHED,
            H_REPAIRS,
            H_EVICTIONS,
        ];
        [
            stats.calls,
            stats.granted,
            stats.spent,
            stats.returned,
            stats.expired,
            stats.local,
            stats.refusals_cached,
            stats.repairs,
            stats.evictions,
        ] = self.table.header().values(fields);
        stats
    }

    /// The V lease calls ask for now: the configured one, raised by
    /// [`LeaseConfig::raised_validity_ms`] when a grant came too late to spend.
    pub fn validity_ms(&self) -> u64 {
        match self.table.header().get(H_VALIDITY) {
            0 => self.config.validity_ms(),
            // A region kept through a reload that lowered max_validity_ms.
            raised => raised.min(self.config.max_validity_ms()),
        }
    }

    /// A call under `validity_ms` answered `round_trip_ms` after it was sent, too late.
    pub(super) fn raise_validity(&self, validity_ms: u64, round_trip_ms: u64) {
        let raised = self.config.raised_validity_ms(validity_ms, round_trip_ms);
        self.table.header().raise(H_VALIDITY, raised);
    }

    /// The payload of `way` of `set`.
    pub(super) fn way<'s, 'z>(&self, set: &'s Set<'z>, way: usize) -> Way<'s, 'z> {
        Way::new(set, self.table.cut.payload(way))
    }

    /// The set of `key`, locked, and the key's way: its own, else one taken for it (a lease
    /// table evicts, so a new key always gets one).
    pub(super) fn holding(&self, key: &[u8], now_ms: i64) -> (Set<'_>, usize) {
        let at = self.table.seek_or_insert(key, now_ms, self);
        (at.set, at.way.unwrap_or_default())
    }

    /// Has the sweep look at `set` once `lease` can no longer be spent.
    pub(super) fn due_when_spent(&self, set: &Set<'_>, lease: &Lease) {
        let spend_ms = lease.spend_ms(&self.config);
        due(set, lease.sent_ms.saturating_add(spend_ms + 1));
    }

    /// A call for `cost` (0: ahead of time), claimed for a validity: until its answer, or its
    /// failure, or that time, the key's requests that find no units wait for it.
    pub(super) fn claim(&self, way: &Way<'_, '_>, now_ms: i64, cost: u64) -> Fetch {
        self.table.header().count(H_CALLS, 1);
        let fetch = self.fetch(way, now_ms, cost);
        way.claim(fetch.seq, now_ms.saturating_add(fetch.validity_ms as i64));
        fetch
    }

    /// A call for `way`: a new id, the units to want for `cost`, the settle list (now carried
    /// by this call).
    fn fetch(&self, way: &Way<'_, '_>, now_ms: i64, cost: u64) -> Fetch {
        let seq = self.table.header().count(H_SEQ, 1) + 1;
        let settle = way.settle_text(self.node_id, seq);
        Fetch {
            seq,
            want: want(&self.config, way.rate(), cost),
            sent_ms: now_ms,
            validity_ms: self.validity_ms(),
            settle,
        }
    }

    /// Ends the way's lease, `lease`, as `end` does.
    pub(super) fn end_current(&self, way: &Way<'_, '_>, lease: &Lease, now_ms: i64) {
        let recorded = way.get(L_RECORDED) != 0;
        self.end(way, lease, recorded, now_ms);
    }

    /// Ends `lease` (the way's, or a grant that never became it): its spend rate is learnt
    /// and, unless Redis `recorded` it, its unspent units are counted back and it goes to the
    /// settle list.
    pub(super) fn end(&self, way: &Way<'_, '_>, lease: &Lease, recorded: bool, now_ms: i64) {
        if way.get(L_SEQ) == lease.seq {
            way.put(L_SEQ, 0);
            let rate = way.rate();
            // Until the key was seen again (or swept): a key that comes back seldom is slow.
            let mut elapsed = now_ms.saturating_sub(lease.sent_ms);
            // A key with a rate (seen before) warms only with a steady stream; a new key's
            // first two requests close together warm it at once.
            if recorded && rate > 0.0 {
                elapsed = elapsed.max(self.config.sample_floor_ms());
            }
            way.set_rate(next_rate(rate, lease.spent, elapsed));
        }
        if recorded {
            return;
        }
        let unspent = lease.unspent();
        if unspent > 0 {
            // A refusal Redis gave while these units were out counted them: room may come
            // back as soon as they are settled, so the next call asks.
            way.put(R_UNTIL, 0);
        }
        self.table.header().count(H_RETURNED, unspent);
        if !lease.is_live(&self.config, now_ms) {
            self.table.header().count(H_EXPIRED, unspent);
        }
        way.push(&lease.settlement(), unspent, now_ms);
    }
}

impl<R: AsRef<[AtomicU64]>, O: Owner> Payload for Leases<R, O> {
    /// A key with no lease, nothing to settle and no refusal in force.
    fn is_idle(&self, set: &Set<'_>, way: usize, now_ms: i64) -> bool {
        self.way(set, way).is_idle(now_ms)
    }

    /// The least recently used key is evicted: its lease and settlements are left to Redis's
    /// expiry.
    fn full(&self, set: &Set<'_>, _: i64) -> Option<usize> {
        self.table.header().count(H_EVICTIONS, 1);
        Some(self.table.least_recently_used(set))
    }

    fn clear(&self, set: &Set<'_>, way: usize, _: i64) {
        self.way(set, way).clear();
    }

    /// Counts a half-written call may have left out of range clamped, and the sweep asked to
    /// look.
    fn repair(&self, set: &Set<'_>, held: [bool; WAYS]) {
        for way in (0..WAYS).filter(|&w| held[w]) {
            self.way(set, way).repair();
        }
        set.set(S_DUE, 1);
        self.table.header().count(H_REPAIRS, 1);
    }
}
