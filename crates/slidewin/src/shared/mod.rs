//! A keyed rule over one region of shared memory, for every process that maps it: the
//! workers of one nginx count each key once, exactly as one in-process [`crate::Keyed`] would.
//!
//! The region is anything that reads as a slice of [`AtomicU64`](core::sync::atomic::AtomicU64) words (the host maps the
//! memory; this crate has no `unsafe`). It holds a header and `sets` of [`WAYS`] keys each, like a set-associative cache:
//! a key's seeded hash picks its set, and each set has its own lock word, so calls on different
//! keys rarely wait for each other and a hot key only holds up the keys of its set.
//!
//! - **Same answers as in process.** A key's way holds the state of every window of the
//!   [`Rule`](crate::rule::Rule), each the limiter's own state type with its arrays in the region
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

mod answers;
mod directory;
mod evictions;
mod export;
#[cfg(feature = "fault-points")]
pub mod fault;
#[cfg(not(feature = "fault-points"))]
pub(crate) mod fault;
mod inflight;
mod inflight_way;
mod keys;
mod layout;
mod lease_requests;
mod lease_way;
mod leases;
mod limits;
mod lock;
mod region;
mod scan;
mod state;
mod table;
#[cfg(test)]
mod tests;
mod zone;

pub use answers::{Admitted, Entry, Fetch, InflightStats, LeaseStats, Spent, ZoneStats};
pub use directory::{Directory, DirectoryStats, Found, Part, GRACE_MS, PAGE_BYTES};
pub use evictions::{Evicted, EvictionWatch};
pub use export::ZoneExport;
pub use inflight::{Inflight, InflightConfig, LIVENESS_CHECK_MS};
pub use layout::{RegionKind, WindowShape};
pub use lease_way::SETTLE_SLOTS;
pub use leases::Leases;
pub use limits::LiveLimits;
pub use lock::Owner;
#[cfg(feature = "std")]
pub use lock::ProcessOwner;
#[cfg(feature = "std")]
pub use region::random_seed;
pub use region::Attached;
pub use scan::{HeavyHitter, KeyWindow, Scan, StoredKey, Usage, Walk, USAGE_BOUNDS};
pub use table::{KEY_BYTES, WAYS};
pub use zone::{Full, Zone};
