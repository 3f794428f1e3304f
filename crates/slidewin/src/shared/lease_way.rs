//! A key's way in a node's lease table ([`super::Leases`]): its lease, Redis's last refusal,
//! the call it claimed, its spend rate and its settle list, as words of the way's payload.

use alloc::string::String;

use super::answers::{Fetch, Spent};
use super::table::Set;
use crate::lease::{Grant, Lease, Settlement};

/// Ended leases a key keeps to settle; when full, the one with the fewest units unspent (the
/// oldest of those) is dropped: Redis then counts its units at the end of its validity until
/// it leaves the longest window (safe; only those units come back later).
pub const SETTLE_SLOTS: usize = 8;

// A set's header after its lock: the earliest time a sweep has work in it (0: none).
pub(super) const S_DUE: usize = 1;

// The lease: its call's sequence, units granted and spent, when its call was sent, its last
// spend, Redis's room at the grant and when its window empties, the window, the limits'
// fingerprint, the validity its call asked for.
pub(super) const L_SEQ: usize = 0;
pub(super) const L_UNITS: usize = 1;
pub(super) const L_SPENT: usize = 2;
const L_SENT: usize = 3;
const L_LAST: usize = 4;
pub(super) const L_REMOTE: usize = 5;
const L_RESET_AT: usize = 6;
const L_WINDOW: usize = 7;
pub(super) const L_LIMITS: usize = 8;
// The call in flight that the key's requests wait for, and until when.
const L_CLAIM: usize = 9;
const L_CLAIM_UNTIL: usize = 10;
// The key's spend rate (an f64's bits).
const L_RATE: usize = 11;
// Redis's last refusal: until when, of what cost, its answer, under which limits.
pub(super) const R_UNTIL: usize = 12;
const R_COST: usize = 13;
const R_REMAINING: usize = 14;
const R_RESET_AT: usize = 15;
const R_WINDOW: usize = 16;
const R_LIMITS: usize = 17;
// 1: Redis recorded the lease's units in its windows (a check ahead): nothing to settle.
pub(super) const L_RECORDED: usize = 18;
const L_VALIDITY: usize = 19;
const L_SETTLE_N: usize = 20;
const L_SETTLE: usize = 21;
// An entry of the settle list: the lease, what it spent, its last spend, its unspent units
// (1 for a call that failed: the grant is unknown), and the call that last carried it.
const E_SEQ: usize = 0;
const E_SPENT: usize = 1;
const E_LAST: usize = 2;
const E_UNSPENT: usize = 3;
const E_SENT_BY: usize = 4;
const ENTRY_WORDS: usize = 5;
/// Words of a way's payload.
pub(super) const LEASE_WORDS: usize = L_SETTLE + SETTLE_SLOTS * ENTRY_WORDS;

/// The payload of one way of a locked set.
pub(super) struct Way<'s, 'z> {
    set: &'s Set<'z>,
    at: usize,
}

impl<'s, 'z> Way<'s, 'z> {
    /// The payload at word `at` of `set`.
    pub(super) fn new(set: &'s Set<'z>, at: usize) -> Self {
        Self { set, at }
    }

    pub(super) fn get(&self, field: usize) -> u64 {
        self.set.get(self.at + field)
    }

    pub(super) fn put(&self, field: usize, value: u64) {
        self.set.set(self.at + field, value);
    }

    /// Every word zeroed (a new key's).
    pub(super) fn clear(&self) {
        (0..LEASE_WORDS).for_each(|i| self.put(i, 0));
    }

    /// No lease, nothing to settle and no refusal in force at `now_ms`: the way can be given
    /// to another key without losing anything.
    pub(super) fn is_idle(&self, now_ms: i64) -> bool {
        self.get(L_SEQ) == 0 && self.get(L_SETTLE_N) == 0 && self.get(R_UNTIL) as i64 <= now_ms
    }

    pub(super) fn lease(&self) -> Lease {
        Lease {
            seq: self.get(L_SEQ),
            units: self.get(L_UNITS),
            spent: self.get(L_SPENT),
            sent_ms: self.get(L_SENT) as i64,
            last_ms: self.get(L_LAST),
            validity_ms: self.get(L_VALIDITY),
        }
    }

    /// `lease`, granted with `grant` under `limits` at `now_ms`, becomes the way's.
    pub(super) fn hold(
        &self,
        lease: &Lease,
        grant: &Grant,
        limits: u64,
        recorded: bool,
        now_ms: i64,
    ) {
        for (field, value) in [
            (L_SEQ, lease.seq),
            (L_UNITS, lease.units),
            (L_SPENT, lease.spent),
            (L_SENT, lease.sent_ms as u64),
            (L_LAST, lease.last_ms),
            (L_REMOTE, grant.remaining),
            (L_RESET_AT, at_ms(now_ms, grant.reset_after_ms)),
            (L_WINDOW, grant.window as u64),
            (L_LIMITS, limits),
            (L_RECORDED, recorded as u64),
            (L_VALIDITY, lease.validity_ms),
        ] {
            self.put(field, value);
        }
    }

    /// A spend of `lease` (the way's) written back.
    pub(super) fn spent(&self, lease: &Lease) {
        self.put(L_SPENT, lease.spent);
        self.put(L_LAST, lease.last_ms);
    }

    /// Redis refused `cost` under `limits` at `now_ms` until `retry_after_ms` from then.
    pub(super) fn refuse(
        &self,
        now_ms: i64,
        retry_after_ms: u64,
        cost: u64,
        grant: &Grant,
        limits: u64,
    ) {
        self.put(R_UNTIL, now_ms.saturating_add(retry_after_ms as i64) as u64);
        self.put(R_COST, cost.max(1));
        self.put(R_REMAINING, grant.remaining);
        self.put(R_RESET_AT, at_ms(now_ms, grant.reset_after_ms));
        self.put(R_WINDOW, grant.window as u64);
        self.put(R_LIMITS, limits);
    }

    /// The answer to a spend of `lease` (the way's) at `now_ms`: its units and Redis's room
    /// at the grant, with `prefetch` to make.
    pub(super) fn admitted(&self, lease: &Lease, now_ms: i64, prefetch: Option<Fetch>) -> Spent {
        Spent::Admitted {
            remaining: lease.unspent() + self.get(L_REMOTE),
            reset_after_ms: after(self.get(L_RESET_AT), now_ms),
            window: self.get(L_WINDOW) as usize,
            prefetch,
        }
    }

    /// Redis's last refusal as the answer to a spend of `cost` under `limits` at `now_ms`,
    /// while it holds (until its time, for a cost as large, under the same limits).
    pub(super) fn refused(&self, now_ms: i64, cost: u64, limits: u64) -> Option<Spent> {
        let until = self.get(R_UNTIL) as i64;
        let holds = until > now_ms && cost >= self.get(R_COST) && self.get(R_LIMITS) == limits;
        holds.then(|| Spent::Refused {
            remaining: self.get(R_REMAINING),
            retry_after_ms: (until - now_ms) as u64,
            reset_after_ms: after(self.get(R_RESET_AT), now_ms),
            window: self.get(R_WINDOW) as usize,
        })
    }

    /// Whether a call of the key is in flight: claimed by a caller within its validity.
    pub(super) fn claimed(&self, now_ms: i64) -> bool {
        self.get(L_CLAIM) != 0 && self.get(L_CLAIM_UNTIL) as i64 > now_ms
    }

    /// Call `seq` claimed until `until_ms`.
    pub(super) fn claim(&self, seq: u64, until_ms: i64) {
        self.put(L_CLAIM, seq);
        self.put(L_CLAIM_UNTIL, until_ms as u64);
    }

    /// Call `seq` answered or failed: its claim, if it had one, is released.
    pub(super) fn release(&self, seq: u64) {
        if self.get(L_CLAIM) == seq {
            self.put(L_CLAIM, 0);
        }
    }

    /// The key's spend rate, units per ms.
    pub(super) fn rate(&self) -> f64 {
        f64::from_bits(self.get(L_RATE))
    }

    pub(super) fn set_rate(&self, rate: f64) {
        self.put(L_RATE, rate.to_bits());
    }

    fn entry(&self, i: usize) -> usize {
        L_SETTLE + i * ENTRY_WORDS
    }

    /// Settlements in the list.
    pub(super) fn entries(&self) -> usize {
        (self.get(L_SETTLE_N) as usize).min(SETTLE_SLOTS)
    }

    /// Units the list holds away unspent.
    pub(super) fn unspent_to_settle(&self) -> u64 {
        (0..self.entries())
            .map(|i| self.get(self.entry(i) + E_UNSPENT))
            .sum()
    }

    /// The list as the script's `settle` option (`"ID:SPENT:LAST_MS ..."` of node `node_id`),
    /// each entry now carried by call `seq`.
    pub(super) fn settle_text(&self, node_id: u64, seq: u64) -> String {
        let mut settle = String::new();
        for i in 0..self.entries() {
            let e = self.entry(i);
            let s = Settlement {
                seq: self.get(e + E_SEQ),
                spent: self.get(e + E_SPENT),
                last_ms: self.get(e + E_LAST),
            };
            if !settle.is_empty() {
                settle.push(' ');
            }
            let _ = s.write(&mut settle, node_id);
            self.put(e + E_SENT_BY, seq);
        }
        settle
    }

    /// Redis took the settlements call `seq` carried: they leave the list.
    pub(super) fn drop_sent(&self, seq: u64) {
        let mut i = 0;
        while i < self.entries() {
            if self.get(self.entry(i) + E_SENT_BY) == seq {
                self.remove_entry(i);
            } else {
                i += 1;
            }
        }
    }

    /// Removes entry `i`: the later ones move up, so the list stays oldest first.
    fn remove_entry(&self, i: usize) {
        let n = self.entries();
        for j in i + 1..n {
            for w in 0..ENTRY_WORDS {
                self.put(self.entry(j - 1) + w, self.get(self.entry(j) + w));
            }
        }
        self.put(L_SETTLE_N, n as u64 - 1);
    }

    /// Appends a settlement (when the list is full, the one with the fewest units unspent
    /// leaves it first: a fully spent one is stamped late, an unspent one holds units away);
    /// units unspent have the sweep look at `now_ms`.
    pub(super) fn push(&self, s: &Settlement, unspent: u64, now_ms: i64) {
        if self.entries() == SETTLE_SLOTS {
            let unspent_of = |i: usize| self.get(self.entry(i) + E_UNSPENT);
            let least = (0..SETTLE_SLOTS).min_by_key(|&i| (unspent_of(i), i));
            self.remove_entry(least.unwrap_or(0));
        }
        let n = self.entries();
        let e = self.entry(n);
        for (field, value) in [
            (E_SEQ, s.seq),
            (E_SPENT, s.spent),
            (E_LAST, s.last_ms),
            (E_UNSPENT, unspent),
            (E_SENT_BY, 0),
        ] {
            self.put(e + field, value);
        }
        self.put(L_SETTLE_N, n as u64 + 1);
        if unspent > 0 {
            due(self.set, now_ms);
        }
    }

    /// After a takeover from a dead owner: counts a half-written call may have left out of
    /// range clamped.
    pub(super) fn repair(&self) {
        self.put(L_SETTLE_N, self.entries() as u64);
        if self.get(L_SPENT) > self.get(L_UNITS) {
            self.put(L_SPENT, self.get(L_UNITS));
        }
    }
}

/// Lowers the set's next sweep time to `when` (ms, at least 1).
pub(super) fn due(set: &Set<'_>, when: i64) {
    let when = when.max(1) as u64;
    let now = set.get(S_DUE);
    if now == 0 || when < now {
        set.set(S_DUE, when);
    }
}

/// `after_ms` from `now_ms`, as a time.
fn at_ms(now_ms: i64, after_ms: u64) -> u64 {
    (now_ms as u64).saturating_add(after_ms)
}

/// Ms from `now_ms` until time `at` (0 when passed).
fn after(at: u64, now_ms: i64) -> u64 {
    at.saturating_sub(now_ms as u64)
}
