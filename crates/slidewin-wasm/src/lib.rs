//! WebAssembly bindings of [`slidewin`], built by `scripts/build-wasm.sh` into the `slidewin`
//! npm package (`js/`). Bindings only translate: JS numbers are checked and converted with
//! [`slidewin::arg`], every algorithm runs in the core, every core [`slidewin::Error`] becomes a
//! JS `RangeError` carrying the core's message (never a wasm trap).
//!
//! ```js
//! import init, { SlidingMean, nowMs } from "slidewin";
//! await init();
//! const mean = SlidingMean.byCount(3);
//! mean.pushMany(new Float64Array([1, 2, 3, 4])); // Float64Array [1, 1.5, 2, 3]
//! mean.free();
//! ```

use wasm_bindgen::prelude::*;

/// The browser's (and node's) wall clock in integer milliseconds: `Date.now()`, the same scale
/// as the server side's `SystemClock` and Redis `TIME`.
#[wasm_bindgen(js_name = nowMs)]
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}
