//! `slidewin.adaptive{ initial_limit, min_limit, max_limit, interval_ms, latency_target_ms }`:
//! the controller of [`slidewin::adaptive`], fed one interval at a time, and the helpers the
//! log phase needs to build its sample.
//!
//! ```lua
//! local ctl = slidewin.adaptive{ initial_limit = 20, min_limit = 2, max_limit = 500 }
//! local counts = {}                                  -- latency histogram, 1-based buckets
//! for i = 1, slidewin.latency_buckets do counts[i] = 0 end
//! local b = slidewin.latency_bucket(slidewin.upstream_time_ms(ngx.var.upstream_response_time))
//! counts[b] = counts[b] + 1
//! local limit, reason, p50, p95, p99 = ctl:update{ ok = 250, refused = 30, elapsed_ms = 1000,
//!                                                  counts = counts }
//! local words = ctl:state()       -- a string: what another process resumes from
//! ctl:restore(words)
//! ```

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::adaptive::{
    bucket_of, quantile, upstream_time_ms, Adaptive, AdaptiveConfig, Reason, Sample, BUCKETS,
    STATE_WORDS,
};

use crate::args::{self, error};

const NEW: &str = "slidewin.adaptive";
const UPDATE: &str = "ctl:update";

/// Puts `adaptive`, `upstream_time_ms`, `latency_bucket` and `latency_buckets` in the module.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    module.set("adaptive", lua.create_function(new)?)?;
    module.set("latency_buckets", BUCKETS)?;
    module.set(
        "upstream_time_ms",
        lua.create_function(|_, text: Value| match text {
            Value::String(s) => Ok(upstream_time_ms(&s.to_string_lossy())),
            _ => Ok(None),
        })?,
    )?;
    module.set(
        "latency_bucket",
        lua.create_function(|_, ms: Value| {
            let ms = args::uint("slidewin.latency_bucket", "ms", &ms)?;
            Ok(bucket_of(ms) + 1)
        })?,
    )?;
    Ok(())
}

fn new(_: &Lua, opts: Table) -> LuaResult<LuaAdaptive> {
    let defaults = AdaptiveConfig::default();
    let positive = |field: &'static str| args::field_positive(NEW, &opts, field);
    let min_limit = positive("min_limit")?.unwrap_or(defaults.min_limit);
    let max_limit = positive("max_limit")?.unwrap_or(defaults.max_limit);
    let initial_limit = positive("initial_limit")?.unwrap_or_else(|| {
        defaults
            .initial_limit
            .clamp(min_limit, max_limit.max(min_limit))
    });
    let interval_ms = match positive("interval_ms")? {
        Some(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
        None => defaults.interval_ms,
    };
    let latency_target_ms = match opts.raw_get::<Value>("latency_target_ms")? {
        Value::Nil => None,
        v => Some(args::number(NEW, "latency_target_ms", &v)?),
    };
    let config = AdaptiveConfig {
        initial_limit,
        min_limit,
        max_limit,
        interval_ms,
        latency_target_ms,
    };
    Ok(LuaAdaptive(Adaptive::new(config).map_err(args::core(NEW))?))
}

/// A field of a sample: a count (a non-negative integer), 0 when absent.
fn count(sample: &Table, field: &'static str) -> LuaResult<u64> {
    match sample.raw_get::<Value>(field)? {
        Value::Nil => Ok(0),
        v => args::uint(UPDATE, field, &v),
    }
}

/// The sample's `counts` field: the latency histogram, `latency_buckets` counts.
fn histogram(sample: &Table) -> LuaResult<Vec<u64>> {
    let counts: Table = match sample.raw_get::<Value>("counts")? {
        Value::Table(t) => t,
        other => {
            let got = args::describe(&other);
            return Err(error(
                UPDATE,
                format_args!("counts must be a table of {BUCKETS} counts, got {got}"),
            ));
        }
    };
    if counts.raw_len() != BUCKETS {
        let got = counts.raw_len();
        return Err(error(
            UPDATE,
            format_args!("counts must hold {BUCKETS} counts, got {got}"),
        ));
    }
    (1..=BUCKETS)
        .map(|i| args::uint(UPDATE, "counts[i]", &counts.raw_get::<Value>(i)?))
        .collect()
}

fn reason_name(reason: Reason) -> &'static str {
    match reason {
        Reason::Hold => "hold",
        Reason::Loss => "loss",
        Reason::Latency => "latency",
        Reason::Grow => "grow",
        Reason::Probe => "probe",
    }
}

/// The controller's object.
pub struct LuaAdaptive(Adaptive);

impl UserData for LuaAdaptive {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // `update{ ok, loss, backpressure, refused, admitted, at_limit, elapsed_ms, counts }`
        // -> limit, reason, p50_ms, p95_ms, p99_ms (the quantiles nil with no answer).
        methods.add_method_mut("update", |_, this, sample: Table| {
            let counts = histogram(&sample)?;
            let elapsed_ms = count(&sample, "elapsed_ms")?;
            let mut s = Sample {
                ok: count(&sample, "ok")?,
                loss: count(&sample, "loss")?,
                backpressure: count(&sample, "backpressure")?,
                refused: count(&sample, "refused")?,
                admitted: count(&sample, "admitted")?,
                at_limit: count(&sample, "at_limit")?,
                elapsed_ms: i64::try_from(elapsed_ms).unwrap_or(i64::MAX),
                ..Sample::default()
            };
            s.set_latencies(&counts);
            let limit = this.0.update(&s);
            let reason = reason_name(this.0.reason());
            let q = |p| quantile(&counts, p);
            Ok((limit, reason, q(0.5), q(0.95), q(0.99)))
        });
        methods.add_method("limit", |_, this, ()| Ok(this.0.limit()));
        methods.add_method("base_ms", |_, this, ()| Ok(this.0.base_ms()));
        methods.add_method("reason", |_, this, ()| Ok(reason_name(this.0.reason())));
        // Unrounded: slidewin.window_limit makes it a window's limit, rounding once.
        methods.add_method("rate_per_second", |_, this, ()| {
            Ok(this.0.rate_per_second())
        });
        // `state()` -> the state as a string of little-endian words.
        methods.add_method("state", |lua, this, ()| {
            let bytes: Vec<u8> = this
                .0
                .to_words()
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            lua.create_string(bytes)
        });
        // `restore(words)`: resumes from a `state()` string.
        methods.add_method_mut("restore", |_, this, state: mlua::LuaString| {
            let bytes = state.as_bytes();
            if bytes.len() != STATE_WORDS * 8 {
                let got = bytes.len();
                let want = STATE_WORDS * 8;
                return Err(error(
                    "ctl:restore",
                    format_args!(
                        "state must be a string of {want} bytes from ctl:state(), got {got}"
                    ),
                ));
            }
            let mut words = [0u64; STATE_WORDS];
            for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                *w = u64::from_le_bytes(chunk.try_into().expect("chunks of 8"));
            }
            this.0 = Adaptive::from_words(*this.0.config(), &words)
                .map_err(args::core("ctl:restore"))?;
            Ok(true)
        });
    }
}
