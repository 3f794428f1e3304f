//! The stream aggregates for JS: one exported class, `Aggregate`, over a boxed core
//! [`slidewin::stream::Aggregate`], so each method crosses into wasm through one export
//! whatever the kind (per-kind exports would multiply the .wasm's size). `js/index.js` derives
//! the named classes (`SlidingMean.byCount(k)`, `new Ewma(alpha)`, ...) from it.
//!
//! Values the core leaves undefined (`None`: an empty window) are `undefined` from `value` and
//! `push`, and `NaN` inside the Float64Arrays of `pushMany`.
//!
//! The one method a dashboard calls per sample, `push(x)`, has a fast path: `__push` takes and
//! returns a plain `f64` (NaN for undefined), which V8 calls without building a result array;
//! js/index.js checks `x` is finite first, so the core cannot refuse it.

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

    /// Push the finite `x` (js/index.js checks it) and read the value, NaN when undefined: one
    /// indirect call per sample, the rest inlined.
    fn push_value(&mut self, x: f64) -> f64;

    /// Push the finite samples `xs` (js/index.js checks them), reading nothing.
    fn push_all(&mut self, xs: &[f64]);
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

    fn push_value(&mut self, x: f64) -> f64 {
        // An untimed finite sample is never refused (`push` is at the latest time).
        let _ = self.push(x);
        self.value().unwrap_or(f64::NAN)
    }

    fn push_all(&mut self, xs: &[f64]) {
        for &x in xs {
            let _ = self.push(x);
        }
    }
}

/// The value after each sample of `xs` pushed by `push` (at `times[i]`, when given), each
/// made of `width` numbers by `read` (NaN where undefined).
fn push_each(
    aggregate: &mut dyn Shell,
    xs: &[f64],
    times: Option<&[f64]>,
    read: fn(&dyn Shell, &mut Vec<f64>),
    width: usize,
) -> Result<Vec<f64>, Error> {
    let mut values = Vec::with_capacity(xs.len() * width);
    for (i, &x) in xs.iter().enumerate() {
        match times {
            Some(times) => aggregate.push_at(arg::int("t_ms", times[i])?, x)?,
            None => aggregate.push(x)?,
        }
        read(aggregate, &mut values);
    }
    Ok(values)
}

/// Checks `times` is as long as `xs`.
fn same_length(xs: &[f64], times: &[f64]) -> Result<(), Error> {
    if times.len() != xs.len() {
        return Err(Error::invalid(
            "times",
            "as long as xs",
            Value::UInt(times.len() as u64),
        ));
    }
    Ok(())
}

/// Appends the lower, middle and upper band (NaN each when there is none).
fn read_bands(aggregate: &dyn Shell, out: &mut Vec<f64>) {
    match aggregate.bands() {
        Some(b) => out.extend([b.lower, b.middle, b.upper]),
        None => out.extend([f64::NAN; 3]),
    }
}

/// Appends the value (NaN when undefined).
fn read_value(aggregate: &dyn Shell, out: &mut Vec<f64>) {
    out.push(aggregate.value().unwrap_or(f64::NAN));
}

/// The aggregate `kind` (a class of js/index.js) with `mode` (its window, `"count"` or `"time"`, for the
/// sliding kinds; the seed, `"sma"` or `"first"`, for `Ema`) with its numeric parameter (`k`,
/// `window_ms`, `alpha`, `period`, `half_life_ms`) and, for some, a second one (`q` of a
/// quantile, `width` of Bollinger bands); `None` for an unknown kind.
fn new_aggregate(
    kind: &str,
    mode: &str,
    param: f64,
    extra: Option<f64>,
) -> Result<Option<Box<dyn Shell>>, Error> {
    fn boxed<A: Shell + 'static>(
        aggregate: Result<A, Error>,
    ) -> Result<Option<Box<dyn Shell>>, Error> {
        Ok(Some(Box::new(aggregate?)))
    }
    let window = || match mode {
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
        "SlidingPopulationVariance" => boxed(stream::SlidingPopulationVariance::new(window()?)),
        "SlidingPopulationStdDev" => boxed(stream::SlidingPopulationStdDev::new(window()?)),
        "SlidingWma" => boxed(stream::SlidingWma::new(window()?)),
        "SlidingQuantile" => boxed(stream::SlidingQuantile::with_q(
            window()?,
            extra.unwrap_or(f64::NAN),
        )),
        "Bollinger" => boxed(stream::Bollinger::new(window()?, extra.unwrap_or(2.0))),
        "Rate" => boxed(stream::Rate::new(window()?)),
        "Ewma" => boxed(stream::Ewma::new(param)),
        "Ema" => {
            let seed = match mode {
                "sma" => stream::Seed::Sma,
                _ => stream::Seed::First,
            };
            boxed(arg::uint("period", param).and_then(|p| stream::Ema::new(p, seed)))
        }
        "TimeEwma" => boxed(arg::int("half_life_ms", param).and_then(stream::TimeEwma::new)),
        _ => Ok(None),
    }
}

/// A stream aggregate (the base class of `SlidingMean`, `Ewma`, ... in js/index.js).
#[wasm_bindgen]
pub struct Aggregate(Box<dyn Shell>);

#[wasm_bindgen]
impl Aggregate {
    /// Called by the constructors of js/index.js's classes; see `new_aggregate`.
    #[wasm_bindgen(constructor)]
    pub fn new(
        kind: &str,
        mode: &str,
        param: f64,
        extra: Option<f64>,
    ) -> Result<Aggregate, JsValue> {
        match js(new_aggregate(kind, mode, param, extra))? {
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

    /// `push(x)` for a finite `x` (checked by js/index.js): the value, NaN when undefined.
    #[wasm_bindgen(js_name = __push)]
    pub fn push_finite(&mut self, x: f64) -> f64 {
        self.0.push_value(x)
    }

    /// Push the finite samples `xs` (checked by js/index.js's `add`, which buffers them).
    #[wasm_bindgen(js_name = __pushAll)]
    pub fn push_all(&mut self, xs: &[f64]) {
        self.0.push_all(xs)
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
            Some(times) => same_length(xs, &times)
                .and_then(|()| push_each(self.0.as_mut(), xs, Some(&times), read_value, 1)),
            None => self.0.push_many(xs),
        })
    }

    /// Like `pushMany`, for aggregates with bands: lower, middle and upper after each sample,
    /// one after the other (NaN where undefined).
    #[wasm_bindgen(js_name = __pushManyBands)]
    pub fn push_many_bands(
        &mut self,
        xs: &[f64],
        times: Option<Box<[f64]>>,
    ) -> Result<Vec<f64>, JsValue> {
        if let Some(times) = &times {
            js(same_length(xs, times))?;
        }
        js(push_each(
            self.0.as_mut(),
            xs,
            times.as_deref(),
            read_bands,
            3,
        ))
    }

    /// Lower, middle and upper band, for aggregates with bands; `undefined` otherwise.
    #[wasm_bindgen(getter, js_name = __bands)]
    pub fn bands(&self) -> Option<Vec<f64>> {
        self.0
            .bands()
            .map(|b| alloc::vec![b.lower, b.middle, b.upper])
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
