//! What the tables answer: the results and counters of [`super::Zone`], [`super::Inflight`]
//! and [`super::Leases`], for callers in any process (no words of a region in them).

use alloc::string::String;

/// Counters of a zone ([`super::Zone::stats`]), summed over its sets (for every process
/// that shares it).
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
    /// Refusals of dry runs ([`super::Zone::check_dry_run_at`]): the calls went on.
    pub would_reject: u64,
    /// New keys refused because their set was full of keys holding units
    /// ([`super::Full::Refuse`]; also counted in `rejected`).
    pub full_refusals: u64,
}

/// The answer to [`super::Inflight::enter_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Whether a slot was taken.
    pub admitted: bool,
    /// The key's slots in flight after the call (with this one when admitted).
    pub inflight: u64,
    /// The live limit the call was decided against.
    pub limit: u64,
    /// What [`super::Inflight::leave_at`] needs to give the slot back: its lease deadline.
    pub token: i64,
}

/// Counters of concurrency slots ([`super::Inflight::stats_at`]), summed over their sets (for
/// every process that shares them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InflightStats {
    /// Slots held now by live owners within their lease.
    pub inflight: u64,
    /// Calls admitted.
    pub admitted: u64,
    /// Calls refused at the limit.
    pub refused: u64,
    /// Calls refused because their key's set had no idle way for a new key.
    pub full: u64,
    /// Slots freed because their lease ran out (a leave that never came).
    pub expired: u64,
    /// Slots freed because their owner died.
    pub dead_owner: u64,
    /// Locks taken over from a dead process (its set repaired).
    pub repairs: u64,
}

/// A lease call to make: `seq` names it (the id is [`super::Leases::id`]), `want` units for
/// the script (`cost` is the caller's), `sent_ms` the node's time now, before sending, and
/// `settle` the key's ended leases (the script's `settle` option).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The sequence of the call's lease id.
    pub seq: u64,
    /// Units to ask for.
    pub want: u64,
    /// The node's monotonic ms before the call is sent.
    pub sent_ms: i64,
    /// The V to ask for ([`super::Leases::validity_ms`] when the call was claimed).
    pub validity_ms: u64,
    /// `"ID:SPENT:LAST_MS ..."`.
    pub settle: String,
}

/// The answer of [`super::Leases::spend_at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spent {
    /// Spent from the lease, with no call.
    Admitted {
        /// Units left in the lease plus Redis's room at its grant (an estimate).
        remaining: u64,
        /// When the answer's window empties, as Redis said at the grant.
        reset_after_ms: u64,
        /// The window Redis's answer described (0-based).
        window: usize,
        /// The next lease, to fetch in the background: this caller claimed it.
        prefetch: Option<Fetch>,
    },
    /// Redis refused this cost (or less) until a time not reached: no call.
    Refused {
        /// Redis's remaining at the refusal.
        remaining: u64,
        /// Until the refusal ends.
        retry_after_ms: u64,
        /// When the window empties.
        reset_after_ms: u64,
        /// The refusing window (0-based).
        window: usize,
    },
    /// No lease can pay: call Redis now.
    Fetch(Fetch),
    /// No lease can pay and another caller's call of the key is in flight: ask again shortly
    /// (its lease will likely pay; one call at a time keeps leases from ending in heaps).
    Wait,
}

/// The request a grant admitted ([`super::Leases::install_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// Units left in the lease plus Redis's room (an estimate).
    pub remaining: u64,
}

/// Counters of a lease table's header ([`super::Leases::stats`]), for every process that
/// shares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseStats {
    /// Lease calls made (foreground and background).
    pub calls: u64,
    /// Units Redis granted.
    pub granted: u64,
    /// Units spent (each an admitted request's cost).
    pub spent: u64,
    /// Units of ended leases given back unspent.
    pub returned: u64,
    /// Of those, units whose lease ran out of time.
    pub expired: u64,
    /// Decisions made with no call (spent from a lease, or a cached refusal).
    pub local: u64,
    /// Refusals answered from Redis's cached answer.
    pub refusals_cached: u64,
    /// Locks taken over from a dead process (its set repaired).
    pub repairs: u64,
    /// Keys dropped to make room (their lease is then settled by Redis's expiry).
    pub evictions: u64,
    /// The V lease calls ask for now (raised above the configured one by late answers).
    pub validity_ms: u64,
    /// Keys the table can hold.
    pub capacity: u64,
}
