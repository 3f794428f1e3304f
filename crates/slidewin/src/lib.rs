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
pub mod clock;
pub mod decision;
pub mod error;
pub mod limiter;
pub mod quota;

pub use clock::{Clock, ManualClock};
#[cfg(feature = "std")]
pub use clock::SystemClock;
pub use decision::Decision;
pub use error::{Error, Value};
pub use limiter::Limiter;
pub use quota::Quota;
