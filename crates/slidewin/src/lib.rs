//! # slidewin
//!
//! Sliding-window rate limiting and stream aggregates on one millisecond clock.
//!
//! Every time in this crate is an `i64` count of milliseconds from one [`Clock`]. Each
//! operation that needs the time has a `*_at(now_ms, ..)` form for callers that bring their
//! own clock (Redis `TIME`, the browser's `Date.now()`), and a form that reads a [`Clock`].
//!
//! The crate is `#![no_std]` + `alloc`; the `std` feature (default) adds [`SystemClock`],
//! the `serde` feature derives `Serialize`/`Deserialize` for configs and state snapshots.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod arg;
pub mod buckets;
pub mod clock;
pub mod counter;
pub mod decision;
pub mod error;
pub mod keyed;
pub mod limiter;
pub mod log;
pub mod quota;
pub mod stream;
mod window;

pub use buckets::{BucketQuota, BucketState, BucketWindow};
#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use clock::{Clock, ManualClock};
pub use counter::{CounterState, SlidingCounter};
pub use decision::Decision;
pub use error::{Error, Value};
#[cfg(feature = "std")]
pub use keyed::ShardedKeyed;
pub use keyed::{Keyed, KeyedStats};
pub use limiter::Limiter;
pub use log::{LogState, SlidingLog};
pub use quota::Quota;
