//! `slidewin.prometheus_family(name, type, help)` and `slidewin.exposition()`: the core's
//! Prometheus writer ([`slidewin::prometheus`]) for `resty.slidewin.prometheus`, so the Lua
//! layer's `/metrics` and the native module's are written by one piece of code.
//!
//! ```lua
//! local REQUESTS = slidewin.prometheus_family("slidewin_requests_total", "counter", "Decisions.")
//! local out = slidewin.exposition()
//! out:sample(REQUESTS, { "limiter", "api", "outcome", "allowed" }, 12)
//! out:sample(RATIO, { "limiter", "api" }, 0.5, "_sum", "%.9g")   -- a series, a C format
//! out:text()
//! ```

use mlua::{AnyUserData, Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::prometheus::{Exposition, Family, Kind, Number};

use crate::args::error;

const FAMILY: &str = "prometheus.family";
const SAMPLE: &str = "exposition:sample";

/// A family, made once at load.
struct LuaFamily(Family);

impl UserData for LuaFamily {}

/// An exposition being written.
struct LuaExposition(Exposition);

/// `fmt` as a number format: `%.Ng` (significant digits) or `%.Nf` (decimals).
fn format_of(fmt: &str, value: f64) -> Option<Number> {
    let digits = fmt.strip_prefix("%.")?;
    let (n, kind) = digits.split_at(digits.len().checked_sub(1)?);
    let n: usize = n.parse().ok().filter(|&n| n <= 17)?;
    match kind {
        "g" => Some(Number::Significant(value, n)),
        "f" => Some(Number::Fixed(value, n)),
        _ => None,
    }
}

/// A label's value as Lua's `tostring` gives it (numbers too).
fn label(lua: &Lua, value: Value) -> LuaResult<Vec<u8>> {
    match lua.coerce_string(value.clone())? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(error(
            SAMPLE,
            format_args!(
                "a label value must be a string or a number, got {}",
                crate::args::describe(&value)
            ),
        )),
    }
}

impl UserData for LuaExposition {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method_mut(
            "sample",
            |lua,
             this,
             (family, labels, value, suffix, fmt): (
                AnyUserData,
                Table,
                f64,
                Option<String>,
                Option<String>,
            )| {
                let family = family.borrow::<LuaFamily>()?;
                let flat: Vec<Value> = labels.sequence_values().collect::<LuaResult<_>>()?;
                let mut pairs = Vec::with_capacity(flat.len() / 2);
                for pair in flat.chunks(2) {
                    let name = lua
                        .coerce_string(pair[0].clone())?
                        .map(|s| s.to_string_lossy());
                    let name =
                        name.ok_or_else(|| error(SAMPLE, "a label name must be a string"))?;
                    let value = label(lua, pair.get(1).cloned().unwrap_or(Value::Nil))?;
                    pairs.push((name, value));
                }
                let labels: Vec<(&str, &[u8])> = pairs
                    .iter()
                    .map(|(n, v)| (n.as_str(), v.as_slice()))
                    .collect();
                let number = match fmt {
                    None => Number::Float(value),
                    Some(fmt) => format_of(&fmt, value).ok_or_else(|| {
                        error(
                            SAMPLE,
                            format_args!(
                                "fmt must be \"%.Ng\" or \"%.Nf\" (N up to 17), got {fmt}"
                            ),
                        )
                    })?,
                };
                this.0
                    .sample(&family.0, &labels, number, suffix.as_deref().unwrap_or(""));
                Ok(())
            },
        );
        methods.add_method("text", |_, this, ()| Ok(this.0.text()));
    }
}

/// `slidewin.prometheus_family(name, type, help)`: errors name the argument and its value.
fn family(_: &Lua, (name, kind, help): (Value, Value, String)) -> LuaResult<LuaFamily> {
    let text = |v: &Value| match v {
        Value::String(s) => s.to_string_lossy(),
        other => crate::args::describe(other),
    };
    let name_text = match &name {
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    };
    let bad_name = || {
        error(
            FAMILY,
            format_args!("name must be a metric name, got {}", text(&name)),
        )
    };
    let name_text = name_text
        .filter(|n| Family::new(n, Kind::Untyped, "").is_ok())
        .ok_or_else(bad_name)?;
    let kind = match &kind {
        Value::String(s) => Kind::named(&s.to_string_lossy()),
        _ => None,
    }
    .ok_or_else(|| {
        error(
            FAMILY,
            format_args!("type must be a Prometheus metric type, got {}", text(&kind)),
        )
    })?;
    Family::new(&name_text, kind, &help)
        .map(LuaFamily)
        .map_err(|_| bad_name())
}

pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    module.set("prometheus_family", lua.create_function(family)?)?;
    module.set(
        "exposition",
        lua.create_function(|_, ()| Ok(LuaExposition(Exposition::new())))?,
    )?;
    Ok(())
}
