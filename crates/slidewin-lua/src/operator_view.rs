//! The operator's view of a limiter, for status pages, not for the request path:
//!
//! - `lim:top(n)` -> `{ live, at_limit, usage = { cumulative counts per bound }, bounds,
//!   usage_sum, refused = { {key, count, limit, window, refused, digest}, ... }, admitted }`:
//!   the `n` (default 10) most refused keys and the `n` nearest their limit, with the window
//!   nearest its limit (1-based `window`), walked a set at a time (stores shm and zone);
//!   `nil, reason` for a store that cannot list its keys.
//! - `lim:walk(n)` -> a walk for `lim:top(n)`, or for the counters of `lim:stats()` alone when
//!   `n` is nil; `lim:step(walk, budget_us)` walks it on for about `budget_us` microseconds
//!   (whole slices of a few sets): false until it is over, then `lim:top(n)`'s table (none for
//!   the counters alone) with `stats`, `lim:stats()`'s table (step a walk on the limiter that
//!   made it). A host yields between steps
//!   (`ngx.sleep(0)`), so that a region of a million keys, a tenth of a second's walk, keeps
//!   no other request waiting longer than a step. `nil, reason` from a store that cannot list
//!   its keys.
//! - `lim:window(key, cost)` -> `{ allowed, count, limit, window, remaining, retry_after_ms,
//!   reset_after_ms, refused, windows = { {count, limit}, ... } }`: a peek, what the next call
//!   of `cost` (default 1) gets; count and limit are those of the decision's window (the one
//!   the RateLimit header describes); `refused` is nil when the store does not count refusals
//!   per key.
//!
//! A key kept as a digest (longer than max_key_bytes) is listed as its 32 hex digits with
//! `digest = true`.

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use mlua::ffi::{self, lua_State};
use slidewin::shared::{HeavyHitter, Scan, StoredKey, Walk, USAGE_BOUNDS};

use crate::limiter::with_self;
use crate::stack::{cost, describe, push_retry, push_stats, set_number, with_key};

const WALK: &CStr = c"slidewin.walk";
/// What a walk's userdata block holds: the walk, until `step` answers it or `__gc` runs.
type WalkBlock = Option<Walk>;
const UNLISTED: &CStr = c"this store cannot list its keys (stores shm and zone can)";

const DEFAULT_TOP: usize = 10;
const MAX_TOP: u64 = 10_000;

/// Argument 2 of `lim:top` and `lim:walk` (`function`): how many keys per list.
unsafe fn top_n(state: *mut lua_State, function: &str) -> Result<usize, String> {
    let wrong =
        |got: String| format!("{function}: n must be an integer from 0 to {MAX_TOP}, got {got}");
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
        let n = top_n(state, "lim:top")?;
        this.scan(n)
            .transpose()
            .map_err(|e| format!("lim:top: {e}"))
    });
    let Some(scan) = scan else {
        return push_unlisted(state);
    };
    push_scan(state, &scan);
    1
}

unsafe fn push_unlisted(state: *mut lua_State) -> c_int {
    ffi::lua_pushnil(state);
    ffi::lua_pushstring(state, UNLISTED.as_ptr());
    2
}

/// `lim:top`'s table of `scan`.
unsafe fn push_scan(state: *mut lua_State, scan: &Scan) {
    ffi::lua_createtable(state, 0, 8);
    set_number(state, c"live", scan.live);
    set_number(state, c"at_limit", scan.at_limit);
    ffi::lua_pushnumber(state, scan.usage_sum);
    ffi::lua_setfield(state, -2, c"usage_sum".as_ptr());
    ffi::lua_createtable(state, USAGE_BOUNDS.len() as c_int, 0);
    ffi::lua_createtable(state, USAGE_BOUNDS.len() as c_int, 0);
    for (i, (bound, n)) in scan.buckets().enumerate() {
        ffi::lua_pushnumber(state, bound);
        ffi::lua_rawseti(state, -3, i as ffi::lua_Integer + 1);
        ffi::lua_pushnumber(state, n as f64);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setfield(state, -3, c"usage".as_ptr());
    ffi::lua_setfield(state, -2, c"bounds".as_ptr());
    push_hitters(state, c"refused", &scan.refused);
    push_hitters(state, c"admitted", &scan.admitted);
}

/// Creates the walks' metatable (with the limiters', on `state`'s stack, which it leaves as
/// found).
pub(crate) unsafe fn register_walks(state: *mut lua_State) {
    ffi::luaL_newmetatable(state, WALK.as_ptr());
    ffi::lua_pushcfunction(state, walk_gc);
    ffi::lua_setfield(state, -2, c"__gc".as_ptr());
    ffi::lua_pushboolean(state, 0);
    ffi::lua_setfield(state, -2, c"__metatable".as_ptr());
    ffi::lua_pop(state, 1);
}

/// `lim:walk(n)`.
pub(crate) unsafe extern "C-unwind" fn walk(state: *mut lua_State) -> c_int {
    let walk = with_self(state, "lim:walk", |_| match ffi::lua_type(state, 2) {
        ffi::LUA_TNIL | ffi::LUA_TNONE => Ok(Walk::counters()),
        _ => top_n(state, "lim:walk").map(Walk::scan),
    });
    // SAFETY: the block is sized and (8-byte) aligned for WalkBlock, written once here (a Lua
    // memory error in lua_newuserdata leaks the walk: bounded by `n` keys); __gc empties it.
    let block = ffi::lua_newuserdata(state, size_of::<WalkBlock>()) as *mut WalkBlock;
    block.write(Some(walk));
    ffi::luaL_getmetatable(state, WALK.as_ptr());
    ffi::lua_setmetatable(state, -2);
    1
}

/// `lim:step(walk, budget_us)`.
pub(crate) unsafe extern "C-unwind" fn step(state: *mut lua_State) -> c_int {
    let function = "lim:step";
    let over = with_self(state, function, |this| {
        let block = walk_arg(state, function)?;
        let budget = match ffi::lua_type(state, 3) {
            ffi::LUA_TNUMBER => slidewin::arg::uint("budget_us", ffi::lua_tonumber(state, 3))
                .map_err(|e| format!("{function}: {e}"))?,
            _ => {
                let got = describe(state, 3);
                return Err(format!("{function}: budget_us must be a number, got {got}"));
            }
        };
        let Some(walk) = &mut *block else {
            return Err(format!(
                "{function}: the walk is over (its answer was given)"
            ));
        };
        let Some(over) = this.walk_for(walk, Duration::from_micros(budget)) else {
            return Ok(None);
        };
        let over = over.map_err(|e| format!("{function}: {e}"))?;
        // Over: the walk leaves its block, which owns nothing from now on.
        Ok(Some(if over { (*block).take() } else { None }))
    });
    match over {
        None => push_unlisted(state),
        Some(None) => {
            ffi::lua_pushboolean(state, 0);
            1
        }
        Some(Some(walk)) => {
            // Pushed while held: a Lua memory error there leaks it (bounded by `n` keys).
            let (scan, stats) = walk.finish();
            match &scan {
                Some(scan) => push_scan(state, scan),
                None => ffi::lua_createtable(state, 0, 1),
            }
            push_stats(state, &stats);
            ffi::lua_setfield(state, -2, c"stats".as_ptr());
            1
        }
    }
}

/// Argument 2 as a walk's block, checked without raising.
unsafe fn walk_arg(state: *mut lua_State, function: &str) -> Result<*mut WalkBlock, String> {
    let mut is_walk = false;
    if ffi::lua_getmetatable(state, 2) != 0 {
        ffi::luaL_getmetatable(state, WALK.as_ptr());
        is_walk = ffi::lua_rawequal(state, -1, -2) != 0;
        ffi::lua_pop(state, 2);
    }
    if !is_walk {
        let got = describe(state, 2);
        return Err(format!(
            "{function}: walk must be a walk (lim:walk(n)), got {got}"
        ));
    }
    Ok(ffi::lua_touserdata(state, 2) as *mut WalkBlock)
}

unsafe extern "C-unwind" fn walk_gc(state: *mut lua_State) -> c_int {
    let block = ffi::luaL_checkudata(state, 1, WALK.as_ptr()) as *mut WalkBlock;
    // SAFETY: luaL_checkudata answers only a block of the walks' metatable, which `walk` wrote.
    let walk = (*block).take();
    // A panic must not unwind into Lua's collector.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(walk)));
    0
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
