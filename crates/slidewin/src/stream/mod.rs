//! Stream aggregates over the last `k` samples or the last `window_ms` milliseconds.
//!
//! Every aggregate implements [`Aggregate`]: `push_at(t_ms, x)` (or `push(x)`), then
//! `value()`; `replace_last(x)` corrects the newest sample in place (a live candle, an open
//! time bucket) in O(1); `advance_to(now_ms)` / `value_at(now_ms)` let time pass so a time
//! window empties without samples. An empty window's value is `None`, a partial window's is
//! the aggregate of what is there. NaN or infinite samples, out-of-order times and bad
//! configurations are [`Error`](crate::Error)s naming the argument and leave the aggregate as it was.
//!
//! | aggregate | cost per sample | note |
//! |---|---|---|
//! | [`SlidingMax`], [`SlidingMin`] | amortised O(1) | two-stack queue, branch-free |
//! | [`SlidingSum`], [`SlidingMean`], [`Rate`] | amortised O(1) | compensated, no drift |
//! | [`SlidingVariance`], [`SlidingStdDev`] (+ population forms) | amortised O(1) | shifted, compensated |
//! | [`SlidingWma`] | amortised O(1) | weights 1..n, compensated |
//! | [`Bollinger`] | amortised O(1) | mean ± width × population SD |
//! | [`SlidingQuantile`] | O(log k) | exact p50/p95/p99/any q (linear interpolation) |
//! | [`Ewma`], [`Ema`], [`TimeEwma`] | O(1) | per sample (alpha, or period with SMA/first seeding) / half-life in ms |
//!
//! Memory: a sliding aggregate keeps the window's samples (and their times, for time windows)
//! plus its accumulator, at most one more `f64` per sample. With the `serde` feature every
//! aggregate (configuration and state) serialises and restores to the same results; a restored
//! window is checked like a new one. For bit-exact JSON, parse floats exactly (serde_json's
//! `float_roundtrip` feature).
//!
//! The window kinds are written once, in [`Sliding`], and every sliding aggregate is a
//! `Sliding<A>` over an [`Accumulator`] `A`; [`Window`] describes the window and is checked by
//! `new`. The batch functions ([`sliding_max`], [`sliding_mean`], [`ewma`], ...) run the same
//! code over a slice.
//!
//! ```
//! use slidewin::stream::{Aggregate, SlidingMean, SlidingMax, Window};
//!
//! // Mean of the last 3 samples, corrected while the newest is still open.
//! let mut mean = SlidingMean::new(Window::Count(3))?;
//! for x in [1.0, 2.0, 3.0, 4.0] {
//!     mean.push(x)?;
//! }
//! assert_eq!(mean.value(), Some(3.0));
//! mean.replace_last(7.0)?;
//! assert_eq!(mean.value(), Some(4.0));
//!
//! // Max over the last second of a dashboard series, as time passes.
//! let mut max = SlidingMax::new(Window::Time(1_000))?;
//! max.push_at(10_000, 5.0)?;
//! max.push_at(10_400, 2.0)?;
//! assert_eq!(max.value_at(10_999)?, Some(5.0));
//! assert_eq!(max.value_at(11_000)?, Some(2.0));
//! assert_eq!(max.value_at(11_400)?, None);
//! assert_eq!(
//!     max.push_at(9_000, 1.0).unwrap_err().to_string(),
//!     "t_ms must not be earlier than the newest sample (11400), got 9000"
//! );
//! assert_eq!(
//!     max.push_at(12_000, f64::NAN).unwrap_err().to_string(),
//!     "x must be a finite number, got NaN"
//! );
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! Bindings can hold any of them as `Box<dyn Aggregate>`:
//!
//! ```
//! use slidewin::stream::{Aggregate, Ewma, Rate, SlidingStdDev, Window};
//! let window = Window::time(60_000)?;
//! let mut panel: Vec<Box<dyn Aggregate>> = vec![
//!     Box::new(Rate::new(window)?),
//!     Box::new(SlidingStdDev::new(window)?),
//!     Box::new(Ewma::new(0.1)?),
//! ];
//! for aggregate in &mut panel {
//!     aggregate.push_at(1_000, 2.0)?;
//!     aggregate.push_at(2_000, 4.0)?;
//! }
//! let values: Vec<_> = panel.iter().map(|a| a.value()).collect();
//! assert_eq!(values[0], Some(0.1)); // 6 per minute
//! # Ok::<(), slidewin::Error>(())
//! ```

mod aggregate;
mod batch;
mod bollinger;
mod compensated;
mod extreme;
mod quantile;
mod samples;
mod sliding;
mod smoothing;
mod sum;
mod variance;
mod weighted;
mod window;

pub use aggregate::{Aggregate, Bands};
pub use batch::{ewma, sliding, sliding_max, sliding_mean, sliding_min, sliding_sum};
pub use bollinger::Bollinger;
pub use compensated::{Compensated, Wide};
pub use extreme::{Extreme, SlidingMax, SlidingMin};
pub use quantile::{Quantile, SlidingQuantile};
pub use sliding::{Accumulator, Sliding};
pub use smoothing::{Alpha, Ema, Ewma, HalfLife, Period, Seed, Smoothed, TimeEwma, Weighting};
pub use sum::{Mean, PerSecond, Rate, Reading, SlidingMean, SlidingSum, Sum, Total};
pub use variance::{
    Moments, PopulationStdDev, PopulationVariance, SampleStdDev, SampleVariance,
    SlidingPopulationStdDev, SlidingPopulationVariance, SlidingStdDev, SlidingVariance,
};
pub use weighted::{SlidingWma, Weighted};
pub use window::Window;
