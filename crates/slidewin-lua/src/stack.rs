//! Reading arguments off the Lua stack and pushing answers onto it, for the C functions of
//! the limiter's methods: plain values in, plain values out, so a Lua error raised after them
//! skips no destructor.

use std::ffi::{c_char, c_int, CStr};

use mlua::ffi::{self, lua_State};
use slidewin::arg;
use slidewin::shared::ZoneStats;
use slidewin::Decision;

/// Raises `message` as a Lua error, dropping it first (the long jump skips destructors).
pub unsafe fn raise(state: *mut lua_State, message: String) -> ! {
    ffi::lua_pushlstring(state, message.as_ptr() as *const c_char, message.len());
    drop(message);
    ffi::lua_error(state)
}

/// A number key as every door reads it: integers as digits, other numbers as Rust writes them.
pub fn number_key(n: f64, function: &str) -> Result<String, String> {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        Ok((n as i64).to_string())
    } else if n.is_finite() {
        Ok(n.to_string())
    } else {
        Err(format!(
            "{function}: key must be a string or a finite number, got {n}"
        ))
    }
}

/// Argument `index` as a key: a string's bytes, or a finite number's decimal form (so 42 and
/// "42" are one key).
pub unsafe fn with_key<T>(
    state: *mut lua_State,
    index: c_int,
    function: &str,
    f: impl FnOnce(&[u8]) -> Result<T, String>,
) -> Result<T, String> {
    match ffi::lua_type(state, index) {
        ffi::LUA_TSTRING => {
            let mut len = 0;
            let ptr = ffi::lua_tolstring(state, index, &mut len) as *const u8;
            f(std::slice::from_raw_parts(ptr, len))
        }
        ffi::LUA_TNUMBER => f(number_key(ffi::lua_tonumber(state, index), function)?.as_bytes()),
        _ => Err(format!(
            "{function}: key must be a string or a finite number, got {}",
            describe(state, index)
        )),
    }
}

/// Argument `index` as a cost: 1 when nil or absent. A whole cost above 2^53 (where doubles
/// stop being exact) is above every limit, so it reads as `u64::MAX`: refused as never
/// fitting, like any cost above the limit, not answered with an error.
pub unsafe fn cost(state: *mut lua_State, index: c_int, function: &str) -> Result<u64, String> {
    match ffi::lua_type(state, index) {
        ffi::LUA_TNIL | ffi::LUA_TNONE => Ok(1),
        ffi::LUA_TNUMBER => cost_value(ffi::lua_tonumber(state, index), function),
        _ => Err(format!(
            "{function}: cost must be a number, got {}",
            describe(state, index)
        )),
    }
}

/// A number as a cost (see [`cost`]).
pub fn cost_value(n: f64, function: &str) -> Result<u64, String> {
    if n.is_finite() && n > arg::MAX_EXACT {
        return Ok(u64::MAX);
    }
    arg::uint("cost", n).map_err(|e| format!("{function}: {e}"))
}

/// A value as messages show it: strings quoted, other types by name.
pub unsafe fn describe(state: *mut lua_State, index: c_int) -> String {
    if ffi::lua_type(state, index) == ffi::LUA_TSTRING {
        let mut len = 0;
        let ptr = ffi::lua_tolstring(state, index, &mut len) as *const u8;
        return format!(
            "\"{}\"",
            String::from_utf8_lossy(std::slice::from_raw_parts(ptr, len))
        );
    }
    CStr::from_ptr(ffi::luaL_typename(state, index))
        .to_string_lossy()
        .into_owned()
}

pub unsafe fn set_number(state: *mut lua_State, field: &CStr, value: u64) {
    ffi::lua_pushnumber(state, value as f64);
    ffi::lua_setfield(state, -2, field.as_ptr());
}

pub unsafe fn push_retry(state: *mut lua_State, d: &Decision) {
    match d.retry_after_ms {
        Some(ms) => ffi::lua_pushnumber(state, ms as f64),
        None => ffi::lua_pushnil(state),
    }
}

/// `lim:stats()`'s table of `s`.
pub unsafe fn push_stats(state: *mut lua_State, s: &ZoneStats) {
    ffi::lua_createtable(state, 0, 9);
    set_number(state, c"keys", s.keys);
    set_number(state, c"capacity", s.capacity);
    set_number(state, c"evictions", s.evictions);
    set_number(state, c"reclaimed", s.reclaimed);
    set_number(state, c"repairs", s.repairs);
    set_number(state, c"allowed", s.allowed);
    set_number(state, c"rejected", s.rejected);
    set_number(state, c"would_reject", s.would_reject);
    set_number(state, c"full_refusals", s.full_refusals);
}
