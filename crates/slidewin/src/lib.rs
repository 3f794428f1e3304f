//! # slidewin
//!
//! Sliding-window rate limiting and stream aggregates on one millisecond clock.
//!
//! Every time in this crate is an `i64` count of milliseconds from one [`Clock`]. Each
//! operation that needs the time has a `*_at(now_ms, ..)` form for callers that bring their
//! own clock (Redis `TIME`, the browser's `Date.now()`), and a form that reads a [`Clock`].
//!
//! ## Rate limiting
//!
//! Three limiters share the [`Limiter`] trait: [`SlidingLog`] (exact), [`BucketWindow`] (fixed
//! memory, conservative) and [`SlidingCounter`] (24 bytes per key, an estimate). The README's
//! example:
//!
//! ```
//! use slidewin::{Limiter, SlidingLog, SystemClock};
//!
//! fn main() -> Result<(), slidewin::Error> {
//!     let mut limiter = SlidingLog::new(100, 1_000)?; // 100 per 1000 ms, exact
//!     let decision = limiter.check(&SystemClock, 1)?; // a call of cost 1, now
//!     match decision.retry_after_ms {
//!         _ if decision.allowed => println!("ok, {} left", decision.remaining),
//!         Some(ms) => println!("429, retry after {ms} ms"),
//!         None => println!("413, more than the limit"),
//!     }
//!     Ok(())
//! }
//! ```
//!
//! Many keys: [`Keyed`] in one process, [`shared::Zone`] in a region of shared memory for
//! several processes (the workers of one nginx), both over the same algorithms; a host asks
//! either, or a rule of a [`shared::Directory`], the same questions through [`store::Store`].
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (default) adds [`SystemClock`],
//! the `serde` feature derives `Serialize`/`Deserialize` for configs and state snapshots.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod adaptive;
pub mod arg;
mod assessment;
pub mod buckets;
#[cfg(feature = "calendar")]
pub mod calendar;
pub mod clock;
pub mod counter;
pub mod decision;

pub mod error;
pub mod headers;
pub mod held_policy;
pub mod keyed;
pub mod lease;
pub mod limiter;
pub mod live;
#[cfg(feature = "llm")]
pub mod llm;
pub mod log;
pub mod prometheus;
pub mod queue;
pub mod quota;
pub mod reservation;
pub mod rule;
pub mod shared;
pub mod status;
pub mod storage;
pub mod store;
pub mod stream;
mod window;
pub mod window_name;
pub mod window_spec;

pub use buckets::{BucketQuota, BucketState, BucketWindow};
#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use clock::{Clock, ManualClock};
pub use counter::{CounterState, SlidingCounter};
pub use decision::{Call, Decision};
pub use error::{Error, Value};
#[cfg(feature = "std")]
pub use keyed::ShardedKeyed;
pub use keyed::{Keyed, KeyedStats};
pub use limiter::Limiter;
pub use log::{LogState, SlidingLog};
pub use quota::Quota;
