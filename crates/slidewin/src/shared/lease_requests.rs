//! What a request does to its key's lease ([`Leases`]): spend from it (or wait for the
//! call in flight, or take Redis's last refusal), install a lease call's answer or its
//! failure, give units back, drop the settlements Redis took. The lease table itself, its
//! calls, its ended leases and its sweep: leases.rs.

use core::sync::atomic::AtomicU64;

use super::answers::{Admitted, Fetch, Spent};
use super::lease_way::{L_LIMITS, L_RECORDED, L_REMOTE, L_SPENT, R_UNTIL};
use super::leases::{Leases, H_CACHED, H_GRANTED, H_LOCAL, H_SPENT};
use super::lock::Owner;
use super::region;
use crate::clock::check_time;
use crate::lease::{Grant, Lease, Settlement, Spend};
use crate::Error;

impl<R: AsRef<[AtomicU64]>, O: Owner> Leases<R, O> {
    /// Spends `cost` of `key`'s lease at `now_ms` (the node's monotonic clock) under
    /// `limits` (a lease granted under other limits ends first); see [`Spent`].
    pub fn spend_at(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        limits: &[u64],
    ) -> Result<Spent, Error> {
        self.spend(key, now_ms, cost, limits, false)
    }

    /// As [`Leases::spend_at`], for a caller that sends a call wanting its cost alone as a
    /// check ahead ([`LeaseConfig::ahead_ms`], installed with
    /// [`Leases::install_recorded_at`]): such a call is not claimed, since it brings nothing
    /// for another request of the key to wait for (and leaves nothing to settle): the key's
    /// other requests make their own.
    ///
    /// [`LeaseConfig::ahead_ms`]: crate::lease::LeaseConfig::ahead_ms
    pub fn spend_ahead_at(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        limits: &[u64],
    ) -> Result<Spent, Error> {
        self.spend(key, now_ms, cost, limits, self.config.ahead_ms().is_some())
    }

    fn spend(
        &self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        limits: &[u64],
        ahead: bool,
    ) -> Result<Spent, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let limits = region::fingerprint(limits.iter().copied());
        let (set, way) = self.holding(key, now_ms);
        self.table.touch(&set, way, now_ms);
        let way = self.way(&set, way);
        let mut lease = way.lease();
        if lease.seq != 0 && way.get(L_LIMITS) != limits {
            self.end_current(&way, &lease, now_ms);
            lease = Lease::default();
        }
        match lease.spend(&self.config, now_ms, cost) {
            Spend::Spent => {
                way.spent(&lease);
                self.table.header().count(H_SPENT, cost);
                self.table.header().count(H_LOCAL, 1);
                let wanted = lease.wants_next(&self.config, now_ms, way.get(L_REMOTE));
                let prefetch =
                    (wanted && !way.claimed(now_ms)).then(|| self.claim(&way, now_ms, 0));
                Ok(way.admitted(&lease, now_ms, prefetch))
            }
            Spend::Short | Spend::Ended => {
                if lease.seq != 0 {
                    self.end_current(&way, &lease, now_ms);
                }
                if let Some(refused) = way.refused(now_ms, cost, limits) {
                    self.table.header().count(H_LOCAL, 1);
                    self.table.header().count(H_CACHED, 1);
                    return Ok(refused);
                }
                if way.claimed(now_ms) {
                    return Ok(Spent::Wait);
                }
                let fetch = self.claim(&way, now_ms, cost);
                if ahead && cost > 0 && fetch.want == cost {
                    way.release(fetch.seq);
                }
                Ok(Spent::Fetch(fetch))
            }
        }
    }

    /// Takes Redis's answer `grant` to `fetch` at `now_ms`, for a caller whose request costs
    /// `cost` (0: a prefetch) under `limits`: the request admitted, spent from the new lease,
    /// or `None` when it was refused, or when the answer came after `V - margin` (the lease
    /// can no longer be spent: it is settled with nothing spent).
    pub fn install_at(
        &self,
        key: &[u8],
        fetch: &Fetch,
        now_ms: i64,
        cost: u64,
        limits: &[u64],
        grant: &Grant,
    ) -> Result<Option<Admitted>, Error> {
        self.install(key, fetch, now_ms, cost, limits, grant, false)
    }

    /// As [`Leases::install_at`], for a call that wanted its cost alone (`fetch.want` ==
    /// `cost`) sent as a check ahead ([`LeaseConfig::ahead_ms`]): Redis recorded the cost at
    /// `g + ahead`, so the grant is spent at once, only within
    /// [`LeaseConfig::ahead_spend_ms`] of the send (else `None`: answered too late), never
    /// refunded into nor settled. The key's spend rate is still learnt from it.
    ///
    /// [`LeaseConfig::ahead_ms`]: crate::lease::LeaseConfig::ahead_ms
    /// [`LeaseConfig::ahead_spend_ms`]: crate::lease::LeaseConfig::ahead_spend_ms
    pub fn install_recorded_at(
        &self,
        key: &[u8],
        fetch: &Fetch,
        now_ms: i64,
        cost: u64,
        limits: &[u64],
        grant: &Grant,
    ) -> Result<Option<Admitted>, Error> {
        self.install(key, fetch, now_ms, cost, limits, grant, true)
    }

    #[allow(clippy::too_many_arguments)]
    fn install(
        &self,
        key: &[u8],
        fetch: &Fetch,
        now_ms: i64,
        cost: u64,
        limits: &[u64],
        grant: &Grant,
        recorded: bool,
    ) -> Result<Option<Admitted>, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let limits = region::fingerprint(limits.iter().copied());
        let (set, way) = self.holding(key, now_ms);
        let way = self.way(&set, way);
        way.release(fetch.seq);
        way.drop_sent(fetch.seq);
        if grant.granted == 0 {
            if let Some(retry) = grant.retry_after_ms.filter(|&r| r > 0) {
                way.refuse(now_ms, retry, cost, grant, limits);
            }
            return Ok(None);
        }
        self.table.header().count(H_GRANTED, grant.granted);
        let validity_ms = fetch.validity_ms.clamp(1, self.config.max_validity_ms());
        let mut lease = Lease::granted(fetch.seq, grant.granted, fetch.sent_ms, validity_ms);
        let round_trip_ms = now_ms.saturating_sub(fetch.sent_ms).max(0);
        let late = recorded && round_trip_ms > self.config.ahead_spend_ms();
        if late || lease.spend(&self.config, now_ms, cost) != Spend::Spent {
            if !recorded && !lease.is_live(&self.config, now_ms) {
                self.raise_validity(validity_ms, round_trip_ms as u64);
            }
            self.end(&way, &lease, recorded, now_ms);
            return Ok(None);
        }
        self.table.header().count(H_SPENT, cost);
        way.put(R_UNTIL, 0);
        let current = way.lease();
        if current.seq != 0 && current.sent_ms > lease.sent_ms {
            // A later call's lease is in place: keep it, settle this one.
            self.end(&way, &lease, recorded, now_ms);
            return Ok(Some(Admitted {
                remaining: current.unspent() + way.get(L_REMOTE),
            }));
        }
        if current.seq != 0 {
            self.end_current(&way, &current, now_ms);
        }
        way.hold(&lease, grant, limits, recorded, now_ms);
        if !recorded {
            self.due_when_spent(&set, &lease);
        }
        Ok(Some(Admitted {
            remaining: lease.unspent() + grant.remaining,
        }))
    }

    /// The lease call `fetch` failed (an error, a timeout, too few replicas): the lease, if
    /// Redis granted it, is never spent and goes to the settle list with nothing spent.
    pub fn fail_at(&self, key: &[u8], fetch: &Fetch, now_ms: i64) -> Result<(), Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let (set, way) = self.holding(key, now_ms);
        let way = self.way(&set, way);
        way.release(fetch.seq);
        let nothing = Settlement {
            seq: fetch.seq,
            spent: 0,
            last_ms: 0,
        };
        way.push(&nothing, 1, now_ms);
        Ok(())
    }

    /// Redis took the settle list a call with `seq` carried: those entries are dropped.
    pub fn settled(&self, key: &[u8], seq: u64) {
        let at = self.table.seek(key, self);
        if let Some(way) = at.way {
            self.way(&at.set, way).drop_sent(seq);
        }
    }

    /// Gives `cost` back to `key`'s lease (an admission whose work was not done): false when
    /// the lease it came from is gone (then Redis must be told).
    pub fn refund_at(&self, key: &[u8], now_ms: i64, cost: u64) -> Result<bool, Error> {
        let now_ms = check_time("now_ms", now_ms)?;
        let at = self.table.seek(key, self);
        let Some(way) = at.way else {
            return Ok(false);
        };
        let way = self.way(&at.set, way);
        let lease = way.lease();
        // Units of a check ahead are spent only within its shorter time: Redis takes them back.
        let recorded = way.get(L_RECORDED) != 0;
        if recorded || !lease.is_live(&self.config, now_ms) || lease.spent < cost {
            return Ok(false);
        }
        way.put(L_SPENT, lease.spent - cost);
        Ok(true)
    }
}
