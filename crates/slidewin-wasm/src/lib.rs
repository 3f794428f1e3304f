//! WebAssembly bindings of [`slidewin`], built by `scripts/build-wasm.sh` into the `slidewin`
//! npm package (`js/`). Bindings only translate: JS numbers are checked and converted with
//! [`slidewin::arg`], every algorithm runs in the core, and every core [`slidewin::Error`]
//! becomes a JS `RangeError` carrying the core's message (never a wasm trap).
//!
//! ```js
//! import init, { SlidingLog, nowMs } from "slidewin";
//! await init();
//! const limiter = new SlidingLog(100, 1000);
//! limiter.check(nowMs(), 1).allowed; // true
//! limiter.free();
//! ```

use wasm_bindgen::prelude::*;

mod limiters;

pub use limiters::{BucketWindow, SlidingCounter, SlidingLog};

/// The browser's (and node's) wall clock in integer milliseconds: `Date.now()`, the same scale
/// as the server side's `SystemClock` and Redis `TIME`.
#[wasm_bindgen(js_name = nowMs)]
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// A core error as the JS exception thrown for it: a `RangeError` with the core's message.
fn js_error(error: slidewin::Error) -> JsValue {
    js_sys::RangeError::new(&error.to_string()).into()
}

/// A core result with its error turned into the JS exception.
fn js<T>(result: Result<T, slidewin::Error>) -> Result<T, JsValue> {
    result.map_err(js_error)
}
