//! The method table of `slidewin.limiter{...}` objects (the block [`crate::limiter`] makes): C
//! functions on the Lua C API.
//!
//! A request handler calls `incoming` once per request, so its cost is the limiter's cost in
//! nginx. Through mlua's userdata machinery (argument conversion, borrow checks, error wrapping)
//! a call measured ~250 ns; read straight off the Lua stack it is a fraction of that
//! (BENCHMARKS.md, "OpenResty").
//!
//! Safety rules every method follows: `self` is checked first (`luaL_checkudata`, which raises
//! before any Rust value exists); the Rust work runs under `catch_unwind` and returns plain
//! values; results are pushed, or an error raised, only after every Rust value that owns memory
//! has been dropped, so nothing is skipped when Lua unwinds or long-jumps out.
//!
//! Lua code cannot free an object twice: the metatable is hidden (`__metatable = false`, as
//! mlua does for its userdata), and the block holds an `Option` that `__gc` empties, so a second
//! `__gc` (through `debug.getmetatable`) does nothing and a method called after it raises
//! "the limiter was collected".

use std::ffi::{c_char, c_int, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::ffi::{self, lua_State};
use mlua::{Lua, Result as LuaResult};
use slidewin::reservation::Amend;
use slidewin::rule::{Limits, MAX_WINDOWS};
use slidewin::{arg, Call, Decision};

use crate::limiter::{decide_versioned, with_self, Block, METATABLE};
use crate::operator_view;
use crate::stack::{cost, describe, push_retry, push_stats, set_number, with_key};

/// Creates the objects' metatable (once per Lua VM, when the module is loaded).
pub fn register(lua: &Lua) -> LuaResult<()> {
    const METHODS: [(&CStr, ffi::lua_CFunction); 18] = [
        (c"incoming", incoming),
        (c"ffi_handle", ffi_handle),
        (c"decide", decide),
        (c"check", check),
        (c"uncommit", uncommit),
        (c"owe", owe),
        (c"reset", reset),
        (c"stats", stats),
        (c"evictions_to_tell", evictions_to_tell),
        (c"limit", limit),
        (c"limits", limits),
        (c"set_limit", set_limit),
        (c"rule", rule),
        (c"follow", follow),
        (c"top", operator_view::top),
        (c"window", operator_view::window),
        (c"walk", operator_view::walk),
        (c"step", operator_view::step),
    ];
    // SAFETY: plain stack operations on a state mlua hands us, balanced (the stack is left as found).
    unsafe {
        lua.exec_raw::<()>((), |state| {
            ffi::luaL_newmetatable(state, METATABLE.as_ptr());
            ffi::lua_createtable(state, 0, METHODS.len() as c_int);
            for (name, method) in METHODS {
                ffi::lua_pushcfunction(state, method);
                ffi::lua_setfield(state, -2, name.as_ptr());
            }
            ffi::lua_setfield(state, -2, c"__index".as_ptr());
            ffi::lua_pushcfunction(state, gc);
            ffi::lua_setfield(state, -2, c"__gc".as_ptr());
            ffi::lua_pushboolean(state, 0);
            ffi::lua_setfield(state, -2, c"__metatable".as_ptr());
            operator_view::register_walks(state);
            ffi::lua_settop(state, 0);
        })
    }
}

/// Argument `index` as a caller's limits: nil (the live ones), a number (a one-window rule's)
/// or a list of one number per window.
unsafe fn limits_arg(
    state: *mut lua_State,
    index: c_int,
    function: &str,
    out: &mut [u64; MAX_WINDOWS],
) -> Result<Option<usize>, String> {
    let limit = |n: f64| arg::uint("limit", n).map_err(|e| format!("{function}: {e}"));
    match ffi::lua_type(state, index) {
        ffi::LUA_TNIL | ffi::LUA_TNONE => Ok(None),
        ffi::LUA_TNUMBER => {
            out[0] = limit(ffi::lua_tonumber(state, index))?;
            Ok(Some(1))
        }
        ffi::LUA_TTABLE => {
            let len = ffi::lua_objlen(state, index);
            if len == 0 || len > MAX_WINDOWS {
                return Err(format!(
                    "{function}: limits must be a list of one limit per window, got {len} limits"
                ));
            }
            for (i, slot) in out.iter_mut().enumerate().take(len) {
                ffi::lua_rawgeti(state, index, i as ffi::lua_Integer + 1);
                let kind = ffi::lua_type(state, -1);
                let n = ffi::lua_tonumber(state, -1);
                ffi::lua_settop(state, -2);
                if kind != ffi::LUA_TNUMBER {
                    return Err(format!(
                        "{function}: limits[{}] must be a number, got {}",
                        i + 1,
                        CStr::from_ptr(ffi::lua_typename(state, kind)).to_string_lossy()
                    ));
                }
                *slot = limit(n)?;
            }
            Ok(Some(len))
        }
        _ => Err(format!(
            "{function}: limits must be nil, a number or a list of numbers, got {}",
            describe(state, index)
        )),
    }
}

/// The argument at `index` as a call: true commits ([`Call::Check`]), false or nil peeks.
unsafe fn commit_of(state: *mut lua_State, index: c_int) -> Call {
    match ffi::lua_toboolean(state, index) {
        0 => Call::Peek,
        _ => Call::Check,
    }
}

/// The decision, and the version of the rule it was made under ([`LuaLimiter::version`]).
unsafe fn decide_at(
    state: *mut lua_State,
    function: &str,
    cost_at: c_int,
    call: Call,
    limits_at: Option<c_int>,
) -> (Decision, u64) {
    with_self(state, function, |this| {
        let cost = cost(state, cost_at, function)?;
        let mut limits = [0; MAX_WINDOWS];
        let given = match limits_at {
            Some(at) => limits_arg(state, at, function, &mut limits)?,
            None => None,
        };
        with_key(state, 2, function, |key| {
            let decided =
                decide_versioned(this, key, cost, call, given.map(|n| &limits[..n]), function)?;
            Ok((decided.decision, decided.version))
        })
    })
}

/// `lim:incoming(key, commit, cost)`: `0, remaining` or `nil, "rejected", retry_after_ms`
/// (lua-resty-limit-traffic's contract; retry_after_ms nil when cost > limit).
unsafe extern "C-unwind" fn incoming(state: *mut lua_State) -> c_int {
    let (d, _) = decide_at(state, "lim:incoming", 4, commit_of(state, 3), None);
    if d.allowed {
        ffi::lua_pushnumber(state, 0.0);
        ffi::lua_pushnumber(state, d.remaining as f64);
        2
    } else {
        ffi::lua_pushnil(state);
        ffi::lua_pushlstring(state, c"rejected".as_ptr(), 8);
        push_retry(state, &d);
        3
    }
}

/// `lim:decide(key, cost, commit, limits)`: `allowed, remaining, retry_after_ms,
/// reset_after_ms, nil, window, version` (the store seam's form: `window` is the 1-based
/// window the answer describes; nil stands for "decided locally", which an in-memory store
/// never is; `version` moves whenever the rule decided with or a live limit changes, so
/// headers built from them are rebuilt from `lim:rule()`).
unsafe extern "C-unwind" fn decide(state: *mut lua_State) -> c_int {
    let (d, version) = decide_at(state, "lim:decide", 3, commit_of(state, 4), Some(5));
    ffi::lua_pushboolean(state, d.allowed as c_int);
    ffi::lua_pushnumber(state, d.remaining as f64);
    push_retry(state, &d);
    ffi::lua_pushnumber(state, d.reset_after_ms as f64);
    ffi::lua_pushnil(state);
    ffi::lua_pushnumber(state, (d.window + 1) as f64);
    ffi::lua_pushnumber(state, version as f64);
    7
}

/// `lim:ffi_handle()`: the object's block as a light userdata, for `slidewin_decide` through
/// LuaJIT's FFI (`resty.slidewin.answer`). Lua does not move userdata, so it stays valid while
/// `lim` lives.
unsafe extern "C-unwind" fn ffi_handle(state: *mut lua_State) -> c_int {
    let block = ffi::luaL_checkudata(state, 1, METATABLE.as_ptr());
    ffi::lua_pushlightuserdata(state, block);
    1
}

/// `lim:check(key, cost, limits)`: `{ allowed, limit, remaining, retry_after_ms,
/// reset_after_ms, window }`.
unsafe extern "C-unwind" fn check(state: *mut lua_State) -> c_int {
    let (d, _) = decide_at(state, "lim:check", 3, Call::Check, Some(4));
    ffi::lua_createtable(state, 0, 6);
    ffi::lua_pushboolean(state, d.allowed as c_int);
    ffi::lua_setfield(state, -2, c"allowed".as_ptr());
    set_number(state, c"limit", d.limit);
    set_number(state, c"remaining", d.remaining);
    push_retry(state, &d);
    ffi::lua_setfield(state, -2, c"retry_after_ms".as_ptr());
    set_number(state, c"reset_after_ms", d.reset_after_ms);
    set_number(state, c"window", d.window as u64 + 1);
    1
}

/// `lim:uncommit(key, cost[, stamp_ms])`: gives back cost recorded earlier, the newest
/// first, or recorded at `stamp_ms` or before (a reservation's stamp: the decision's
/// `stamp_ms`); returns true.
unsafe extern "C-unwind" fn uncommit(state: *mut lua_State) -> c_int {
    amend(state, "lim:uncommit", Amend::GiveBack)
}

/// `lim:owe(key, cost[, stamp_ms])`: records cost at `stamp_ms` (a reservation's; nil: the
/// newest time) whether it fits or not, a debt the windows hold until it leaves them (each
/// counts at most twice its max limit); returns true.
unsafe extern "C-unwind" fn owe(state: *mut lua_State) -> c_int {
    amend(state, "lim:owe", Amend::Owe)
}

/// `lim:uncommit` and `lim:owe`: `change` of the cost at the stamp.
unsafe fn amend(state: *mut lua_State, function: &str, change: fn(u64) -> Amend) -> c_int {
    with_self(state, function, |this| {
        let cost = cost(state, 3, function)?;
        let stamp_ms = match ffi::lua_type(state, 4) {
            ffi::LUA_TNIL | ffi::LUA_TNONE => None,
            ffi::LUA_TNUMBER => Some(
                arg::int("stamp_ms", ffi::lua_tonumber(state, 4))
                    .map_err(|e| format!("{function}: {e}"))?,
            ),
            _ => {
                let got = describe(state, 4);
                return Err(format!("{function}: stamp_ms must be a number, got {got}"));
            }
        };
        with_key(state, 2, function, |key| {
            this.amend(key, change(cost), stamp_ms)
                .map_err(|e| format!("{function}: {e}"))
        })
    });
    ffi::lua_pushboolean(state, 1);
    1
}

/// `lim:reset(key)`: forgets the key.
unsafe extern "C-unwind" fn reset(state: *mut lua_State) -> c_int {
    with_self(state, "lim:reset", |this| {
        with_key(state, 2, "lim:reset", |key| {
            this.reset(key);
            Ok(())
        })
    });
    0
}

/// `lim:stats()`: `{ keys, capacity, evictions, reclaimed, repairs, allowed, rejected }`.
unsafe extern "C-unwind" fn stats(state: *mut lua_State) -> c_int {
    let s = with_self(state, "lim:stats", |this| Ok(this.stats()));
    push_stats(state, &s);
    1
}

/// `lim:evictions_to_tell(every_ms)`: what error.log should be told of keys evicted with
/// units in their windows since this worker last told (at once, then at most every
/// `every_ms`; the first call only counts from there), or nil.
unsafe extern "C-unwind" fn evictions_to_tell(state: *mut lua_State) -> c_int {
    let function = "lim:evictions_to_tell";
    let told = with_self(state, function, |this| {
        let every_ms = match ffi::lua_type(state, 2) {
            ffi::LUA_TNUMBER => arg::uint("every_ms", ffi::lua_tonumber(state, 2))
                .map_err(|e| format!("{function}: {e}"))?,
            _ => {
                let got = describe(state, 2);
                return Err(format!("{function}: every_ms must be a number, got {got}"));
            }
        };
        Ok(this.evictions_to_tell(i64::try_from(every_ms).unwrap_or(i64::MAX)))
    });
    match told {
        // SAFETY: a state Lua handed us, with room for one more value.
        Some(line) => unsafe {
            ffi::lua_pushlstring(state, line.as_ptr() as *const c_char, line.len());
        },
        // SAFETY: as above.
        None => unsafe { ffi::lua_pushnil(state) },
    }
    1
}

/// The live limits of the rule in force; errors name `function`.
unsafe fn live_limits(state: *mut lua_State, function: &str) -> Limits {
    with_self(state, function, |this| {
        this.limits().map_err(|e| format!("{function}: {e}"))
    })
}

/// `lim:limit()`: the first window's live limit.
unsafe extern "C-unwind" fn limit(state: *mut lua_State) -> c_int {
    let limit = live_limits(state, "lim:limit")[0];
    ffi::lua_pushnumber(state, limit as f64);
    1
}

/// `lim:limits()`: the live limits, one per window.
unsafe extern "C-unwind" fn limits(state: *mut lua_State) -> c_int {
    let limits = live_limits(state, "lim:limits");
    ffi::lua_createtable(state, limits.len() as c_int, 0);
    for (i, &limit) in limits.iter().enumerate() {
        ffi::lua_pushnumber(state, limit as f64);
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    1
}

/// `lim:set_limit(limit, window)`: sets the live limit of window `window` (1-based, default 1)
/// for every process sharing the limiter; returns true.
unsafe extern "C-unwind" fn set_limit(state: *mut lua_State) -> c_int {
    let function = "lim:set_limit";
    with_self(state, function, |this| {
        let number = |index: c_int, name: &'static str| match ffi::lua_type(state, index) {
            ffi::LUA_TNUMBER => arg::uint(name, ffi::lua_tonumber(state, index))
                .map_err(|e| format!("{function}: {e}")),
            _ => Err(format!(
                "{function}: {name} must be a number, got {}",
                describe(state, index)
            )),
        };
        let limit = number(2, "limit")?;
        let window = match ffi::lua_type(state, 3) {
            ffi::LUA_TNIL | ffi::LUA_TNONE => 1,
            _ => number(3, "window")?,
        };
        let window = usize::try_from(window)
            .unwrap_or(usize::MAX)
            .wrapping_sub(1);
        this.set_limit(window, limit)
            .map_err(|e| format!("{function}: {e}"))
    });
    ffi::lua_pushboolean(state, 1);
    1
}

/// `lim:follow()`: moves to the rule in force (a zone's rule put again with other windows,
/// as a decision does); its version. Raises once the rule was removed.
unsafe extern "C-unwind" fn follow(state: *mut lua_State) -> c_int {
    let version = with_self(state, "lim:follow", |this| {
        this.follow().map_err(|e| format!("lim:follow: {e}"))
    });
    ffi::lua_pushnumber(state, version as f64);
    1
}

/// `lim:rule()`: `{ version, windows = { { algorithm, limit, window_ms, bucket_ms, max_limit,
/// name }, ... } }`, the rule of the limiter's last decision (or follow) with its live limits
/// and the names its windows go by (a named limiter), and the version that decision answered
/// with: everything a header says about the rule.
unsafe extern "C-unwind" fn rule(state: *mut lua_State) -> c_int {
    let (windows, limits, version, names) = with_self(state, "lim:rule", |this| {
        let (rule, limits, version) = this.rule();
        let names = this.names().map(|names| {
            let lengths = rule.windows().iter().map(|w| w.window_ms());
            lengths
                .enumerate()
                .map(|(i, ms)| names.name(i, ms))
                .collect::<Vec<_>>()
        });
        Ok((rule.windows().to_vec(), limits, version, names))
    });
    ffi::lua_createtable(state, 0, 2);
    set_number(state, c"version", version);
    ffi::lua_createtable(state, windows.len() as c_int, 0);
    for (i, window) in windows.iter().enumerate() {
        let algorithm = window.algorithm().name();
        ffi::lua_createtable(state, 0, 6);
        ffi::lua_pushlstring(state, algorithm.as_ptr().cast(), algorithm.len());
        ffi::lua_setfield(state, -2, c"algorithm".as_ptr());
        set_number(state, c"limit", limits[i]);
        set_number(state, c"window_ms", window.window_ms() as u64);
        if let Some(bucket_ms) = window.bucket_ms() {
            set_number(state, c"bucket_ms", bucket_ms as u64);
        }
        set_number(state, c"max_limit", window.max_limit());
        if let Some(name) = names.as_ref().map(|names| &names[i]) {
            ffi::lua_pushlstring(state, name.as_ptr().cast(), name.len());
            ffi::lua_setfield(state, -2, c"name".as_ptr());
        }
        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
    }
    ffi::lua_setfield(state, -2, c"windows".as_ptr());
    1
}

/// Drops the limiter; a second call finds None and does nothing.
unsafe extern "C-unwind" fn gc(state: *mut lua_State) -> c_int {
    let block = ffi::luaL_checkudata(state, 1, METATABLE.as_ptr()) as *mut Block;
    let limiter = (*block).take();
    // A panic must not unwind into Lua's collector.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(limiter)));
    0
}
