//! The operator's view of a limiter (issue 19), for status pages, not for the request path:
//!
//! - `lim:top(n)` -> `{ live, at_limit, usage = { cumulative counts per bound }, bounds,
//!   usage_sum, refused = { {key, count, limit, window, refused, digest}, ... }, admitted }`:
//!   the `n` (default 10) most refused keys and the `n` nearest their limit, with the window
//!   nearest its limit (1-based `window`), walked a set at a time (stores shm and zone);
//!   `nil, reason` for a store that cannot list its keys.
//! - `lim:window(key, cost)` -> `{ allowed, count, limit, window, remaining, retry_after_ms,
//!   reset_after_ms, refused, windows = { {count, limit}, ... } }`: a peek, what the next call
//!   of `cost` (default 1) gets; count and limit are those of the decision's window (the one
//!   the RateLimit header describes); `refused` is nil when the store does not count refusals
//!   per key.
//!
//! A key kept as a digest (longer than max_key_bytes) is listed as its 32 hex digits with
//! `digest = true`.

use std::ffi::{c_char, c_int, CStr};

use mlua::ffi::{self, lua_State};
use slidewin::shared::{HeavyHitter, StoredKey, USAGE_BOUNDS};

use crate::object::{cost, describe, push_retry, set_number, with_key, with_self};

const DEFAULT_TOP: usize = 10;
const MAX_TOP: u64 = 10_000;

/// Argument 2 of `lim:top`: how many keys per list.
unsafe fn top_n(state: *mut lua_State) -> Result<usize, String> {
    let wrong =
        |got: String| format!("lim:top: n must be an integer from 0 to {MAX_TOP}, got {got}");
    match ffi::lua_type(state, 2) {
        ffi::LUA_TNIL | ffi::LUA_TNONE => Ok(DEFAULT_TOP),
        ffi::LUA_TNUMBER => {
            let n = ffi::lua_tonumber(state, 2);
            match slidewin::arg::uint("n", n) {
                Ok(n) if n <= MAX_TOP => Ok(n as usize),
                _ => Err(wrong(n.to_string())),
            }
        }
        _ => Err(wrong(describe(state, 2))),
    }
}

unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    ffi::lua_pushlstring(state, bytes.as_ptr() as *const c_char, bytes.len());
}

unsafe fn push_hitters(state: *mut lua_State, field: &CStr, hitters: &[HeavyHitter]) {
    ffi::lua_createtable(state, hitters.len() as c_int, 0);
    for (i, hit) in hitters.iter().enumerate() {
        ffi::lua_createtable(state, 0, 6);
        match &hit.key {
            StoredKey::Bytes(bytes) => push_bytes(state, bytes),
            StoredKey::Digest(digest) => {
                let hex = format!("{:016x}{:016x}", digest[0], digest[1]);
                push_bytes(state, hex.as_bytes());
                ffi::lua_pushboolean(state, 1);
                ffi::lua_setfield(state, -3, c"digest".as_ptr());
            }
        }
        ffi::lua_setfield(state, -2, c"key".as_ptr());
        set_number(state, c"count", hit.usage.count);
        set_number(state, c"limit", hit.usage.limit);
        set_number(state, c"window", hit.usage.window as u64 + 1);
        set_number(state, c"refused", hit.refused);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setfield(state, -2, field.as_ptr());
}

/// `lim:top(n)`. The scan is pushed while it is held: a Lua memory error there leaks it
/// (bounded by `n` keys), nothing worse.
pub(crate) unsafe extern "C-unwind" fn top(state: *mut lua_State) -> c_int {
    let scan = with_self(state, "lim:top", |this| {
        let n = top_n(state)?;
        this.scan(n)
            .transpose()
            .map_err(|e| format!("lim:top: {e}"))
    });
    let Some(scan) = scan else {
        ffi::lua_pushnil(state);
        let reason = c"this store cannot list its keys (stores shm and zone can)";
        ffi::lua_pushstring(state, reason.as_ptr());
        return 2;
    };
    ffi::lua_createtable(state, 0, 7);
    set_number(state, c"live", scan.live);
    set_number(state, c"at_limit", scan.at_limit);
    ffi::lua_pushnumber(state, scan.usage_sum);
    ffi::lua_setfield(state, -2, c"usage_sum".as_ptr());
    ffi::lua_createtable(state, USAGE_BOUNDS.len() as c_int, 0);
    ffi::lua_createtable(state, USAGE_BOUNDS.len() as c_int, 0);
    for (i, (&(num, den), &n)) in USAGE_BOUNDS.iter().zip(&scan.usage).enumerate() {
        ffi::lua_pushnumber(state, num as f64 / den as f64);
        ffi::lua_rawseti(state, -3, i as ffi::lua_Integer + 1);
        ffi::lua_pushnumber(state, n as f64);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setfield(state, -3, c"usage".as_ptr());
    ffi::lua_setfield(state, -2, c"bounds".as_ptr());
    push_hitters(state, c"refused", &scan.refused);
    push_hitters(state, c"admitted", &scan.admitted);
    1
}

/// `lim:window(key, cost)`.
pub(crate) unsafe extern "C-unwind" fn window(state: *mut lua_State) -> c_int {
    let function = "lim:window";
    let (window, counts_refusals) = with_self(state, function, |this| {
        let cost = cost(state, 3, function)?;
        with_key(state, 2, function, |key| {
            this.window(key, cost)
                .map_err(|e| format!("{function}: {e}"))
        })
    });
    let d = window.decision;
    let count = window.windows.iter().find(|u| u.window == d.window);
    ffi::lua_createtable(state, 0, 9);
    ffi::lua_pushboolean(state, d.allowed as c_int);
    ffi::lua_setfield(state, -2, c"allowed".as_ptr());
    set_number(state, c"count", count.map_or(0, |u| u.count));
    set_number(state, c"limit", d.limit);
    set_number(state, c"window", d.window as u64 + 1);
    set_number(state, c"remaining", d.remaining);
    push_retry(state, &d);
    ffi::lua_setfield(state, -2, c"retry_after_ms".as_ptr());
    set_number(state, c"reset_after_ms", d.reset_after_ms);
    if counts_refusals {
        set_number(state, c"refused", window.refused);
    }
    ffi::lua_createtable(state, window.windows.len() as c_int, 0);
    for (i, usage) in window.windows.iter().enumerate() {
        ffi::lua_createtable(state, 0, 2);
        set_number(state, c"count", usage.count);
        set_number(state, c"limit", usage.limit);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setfield(state, -2, c"windows".as_ptr());
    1
}
