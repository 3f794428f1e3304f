//! The batch functions: one aggregate over a whole Float64Array, one call across the boundary.

use slidewin::stream::{self, Window};
use slidewin::{arg, Error};
use wasm_bindgen::prelude::*;

use crate::js;

/// `k` from JS as a `usize`: [`Window::count`] checks that it is positive and fits.
fn window_length(k: f64) -> Result<usize, Error> {
    let k = arg::uint("k", k)?;
    Window::count(k).map(|_| k as usize)
}

/// Defines `$js(xs, k)`: the core's `stream::$name` over every window of `k` samples.
macro_rules! js_sliding_batch {
    ($($name:ident as $js:literal: $what:literal),*) => {$(
        #[doc = concat!("The ", $what, " of every window of `k` consecutive samples of `xs`")]
        #[doc = "(`xs.length - k + 1` values; none when `xs` is shorter than `k`)."]
        #[wasm_bindgen(js_name = $js)]
        pub fn $name(xs: &[f64], k: f64) -> Result<Vec<f64>, JsValue> {
            js(window_length(k).and_then(|k| stream::$name(xs, k)))
        }
    )*};
}

js_sliding_batch!(
    sliding_sum as "slidingSum": "compensated sum",
    sliding_mean as "slidingMean": "mean",
    sliding_max as "slidingMax": "maximum",
    sliding_min as "slidingMin": "minimum"
);

/// The EWMA (`alpha` in (0, 1]) after each sample of `xs`.
#[wasm_bindgen]
pub fn ewma(xs: &[f64], alpha: f64) -> Result<Vec<f64>, JsValue> {
    js(stream::ewma(xs, alpha))
}
