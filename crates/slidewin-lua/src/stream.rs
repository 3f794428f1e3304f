//! Stream aggregates from the core, on Lua arrays and as streaming objects.
//!
//! ```lua
//! slidewin.sliding_max({1, 3, -1, -3, 5, 3, 6, 7}, 3)   --> {3, 3, 5, 5, 6, 7}
//! slidewin.ewma({10, 20, 20}, 0.5)                        --> {10, 15, 17.5}
//! local mean = slidewin.mean{ k = 10 }                    -- or { window_ms = 60000 }
//! mean:push(4); mean:push_at(slidewin.now_ms(), 6); mean:value()
//! local smooth = slidewin.smoothed{ alpha = 0.1 }         -- or { half_life_ms = 500 }
//! local p95 = slidewin.quantile{ k = 1000, q = 0.95 }     -- exact, O(log k)
//! local bb = slidewin.bollinger{ k = 20, width = 2 }      -- bb:bands() --> lower, middle, upper
//! local ema = slidewin.ema{ period = 9, seed = "sma" }    -- or seed = "first" (the default)
//! ```
//!
//! Objects: `mean`, `sum`, `max`, `min`, `variance`, `stddev` (sample: over n - 1),
//! `population_variance`, `population_stddev` (over n), `wma`, `quantile` (with `q`),
//! `bollinger` (with `width`, default 2), `rate` (per second), `smoothed`, `ema`; methods
//! `push(x)`, `push_at(t_ms, x)`, `replace_last(x)`, `advance_to(now_ms)`, `value()` (nil for an
//! empty window), `value_at(now_ms)`, `len()`, `is_full()`, `clear()`, and `bands()` (lower,
//! middle, upper; nil when the aggregate has none).

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::stream::{self, Aggregate, Bollinger, Ema, Ewma, Rate, Seed, SlidingMax};
use slidewin::stream::{
    SlidingMean, SlidingMin, SlidingPopulationStdDev, SlidingPopulationVariance,
};
use slidewin::stream::{SlidingQuantile, SlidingStdDev, SlidingSum, SlidingVariance, SlidingWma};
use slidewin::stream::{TimeEwma, Window};
use slidewin::{arg, Error};

use crate::args::{self, error};

type Batch = fn(&[f64], usize) -> Result<Vec<f64>, Error>;
/// Makes a sliding aggregate over a window, given the number its [`Extra`] option reads (0 when
/// it has none).
type MakeWindowed = fn(Window, f64) -> Result<Box<dyn Aggregate>, Error>;

/// A second option of a windowed aggregate: its name, and its default (`None`: required).
type Extra = Option<(&'static str, Option<f64>)>;

/// Registers the batch functions and the object constructors in `module`.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    let batches: [(&str, &'static str, Batch); 4] = [
        ("sliding_max", "slidewin.sliding_max", stream::sliding_max),
        ("sliding_min", "slidewin.sliding_min", stream::sliding_min),
        (
            "sliding_mean",
            "slidewin.sliding_mean",
            stream::sliding_mean,
        ),
        ("sliding_sum", "slidewin.sliding_sum", stream::sliding_sum),
    ];
    for (name, function, batch) in batches {
        module.set(
            name,
            lua.create_function(move |_, (t, k): (Value, Value)| {
                let xs = samples(function, &t)?;
                let k = arg::uint("k", args::number(function, "k", &k)?)
                    .map_err(args::core(function))?;
                let k = usize::try_from(k).unwrap_or(usize::MAX);
                batch(&xs, k).map_err(args::core(function))
            })?,
        )?;
    }
    module.set(
        "ewma",
        lua.create_function(|_, (t, alpha): (Value, Value)| {
            let function = "slidewin.ewma";
            let xs = samples(function, &t)?;
            stream::ewma(&xs, args::number(function, "alpha", &alpha)?)
                .map_err(args::core(function))
        })?,
    )?;
    let windowed: [(&str, &'static str, Extra, MakeWindowed); 12] = [
        ("mean", "slidewin.mean", None, |w, _| {
            Ok(Box::new(SlidingMean::new(w)?))
        }),
        ("sum", "slidewin.sum", None, |w, _| {
            Ok(Box::new(SlidingSum::new(w)?))
        }),
        ("max", "slidewin.max", None, |w, _| {
            Ok(Box::new(SlidingMax::new(w)?))
        }),
        ("min", "slidewin.min", None, |w, _| {
            Ok(Box::new(SlidingMin::new(w)?))
        }),
        ("variance", "slidewin.variance", None, |w, _| {
            Ok(Box::new(SlidingVariance::new(w)?))
        }),
        ("stddev", "slidewin.stddev", None, |w, _| {
            Ok(Box::new(SlidingStdDev::new(w)?))
        }),
        (
            "population_variance",
            "slidewin.population_variance",
            None,
            |w, _| Ok(Box::new(SlidingPopulationVariance::new(w)?)),
        ),
        (
            "population_stddev",
            "slidewin.population_stddev",
            None,
            |w, _| Ok(Box::new(SlidingPopulationStdDev::new(w)?)),
        ),
        ("wma", "slidewin.wma", None, |w, _| {
            Ok(Box::new(SlidingWma::new(w)?))
        }),
        (
            "quantile",
            "slidewin.quantile",
            Some(("q", None)),
            |w, q| Ok(Box::new(SlidingQuantile::with_q(w, q)?)),
        ),
        (
            "bollinger",
            "slidewin.bollinger",
            Some(("width", Some(2.0))),
            |w, width| Ok(Box::new(Bollinger::new(w, width)?)),
        ),
        ("rate", "slidewin.rate", None, |w, _| {
            Ok(Box::new(Rate::new(w)?))
        }),
    ];
    for (name, function, extra, make) in windowed {
        module.set(
            name,
            lua.create_function(move |_, opts: Value| {
                let opts = options(function, opts)?;
                let window = match (
                    opts.raw_get::<Value>("k")?,
                    opts.raw_get::<Value>("window_ms")?,
                ) {
                    (k, Value::Nil) if !k.is_nil() => Window::count(
                        arg::uint("k", args::number(function, "k", &k)?)
                            .map_err(args::core(function))?,
                    ),
                    (Value::Nil, ms) if !ms.is_nil() => Window::time(
                        arg::int("window_ms", args::number(function, "window_ms", &ms)?)
                            .map_err(args::core(function))?,
                    ),
                    _ => return Err(error(function, "options must have one of k or window_ms")),
                };
                let extra = match extra {
                    None => 0.0,
                    Some((field, default)) => match (opts.raw_get::<Value>(field)?, default) {
                        (Value::Nil, Some(default)) => default,
                        (value, _) => args::number(function, field, &value)?,
                    },
                };
                let window = window.map_err(args::core(function))?;
                Ok(LuaAggregate(
                    make(window, extra).map_err(args::core(function))?,
                ))
            })?,
        )?;
    }
    module.set(
        "ema",
        lua.create_function(|_, opts: Value| {
            let function = "slidewin.ema";
            let opts = options(function, opts)?;
            let period = opts.raw_get::<Value>("period")?;
            let period = arg::uint("period", args::number(function, "period", &period)?)
                .map_err(args::core(function))?;
            let seed = match opts.raw_get::<Value>("seed")? {
                Value::Nil => Seed::First,
                Value::String(s) if s.as_bytes() == b"first".as_slice() => Seed::First,
                Value::String(s) if s.as_bytes() == b"sma".as_slice() => Seed::Sma,
                other => {
                    return Err(error(
                        function,
                        format_args!(
                            "seed must be \"first\" or \"sma\", got {}",
                            args::describe(&other)
                        ),
                    ))
                }
            };
            let ema = Ema::new(period, seed).map_err(args::core(function))?;
            Ok(LuaAggregate(Box::new(ema)))
        })?,
    )?;
    module.set(
        "smoothed",
        lua.create_function(|_, opts: Value| {
            let function = "slidewin.smoothed";
            let opts = options(function, opts)?;
            let aggregate: Box<dyn Aggregate> = match (
                opts.raw_get::<Value>("alpha")?,
                opts.raw_get::<Value>("half_life_ms")?,
            ) {
                (alpha, Value::Nil) if !alpha.is_nil() => Box::new(
                    Ewma::new(args::number(function, "alpha", &alpha)?)
                        .map_err(args::core(function))?,
                ),
                (Value::Nil, half_life) if !half_life.is_nil() => {
                    let ms = args::number(function, "half_life_ms", &half_life)?;
                    let ms = arg::int("half_life_ms", ms).map_err(args::core(function))?;
                    Box::new(TimeEwma::new(ms).map_err(args::core(function))?)
                }
                _ => {
                    return Err(error(
                        function,
                        "options must have one of alpha or half_life_ms",
                    ))
                }
            };
            Ok(LuaAggregate(aggregate))
        })?,
    )?;
    Ok(())
}

fn options(function: &str, opts: Value) -> LuaResult<Table> {
    match opts {
        Value::Table(t) => Ok(t),
        other => Err(error(
            function,
            format_args!("options must be a table, got {}", args::describe(&other)),
        )),
    }
}

/// A Lua array of numbers as samples: `t[i] must be a number, got ...` otherwise.
fn samples(function: &str, t: &Value) -> LuaResult<Vec<f64>> {
    let Value::Table(t) = t else {
        return Err(error(
            function,
            format_args!("t must be an array of numbers, got {}", args::describe(t)),
        ));
    };
    let mut xs = Vec::with_capacity(t.raw_len());
    for (i, value) in t.sequence_values::<Value>().enumerate() {
        xs.push(args::number(function, &format!("t[{}]", i + 1), &value?)?);
    }
    Ok(xs)
}

/// A streaming aggregate object.
struct LuaAggregate(Box<dyn Aggregate>);

impl UserData for LuaAggregate {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        let core = |method: &'static str| args::core(method);
        let time = |method: &'static str, name: &'static str, v: &Value| -> LuaResult<i64> {
            arg::int(name, args::number(method, name, v)?).map_err(args::core(method))
        };
        methods.add_method_mut("push", move |_, this, x: Value| {
            let x = args::number("agg:push", "x", &x)?;
            this.0.push(x).map_err(core("agg:push"))
        });
        methods.add_method_mut("push_at", move |_, this, (t, x): (Value, Value)| {
            let t_ms = time("agg:push_at", "t_ms", &t)?;
            let x = args::number("agg:push_at", "x", &x)?;
            this.0.push_at(t_ms, x).map_err(core("agg:push_at"))
        });
        methods.add_method_mut("replace_last", move |_, this, x: Value| {
            let x = args::number("agg:replace_last", "x", &x)?;
            this.0.replace_last(x).map_err(core("agg:replace_last"))
        });
        methods.add_method_mut("advance_to", move |_, this, now: Value| {
            let now_ms = time("agg:advance_to", "now_ms", &now)?;
            this.0.advance_to(now_ms).map_err(core("agg:advance_to"))
        });
        methods.add_method_mut("value_at", move |_, this, now: Value| {
            let now_ms = time("agg:value_at", "now_ms", &now)?;
            this.0.value_at(now_ms).map_err(core("agg:value_at"))
        });
        methods.add_method("value", |_, this, ()| Ok(this.0.value()));
        methods.add_method("bands", |_, this, ()| {
            Ok(match this.0.bands() {
                Some(b) => (Some(b.lower), Some(b.middle), Some(b.upper)),
                None => (None, None, None),
            })
        });
        methods.add_method("len", |_, this, ()| Ok(this.0.len()));
        methods.add_method("is_full", |_, this, ()| Ok(this.0.is_full()));
        methods.add_method_mut("clear", |_, this, ()| {
            this.0.clear();
            Ok(())
        });
    }
}
