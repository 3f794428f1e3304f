//! WebAssembly bindings of [`slidewin`], built by `scripts/build-wasm.sh` into the `slidewin`
//! npm package (`js/`). Bindings only translate: JS numbers are checked and converted with
//! [`slidewin::arg`], every algorithm runs in the core, and every core [`slidewin::Error`]
//! becomes a JS `RangeError` carrying the core's message (never a wasm trap).
//!
//! ```js
//! import init, { SlidingLog, SlidingMean, nowMs } from "slidewin";
//! await init();
//! const limiter = new SlidingLog(100, 1000);
//! limiter.check(nowMs(), 1).allowed; // true
//! const mean = SlidingMean.byCount(3);
//! mean.pushMany(new Float64Array([1, 2, 3, 4])); // Float64Array [1, 1.5, 2, 3]
//! mean.free();
//! limiter.free();
//! ```

extern crate alloc;

use alloc::format;
use alloc::string::String;

use slidewin::{Error, Value};
use wasm_bindgen::prelude::*;

mod limiters;
mod stream;

pub use limiters::{BucketWindow, SlidingCounter, SlidingLog};
pub use stream::Aggregate;

/// The browser's (and node's) wall clock in integer milliseconds: `Date.now()`, the same scale
/// as the server side's `SystemClock` and Redis `TIME`.
#[wasm_bindgen(js_name = nowMs)]
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// A core error as the JS exception thrown for it: a `RangeError` with the core's message.
fn js_error(error: Error) -> JsValue {
    let (text, float) = message(&error);
    let message = match float {
        // JS prints the float (`1.5`, `NaN`, `Infinity`): see `message`.
        Some(v) => String::from(&js_sys::JsString::from(text).concat(&v.into())),
        None => text,
    };
    js_sys::RangeError::new(&message).into()
}

/// The core's message for `error` (the `Display` of [`Error`]), assembled here so that the
/// .wasm carries no Rust float formatting (about 10 KB of its 120 KB budget): a float argument
/// comes back separately, to be appended by JS. `tests::messages_match_the_core` keeps the
/// two in step.
fn message(error: &Error) -> (String, Option<f64>) {
    match *error {
        Error::InvalidArgument {
            name,
            expected,
            got,
        } => {
            let head = format!("{name} must be {expected}, got ");
            match got {
                Value::Int(v) => (format!("{head}{v}"), None),
                Value::UInt(v) => (format!("{head}{v}"), None),
                Value::Float(v) => (head, Some(v)),
            }
        }
        Error::OutOfOrder {
            name,
            newest_ms,
            got_ms,
        } => (
            format!(
                "{name} must not be earlier than the newest sample ({newest_ms}), got {got_ms}"
            ),
            None,
        ),
        Error::NoSample { name } => (format!("{name} needs a sample, the window is empty"), None),
        // A variant newer than this binding: its kind, without the core's float formatting.
        _ => (
            "slidewin: an error this binding does not describe yet".into(),
            None,
        ),
    }
}

/// A core result with its error turned into the JS exception.
fn js<T>(result: Result<T, Error>) -> Result<T, JsValue> {
    result.map_err(js_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_match_the_core() {
        let errors = [
            Error::invalid("window_ms", "a positive integer", Value::Int(-5)),
            Error::invalid("limit", "a positive integer", Value::UInt(0)),
            Error::invalid("x", "a finite number", Value::Float(1.5)),
            Error::invalid("alpha", "a number in (0, 1]", Value::Float(f64::NAN)),
            Error::OutOfOrder {
                name: "t_ms",
                newest_ms: 11_400,
                got_ms: 9_000,
            },
            Error::NoSample {
                name: "replace_last",
            },
        ];
        for error in errors {
            let (text, float) = message(&error);
            let float = float.map(|v| v.to_string()).unwrap_or_default();
            assert_eq!(text + &float, error.to_string());
        }
    }
}
