//! The single-key limiters as JS classes. Each class is a thin shell over a core
//! [`slidewin::Limiter`]; the methods are written once, generically, and stamped onto each class.

use slidewin::{arg, Decision, Limiter};
use wasm_bindgen::prelude::*;

use crate::js;

#[wasm_bindgen(typescript_custom_section)]
const DECISION_TS: &str = r#"
/** What a limiter decided. */
export interface Decision {
  /** Whether the cost fits (and, for check(), was recorded). */
  allowed: boolean;
  /** The configured limit. */
  limit: number;
  /** Cost still admissible in the window after this call. */
  remaining: number;
  /** 0 when allowed; when refused, the wait in ms until the same call fits; null: never (cost > limit). */
  retryAfterMs: number | null;
  /** Milliseconds until the window holds nothing. */
  resetAfterMs: number;
}
"#;

/// A [`Decision`] as a plain JS object (no handle to free).
fn decision_object(decision: Decision) -> JsValue {
    let object = js_sys::Object::new();
    let retry_after_ms = decision
        .retry_after_ms
        .map_or(JsValue::NULL, |ms| (ms as f64).into());
    for (key, value) in [
        ("allowed", JsValue::from_bool(decision.allowed)),
        ("limit", (decision.limit as f64).into()),
        ("remaining", (decision.remaining as f64).into()),
        ("retryAfterMs", retry_after_ms),
        ("resetAfterMs", (decision.reset_after_ms as f64).into()),
    ] {
        // Setting a property on a fresh plain object cannot fail.
        let _ = js_sys::Reflect::set(&object, &key.into(), &value);
    }
    object.into()
}

/// `now_ms` from JS (named as the core names it in errors): the given time, or `Date.now()` when omitted.
fn time_arg(now_ms: Option<f64>) -> Result<i64, JsValue> {
    js(arg::int("now_ms", now_ms.unwrap_or_else(crate::now_ms)))
}

/// `cost` from JS, 1 when omitted.
fn cost_arg(cost: Option<f64>) -> Result<u64, JsValue> {
    js(arg::uint("cost", cost.unwrap_or(1.0)))
}

/// `check` (commit) and `peek` for every limiter.
fn decide<L: Limiter>(
    limiter: &mut L,
    now_ms: Option<f64>,
    cost: Option<f64>,
    commit: bool,
) -> Result<JsValue, JsValue> {
    let (now_ms, cost) = (time_arg(now_ms)?, cost_arg(cost)?);
    let (config, state) = limiter.parts_mut();
    js(L::decide(config, state, now_ms, cost, commit)).map(decision_object)
}

/// Defines the JS class `$name` over the core limiter of the same name, with the shared methods.
macro_rules! js_limiter {
    // The doc comes as literals (one per line): wasm-bindgen copies `#[doc]` metas verbatim.
    // The constructor's arguments are named as the core names them in errors.
    ($($doc:literal)+ $name:ident($($arg:ident: $convert:ident),*)) => {
        $(#[doc = $doc])+
        #[wasm_bindgen]
        pub struct $name(slidewin::$name);

        #[wasm_bindgen]
        impl $name {
            /// A limiter for one key (arguments as in the class description).
            #[wasm_bindgen(constructor)]
            pub fn new($($arg: f64),*) -> Result<$name, JsValue> {
                js(slidewin::$name::new($(js(arg::$convert(stringify!($arg), $arg))?),*)).map(Self)
            }

            /// Decide whether `cost` (default 1) fits at `now_ms` (default `Date.now()`), and
            /// record it when it does.
            #[wasm_bindgen(unchecked_return_type = "Decision")]
            pub fn check(
                &mut self,
                now_ms: Option<f64>,
                cost: Option<f64>,
            ) -> Result<JsValue, JsValue> {
                decide(&mut self.0, now_ms, cost, true)
            }

            /// Like `check`, without recording anything.
            #[wasm_bindgen(unchecked_return_type = "Decision")]
            pub fn peek(
                &mut self,
                now_ms: Option<f64>,
                cost: Option<f64>,
            ) -> Result<JsValue, JsValue> {
                decide(&mut self.0, now_ms, cost, false)
            }

            /// Give back `cost` (default 1) recorded earlier, e.g. for a request not served.
            pub fn uncommit(
                &mut self,
                now_ms: Option<f64>,
                cost: Option<f64>,
            ) -> Result<(), JsValue> {
                js(self.0.uncommit_at(time_arg(now_ms)?, cost_arg(cost)?))
            }

            /// Forget everything recorded.
            pub fn reset(&mut self) {
                self.0.reset()
            }
        }
    };
}

js_limiter!(
    "`new SlidingLog(limit, window_ms)`: exact; never more than `limit` cost in any `window_ms`."
    SlidingLog(limit: uint, window_ms: int)
);
js_limiter!(
    "`new BucketWindow(limit, window_ms, bucket_ms)`: a ring of counters, one per `bucket_ms`"
    "(a divisor of `window_ms`); never over the limit, may refuse up to one bucket early."
    BucketWindow(limit: uint, window_ms: int, bucket_ms: int)
);
js_limiter!(
    "`new SlidingCounter(limit, window_ms)`: two fixed windows, the previous one weighted by"
    "its overlap; 24 bytes, approximate."
    SlidingCounter(limit: uint, window_ms: int)
);
