//! The stream aggregates for JS: one exported class, `Aggregate`, over a boxed core
//! [`slidewin::stream::Aggregate`], so each method crosses into wasm through one export
//! whatever the kind (per-kind exports would multiply the .wasm's size). `js/index.js` derives
//! the named classes (`SlidingMean.byCount(k)`, `new Ewma(alpha)`, ...) from it.
//!
//! Values the core leaves undefined (`None`: an empty window) are `undefined` from `value` and
//! `push`, and `NaN` inside the Float64Arrays of `pushMany`.

use alloc::boxed::Box;
use alloc::vec::Vec;

use slidewin::stream::{self, Window};
use slidewin::{arg, Error, Value};
use wasm_bindgen::prelude::*;

use crate::js;

/// A core aggregate plus the loop over many untimed samples, compiled per kind so the inner
/// loop calls the aggregate directly (no dynamic dispatch per sample). Timed samples take the
/// dynamic path in [`Aggregate::push_many`]: one copy of that loop keeps the .wasm small.
trait Shell: stream::Aggregate {
    fn push_many(&mut self, xs: &[f64]) -> Result<Vec<f64>, Error>;
}

impl<A: stream::Aggregate> Shell for A {
    fn push_many(&mut self, xs: &[f64]) -> Result<Vec<f64>, Error> {
        let mut values = Vec::with_capacity(xs.len());
        for &x in xs {
            self.push(x)?;
            values.push(self.value().unwrap_or(f64::NAN));
        }
        Ok(values)
    }
}

/// [`Aggregate::push_many`] with times: `aggregate` pushes `xs[i]` at `times[i]`.
fn push_many_at(aggregate: &mut dyn Shell, xs: &[f64], times: &[f64]) -> Result<Vec<f64>, Error> {
    if times.len() != xs.len() {
        return Err(Error::invalid(
            "times",
            "as long as xs",
            Value::UInt(times.len() as u64),
        ));
    }
    let mut values = Vec::with_capacity(xs.len());
    for (&x, &t_ms) in xs.iter().zip(times) {
        aggregate.push_at(arg::int("t_ms", t_ms)?, x)?;
        values.push(aggregate.value().unwrap_or(f64::NAN));
    }
    Ok(values)
}

/// The aggregate `kind` (a class name of js/index.js) over `window` (`"count"` or `"time"`,
/// for the sliding kinds) with its one numeric parameter (`k`, `window_ms`, `alpha`,
/// `half_life_ms`); `None` for an unknown kind.
fn new_aggregate(kind: &str, window: &str, param: f64) -> Result<Option<Box<dyn Shell>>, Error> {
    fn boxed<A: Shell + 'static>(
        aggregate: Result<A, Error>,
    ) -> Result<Option<Box<dyn Shell>>, Error> {
        Ok(Some(Box::new(aggregate?)))
    }
    let window = || match window {
        "time" => arg::int("window_ms", param).and_then(Window::time),
        _ => arg::uint("k", param).and_then(Window::count),
    };
    match kind {
        "SlidingSum" => boxed(stream::SlidingSum::new(window()?)),
        "SlidingMean" => boxed(stream::SlidingMean::new(window()?)),
        "SlidingMax" => boxed(stream::SlidingMax::new(window()?)),
        "SlidingMin" => boxed(stream::SlidingMin::new(window()?)),
        "SlidingVariance" => boxed(stream::SlidingVariance::new(window()?)),
        "SlidingStdDev" => boxed(stream::SlidingStdDev::new(window()?)),
        "Rate" => boxed(stream::Rate::new(window()?)),
        "Ewma" => boxed(stream::Ewma::new(param)),
        "TimeEwma" => boxed(arg::int("half_life_ms", param).and_then(stream::TimeEwma::new)),
        _ => Ok(None),
    }
}

/// A stream aggregate (the base class of `SlidingMean`, `Ewma`, ... in js/index.js).
#[wasm_bindgen]
pub struct Aggregate(Box<dyn Shell>);

#[wasm_bindgen]
impl Aggregate {
    /// Used by js/index.js's classes; see `new_aggregate`.
    #[wasm_bindgen(js_name = __create)]
    pub fn create(kind: &str, window: &str, param: f64) -> Result<Aggregate, JsValue> {
        match js(new_aggregate(kind, window, param))? {
            Some(aggregate) => Ok(Self(aggregate)),
            None => Err(js_sys::Error::new(&alloc::format!("no aggregate is named {kind}")).into()),
        }
    }

    /// Add sample `x` (finite) taken at `t_ms`, or, without `t_ms`, at the latest time seen
    /// (time does not pass: for count windows and `Ewma`). Returns the new value.
    pub fn push(&mut self, x: f64, t_ms: Option<f64>) -> Result<Option<f64>, JsValue> {
        match t_ms {
            Some(t_ms) => js(arg::int("t_ms", t_ms).and_then(|t_ms| self.0.push_at(t_ms, x)))?,
            None => js(self.0.push(x))?,
        }
        Ok(self.0.value())
    }

    /// Push every sample of `xs` (at the matching `times`, when given); returns the value
    /// after each sample (NaN where undefined). On a bad sample or time it throws, and the
    /// samples before it stay pushed.
    #[wasm_bindgen(js_name = pushMany)]
    pub fn push_many(
        &mut self,
        xs: &[f64],
        times: Option<Box<[f64]>>,
    ) -> Result<Vec<f64>, JsValue> {
        js(match times {
            Some(times) => push_many_at(self.0.as_mut(), xs, &times),
            None => self.0.push_many(xs),
        })
    }

    /// Correct the newest sample to `x` in place (a still-open bucket); returns the new value.
    #[wasm_bindgen(js_name = replaceLast)]
    pub fn replace_last(&mut self, x: f64) -> Result<Option<f64>, JsValue> {
        js(self.0.replace_last(x))?;
        Ok(self.0.value())
    }

    /// Let time pass to `now_ms` without a sample (a time window drops old samples); returns
    /// the value then.
    #[wasm_bindgen(js_name = valueAt)]
    pub fn value_at(&mut self, now_ms: f64) -> Result<Option<f64>, JsValue> {
        js(arg::int("now_ms", now_ms).and_then(|now_ms| self.0.value_at(now_ms)))
    }

    /// The value over the window; `undefined` when it is not defined (an empty window).
    #[wasm_bindgen(getter)]
    pub fn value(&self) -> Option<f64> {
        self.0.value()
    }

    /// Samples in the window (for EWMAs: samples folded in).
    #[wasm_bindgen(getter)]
    pub fn length(&self) -> usize {
        self.0.len()
    }

    /// Whether the window is complete (`k` samples; `window_ms` watched since the first).
    #[wasm_bindgen(getter, js_name = isFull)]
    pub fn is_full(&self) -> bool {
        self.0.is_full()
    }

    /// Forget every sample and time, keeping the configuration.
    pub fn clear(&mut self) {
        self.0.clear()
    }
}
