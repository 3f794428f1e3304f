//! The core's formulas for the Lua layer, which computes none of its own: plain functions on
//! the module table, each checking its arguments (an error names the argument and the value).
//!
//! ```lua
//! -- A counter whose two counts live elsewhere (store shdict): 100 per 1000 ms, 100 counted
//! -- in the previous fixed window, none yet in this one, at 1001 ms.
//! local allowed, remaining, retry_after_ms, reset_after_ms =
//!     slidewin.counter_decide(100, 1000, 100, 0, 1001, 1, true) -- false, 0, 9, 999
//! slidewin.window_limit(12.5, 10000, 1000)                      -- 125 (a rate as a window's limit)
//! slidewin.window_rate(125, 10000)                              -- 12 (and back, rounded down)
//! slidewin.live_limits({ 20, 100 }, { 10, 100 }, { 5, 50 })     -- { 20, 50 } (after a reload)
//! slidewin.status_class(200, "502, 503")                        -- "backpressure"
//! slidewin.http_status(503)                                     -- 503 (nil: not a status)
//! slidewin.loss_ratio(8, 1, 1), slidewin.goodput_rps(8, 2000)   -- 0.2, 4
//! slidewin.peek_used(true, 4, 10, 2)                            -- 4 (what a peek found counted)
//! slidewin.seconds_up(1001)                                     -- 2 (a header's seconds)
//! slidewin.check_rule{ name = "api", windows = { { limit = 10, window_ms = 1000 },
//!     { limit = 100, window_ms = 3600000 } } }       -- windows named "api" and "api-1h"
//! slidewin.check_rule{ name = "api", windows = { { limit = 0, window_ms = 10 } } }
//!                                                   -- nil, "windows[1].limit must be ..."
//! slidewin.check_limits({ { max_limit = 5 } }, { 6 }, "limits")
//!                                                   -- nil, "limits[1] must be ... (5), got 6"
//! ```

use std::ffi::{c_char, c_int, CStr};
use std::panic::catch_unwind;

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Result as LuaResult, Table, Value};
use slidewin::adaptive::Sample;
use slidewin::{arg, counter, live, status, Decision, Quota};

use crate::args::{self, describe, error};
use crate::rules;

/// Puts the formulas in the module table.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    // SAFETY: counter_decide follows the Lua C API's rules (see its comment).
    module.set("counter_decide", unsafe {
        lua.create_c_function(counter_decide)?
    })?;
    module.set("window_limit", lua.create_function(window_limit)?)?;
    module.set("window_rate", lua.create_function(window_rate)?)?;
    module.set("live_limits", lua.create_function(live_limits)?)?;
    module.set("status_class", lua.create_function(status_class)?)?;
    module.set("http_status", lua.create_function(http_status)?)?;
    module.set("loss_ratio", lua.create_function(loss_ratio)?)?;
    module.set("goodput_rps", lua.create_function(goodput_rps)?)?;
    module.set("peek_used", lua.create_function(peek_used)?)?;
    module.set("seconds_up", lua.create_function(seconds_up)?)?;
    module.set("check_rule", lua.create_function(check_rule)?)?;
    module.set("check_limits", lua.create_function(check_limits)?)?;
    Ok(())
}

const COUNTER: &str = "slidewin.counter_decide";
const COUNTER_ARGS: [&str; 6] = [
    "limit",
    "window_ms",
    "previous",
    "current",
    "now_ms",
    "cost",
];

/// `counter_decide(limit, window_ms, previous, current, now_ms, cost, commit)` -> allowed,
/// remaining, retry_after_ms (nil: never), reset_after_ms: [`counter::decide_counts`] (`commit`
/// a boolean, read as Lua reads a condition). A C function: the
/// shdict store calls it on every request. Every Rust value is dropped before Lua is
/// answered or raised to, and no panic crosses (`catch_unwind`).
unsafe extern "C-unwind" fn counter_decide(state: *mut lua_State) -> c_int {
    let mut numbers = [0.0; 6];
    for (i, n) in numbers.iter_mut().enumerate() {
        let index = i as c_int + 1;
        if ffi::lua_type(state, index) != ffi::LUA_TNUMBER {
            let got = CStr::from_ptr(ffi::luaL_typename(state, index)).to_string_lossy();
            raise(
                state,
                format!("{COUNTER}: {} must be a number, got {got}", COUNTER_ARGS[i]),
            );
        }
        *n = ffi::lua_tonumber(state, index);
    }
    let commit = ffi::lua_toboolean(state, 7) != 0;
    let decided = catch_unwind(|| decide_counts(numbers, commit))
        .unwrap_or_else(|_| Err(format!("{COUNTER}: internal error")));
    match decided {
        Ok(d) => {
            ffi::lua_pushboolean(state, d.allowed as c_int);
            ffi::lua_pushnumber(state, d.remaining as f64);
            match d.retry_after_ms {
                Some(ms) => ffi::lua_pushnumber(state, ms as f64),
                None => ffi::lua_pushnil(state),
            }
            ffi::lua_pushnumber(state, d.reset_after_ms as f64);
            4
        }
        Err(message) => raise(state, message),
    }
}

/// [`counter::decide_counts`] over host numbers (limit, window_ms, previous, current, now_ms,
/// cost), each checked; for the C function and the FFI entry alike.
pub(crate) fn decide_counts(n: [f64; 6], commit: bool) -> Result<Decision, String> {
    let [limit, window_ms, previous, current, now_ms, cost] = n;
    let at = |i: usize| COUNTER_ARGS[i];
    let core = |e: slidewin::Error| format!("{COUNTER}: {e}");
    let quota = Quota::new(arg::uint(at(0), limit).map_err(core)?, {
        arg::int(at(1), window_ms).map_err(core)?
    })
    .map_err(core)?;
    counter::decide_counts(
        &quota,
        arg::uint(at(2), previous).map_err(core)?,
        arg::uint(at(3), current).map_err(core)?,
        arg::int(at(4), now_ms).map_err(core)?,
        // Beyond 2^53 every double is whole: such a cost is over any limit, and refused.
        if cost.is_finite() && cost > arg::MAX_EXACT {
            u64::MAX
        } else {
            arg::uint(at(5), cost).map_err(core)?
        },
        commit,
    )
    .map_err(core)
}

unsafe fn raise(state: *mut lua_State, message: String) -> ! {
    ffi::lua_pushlstring(state, message.as_ptr() as *const c_char, message.len());
    drop(message);
    ffi::lua_error(state)
}

const WINDOW_LIMIT: &str = "slidewin.window_limit";

/// `window_limit(per_second, window_ms, max_limit)`: [`live::window_limit`].
fn window_limit(
    _: &Lua,
    (per_second, window_ms, max_limit): (Value, Value, Value),
) -> LuaResult<u64> {
    let per_second = args::number(WINDOW_LIMIT, "per_second", &per_second)?;
    if !(per_second.is_finite() && per_second >= 0.0) {
        return Err(error(
            WINDOW_LIMIT,
            format_args!("per_second must be a finite number >= 0, got {per_second}"),
        ));
    }
    let window_ms = args::positive(WINDOW_LIMIT, "window_ms", &window_ms)?;
    let max_limit = args::positive(WINDOW_LIMIT, "max_limit", &max_limit)?;
    Ok(live::window_limit(per_second, window_ms as i64, max_limit))
}

/// `window_rate(limit, window_ms)`: [`live::per_second`].
fn window_rate(_: &Lua, (limit, window_ms): (Value, Value)) -> LuaResult<u64> {
    const F: &str = "slidewin.window_rate";
    let limit = args::positive(F, "limit", &limit)?;
    let window_ms = args::positive(F, "window_ms", &window_ms)?;
    Ok(live::per_second(limit, window_ms as i64))
}

const LIVE_LIMITS: &str = "slidewin.live_limits";

/// `live_limits(configured, set_under, live)`: [`live::after_reload`]; `set_under` and `live`
/// may be nil (none set).
fn live_limits(
    lua: &Lua,
    (configured, set_under, live): (Value, Value, Value),
) -> LuaResult<Table> {
    let configured = limits(LIVE_LIMITS, "configured", &configured)?;
    let set_under = match set_under {
        Value::Nil => Vec::new(),
        v => limits(LIVE_LIMITS, "set_under", &v)?,
    };
    let live = match live {
        Value::Nil => Vec::new(),
        v => limits(LIVE_LIMITS, "live", &v)?,
    };
    lua.create_sequence_from(
        live::after_reload(&configured, &set_under, &live)
            .iter()
            .copied(),
    )
}

/// A list of limits (non-negative integers).
fn limits(function: &'static str, name: &'static str, value: &Value) -> LuaResult<Vec<u64>> {
    let Value::Table(t) = value else {
        return Err(error(
            function,
            format_args!("{name} must be a list of limits, got {}", describe(value)),
        ));
    };
    (1..=t.raw_len())
        .map(|i| args::uint(function, name, &t.raw_get::<Value>(i)?))
        .collect()
}

const STATUS_CLASS: &str = "slidewin.status_class";

/// `status_class(status, upstream_status)` -> "ok", "loss" or "backpressure": [`status::class_of`] of
/// the status sent and the last of nginx's `$upstream_status` (nil or text).
fn status_class(_: &Lua, (sent, upstream): (Value, Value)) -> LuaResult<&'static str> {
    let sent = args::uint(STATUS_CLASS, "status", &sent)?;
    let upstream = match upstream {
        Value::Nil => None,
        Value::String(text) => status::last_status(&text.to_string_lossy()),
        other => {
            return Err(error(
                STATUS_CLASS,
                format_args!(
                    "upstream_status must be a string or nil, got {}",
                    describe(&other)
                ),
            ))
        }
    };
    Ok(status::class_of(sent, upstream).name())
}

/// `http_status(v)` -> v as an HTTP status, or nil: [`status::check`].
fn http_status(_: &Lua, v: Value) -> LuaResult<Option<u64>> {
    Ok(match v {
        Value::Integer(i) => status::check("status", i as f64).ok(),
        Value::Number(n) => status::check("status", n).ok(),
        _ => None,
    })
}

/// `loss_ratio(ok, loss, backpressure)`: [`Sample::loss_ratio`].
fn loss_ratio(_: &Lua, (ok, loss, backpressure): (Value, Value, Value)) -> LuaResult<f64> {
    const F: &str = "slidewin.loss_ratio";
    let sample = Sample {
        ok: args::uint(F, "ok", &ok)?,
        loss: args::uint(F, "loss", &loss)?,
        backpressure: args::uint(F, "backpressure", &backpressure)?,
        ..Sample::default()
    };
    Ok(sample.loss_ratio())
}

/// `goodput_rps(ok, elapsed_ms)`: [`Sample::goodput_rps`].
fn goodput_rps(_: &Lua, (ok, elapsed_ms): (Value, Value)) -> LuaResult<f64> {
    const F: &str = "slidewin.goodput_rps";
    let elapsed_ms = args::number(F, "elapsed_ms", &elapsed_ms)?;
    let sample = Sample {
        ok: args::uint(F, "ok", &ok)?,
        elapsed_ms: arg::int("elapsed_ms", elapsed_ms).map_err(args::core(F))?,
        ..Sample::default()
    };
    Ok(sample.goodput_rps())
}

/// `seconds_up(ms)`: milliseconds as whole seconds, rounded up, as every header says a time
/// ([`slidewin::headers::seconds_up`]).
fn seconds_up(_: &Lua, ms: Value) -> LuaResult<u64> {
    Ok(slidewin::headers::seconds_up(args::uint(
        "slidewin.seconds_up",
        "ms",
        &ms,
    )?))
}

/// `peek_used(allowed, remaining, limit, cost)`: [`Decision::used`] of a peek's answer.
fn peek_used(
    _: &Lua,
    (allowed, remaining, limit, cost): (Value, Value, Value, Value),
) -> LuaResult<u64> {
    const F: &str = "slidewin.peek_used";
    let Value::Boolean(allowed) = allowed else {
        return Err(error(
            F,
            format_args!("allowed must be a boolean, got {}", describe(&allowed)),
        ));
    };
    let decision = Decision {
        allowed,
        limit: args::uint(F, "limit", &limit)?,
        remaining: args::uint(F, "remaining", &remaining)?,
        retry_after_ms: None,
        reset_after_ms: 0,
        window: 0,
    };
    Ok(decision.used(args::uint(F, "cost", &cost)?))
}

/// `check_rule(conf)` -> the windows of a config (its `windows`, or its top-level algorithm,
/// limit, window_ms, bucket_ms, max_limit), checked as `slidewin.limiter` checks them and
/// completed (`{ algorithm, limit, window_ms, bucket_ms, max_limit, name }` each, named as every
/// door names them), or nil, err naming the field and the value. A config with a `lease` table
/// must have windows a lease can be counted in ([`slidewin::lease::check_windows`]).
fn check_rule(lua: &Lua, conf: Value) -> LuaResult<(Option<Table>, Option<String>)> {
    const F: &str = "slidewin.check_rule";
    let Value::Table(conf) = conf else {
        return Err(error(
            F,
            format_args!("conf must be a table, got {}", describe(&conf)),
        ));
    };
    let rule_name = match conf.raw_get::<Value>("name")? {
        Value::String(s) => s.to_string_lossy(),
        other => {
            let got = describe(&other);
            return Ok((
                None,
                Some(format!(
                    "name must be a string of letters, digits, _ . -, got {got}"
                )),
            ));
        }
    };
    let rule = match rules::parse(&conf)? {
        Ok(rule) => rule,
        Err(message) => return Ok((None, Some(message))),
    };
    let names = match rules::names(&conf, &rule_name, &rule)? {
        Ok(names) => names,
        Err(message) => return Ok((None, Some(message))),
    };
    if let Value::Table(_) = conf.raw_get::<Value>("lease")? {
        if let Err(message) = slidewin::lease::check_windows(&rule, &names) {
            return Ok((None, Some(message)));
        }
    }
    let windows = rules::windows_table(lua, &rule, &rule.limits(), Some(&names))?;
    Ok((Some(windows), None))
}

/// `check_limits(windows, limits, field)` -> true, or nil, err naming `field`: one limit per
/// window, each from 1 to the window's `max_limit`.
fn check_limits(
    _: &Lua,
    (windows, given, field): (Value, Value, Value),
) -> LuaResult<(Option<bool>, Option<String>)> {
    const F: &str = "slidewin.check_limits";
    let (Value::Table(windows), Value::String(field)) = (&windows, &field) else {
        return Err(error(
            F,
            format_args!(
                "windows must be a list of window tables and field a string, got {} and {}",
                describe(&windows),
                describe(&field)
            ),
        ));
    };
    // The caller's name for the limits, on one line whatever bytes it holds.
    let field = field.to_string_lossy().escape_debug().to_string();
    let n = windows.raw_len();
    let invalid = |message: String| Ok((None, Some(message)));
    let list = match &given {
        Value::Table(t) if t.raw_len() == n => t,
        other => {
            return invalid(format!(
                "{field} must be a list of {n} limit(s), one per window, got {}",
                describe(other)
            ))
        }
    };
    for i in 1..=n {
        let max_limit = match windows.raw_get::<Value>(i)? {
            Value::Table(w) => args::uint(F, "max_limit", &w.raw_get::<Value>("max_limit")?)?,
            other => {
                let got = describe(&other);
                return Err(error(
                    F,
                    format_args!("windows[{i}] must be a window table, got {got}"),
                ));
            }
        };
        let limit: Value = list.raw_get(i)?;
        let within = match limit {
            Value::Integer(v) => v as f64,
            Value::Number(v) => v,
            _ => f64::NAN,
        };
        if !arg::uint("limit", within).is_ok_and(|l| (1..=max_limit).contains(&l)) {
            let got = describe(&limit);
            return invalid(format!(
                "{field}[{i}] must be a positive integer at most max_limit ({max_limit}), got {got}"
            ));
        }
    }
    Ok((Some(true), None))
}
