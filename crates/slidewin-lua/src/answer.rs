//! The per-request crossing: one plain C call (LuaJIT's FFI, `resty.slidewin.answer`) decides
//! and writes the header values of the answer, so a compiled trace calls it directly and sets
//! the headers from bytes it already holds. A method on the Lua C API makes LuaJIT leave the
//! trace and stitch a new one around each call, and a header value built with `..` is a new
//! Lua string each request: together they cost more than the decision (BENCHMARKS.md, "The
//! access phase").
//!
//! ```lua
//! local headers = slidewin.headers("draft")       -- the style of a limiter's answers
//! local policy = headers:set(version, { { name = "api", limit = 10, window_ms = 1000 } })
//! local same = headers:held(version)              -- nil unless it holds that version's
//! -- slidewin_decide(lim:ffi_handle(), headers:ffi_handle(), key, ..., out)
//! ```
//!
//! The values are the core's ([`slidewin::headers`]); this module only carries them. Errors
//! come back as `out.message`, never as a panic or a long jump.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::headers::{Field, Policy, PolicyWindow, Style};
use slidewin::held_policy::HeldPolicy;
use slidewin::rule::MAX_WINDOWS;
use slidewin::window_name::MAX_NAME_BYTES;
use slidewin::{arg, Call, Decision};

use crate::args::{self, error};
use crate::cdefs::{c_function, c_struct, opaque};
use crate::formulas::decide_counts;
use crate::limiter::{decide_versioned, on_block, Block};
use crate::now_ms;
use crate::stack::{cost_value, number_key};

/// Bytes for the values of one answer: the longest is `"<name>";r=<digits>;t=<digits>`.
const TEXT_BYTES: usize = 320;
const MESSAGE_BYTES: usize = 256;

c_struct!(
    /// One answer as `resty.slidewin.answer` declares it (`slidewin.cdefs()`): the decision
    /// (numbers as doubles, which LuaJIT reads as plain Lua numbers) and its header values,
    /// value `i` of [`Field::ALL`] at `text[start[i]..start[i] + len[i]]` (`len` 0: not sent).
    #[repr(C)]
    #[c_name = "slidewin_answer_t"]
    pub struct Answer {
        allowed: c_int,
        /// 1-based.
        window: c_int,
        /// 0: `retry_after_ms` is nil (the cost never fits).
        has_retry: c_int,
        /// 0: the decision's version has no policy yet: hold the rule, then `slidewin_render`.
        rendered: c_int,
        message_len: c_int,
        start: [c_int; 5],
        len: [c_int; 5],
        pub(crate) remaining: f64,
        retry_after_ms: f64,
        reset_after_ms: f64,
        limit: f64,
        version: f64,
        /// When the decision was made (where a check recorded its cost: a reservation's
        /// stamp, for `lim:uncommit`); NaN for a store that decides elsewhere.
        stamp_ms: f64,
        text: [u8; TEXT_BYTES],
        message: [u8; MESSAGE_BYTES],
    }
);

/// A limiter's header style and its policy for one version of the limits.
pub struct Headers {
    style: Style,
    held: HeldPolicy,
}

/// The held policy's version for a version as the FFI carries it: a double, negative for an answer
/// of a store that keeps no versions (one deciding elsewhere).
fn version_word(version: f64) -> u64 {
    if version >= 0.0 {
        version as u64
    } else {
        HeldPolicy::UNVERSIONED
    }
}

opaque!(Headers);

/// `slidewin.headers(style)`'s object; it owns the [`Headers`] the FFI reads through
/// `ffi_handle()` (a raw pointer, so that no borrow of the object outlives a method call).
struct LuaHeaders(*mut Headers);

impl Drop for LuaHeaders {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::into_raw in `new` and is freed only here; Lua keeps
        // the object (hence the block) alive while a caller holds its handle.
        drop(unsafe { Box::from_raw(self.0) });
    }
}

const SET: &str = "headers:set";
const POLICY: &str = "headers:policy";
const HELD: &str = "headers:held";

/// `windows` (a list of `{ name, limit, window_ms }`) as the core's policy; `limits[i]`, when
/// given, stands for window `i`'s `limit` (a rule's windows under other limits, without a
/// list of new tables made in Lua for each).
fn policy_of(function: &'static str, windows: &Table, limits: Option<&Table>) -> LuaResult<Policy> {
    let n = windows.raw_len();
    if n == 0 || n > MAX_WINDOWS {
        return Err(error(
            function,
            format_args!("windows must list 1 to {MAX_WINDOWS} windows, got {n}"),
        ));
    }
    let mut names = Vec::with_capacity(n);
    let mut numbers = Vec::with_capacity(n);
    for i in 1..=n {
        let w: Table = windows.raw_get(i)?;
        let name: String = match w.raw_get::<Value>("name")? {
            Value::String(s) => s.to_string_lossy(),
            other => {
                return Err(error(
                    function,
                    format_args!(
                        "windows[{i}].name must be a string, got {}",
                        args::describe(&other)
                    ),
                ))
            }
        };
        if name.len() > MAX_NAME_BYTES || name.contains(['"', '\\']) {
            return Err(error(
                function,
                format_args!(
                    "windows[{i}].name must be at most {MAX_NAME_BYTES} bytes without '\"' or '\\', got \"{name}\""
                ),
            ));
        }
        let limit: Value = match limits {
            Some(limits) => limits.raw_get(i)?,
            None => w.raw_get("limit")?,
        };
        let limit = args::uint(function, "limit", &limit)?;
        let window_ms = args::uint(function, "window_ms", &w.raw_get("window_ms")?)?;
        names.push(name);
        numbers.push((limit, window_ms));
    }
    let items: Vec<PolicyWindow> = names
        .iter()
        .zip(&numbers)
        .map(|(name, &(limit, window_ms))| PolicyWindow {
            name,
            limit,
            window_ms,
        })
        .collect();
    Ok(Policy::new(&items))
}

/// `slidewin.headers(style)`: the headers object, or nil, err naming the style.
fn new(_: &Lua, style: Value) -> LuaResult<(Option<LuaHeaders>, Option<String>)> {
    let Some(style) = (match &style {
        Value::String(s) => Style::from_name(&s.to_string_lossy()),
        _ => None,
    }) else {
        return Ok((
            None,
            Some(format!(
                "headers must be \"draft\", \"x-ratelimit\" or \"none\", got {}",
                args::describe(&style)
            )),
        ));
    };
    let headers = Headers {
        style,
        held: HeldPolicy::new(),
    };
    Ok((Some(LuaHeaders(Box::into_raw(Box::new(headers)))), None))
}

impl UserData for LuaHeaders {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // `set(version, windows[, limits])`: the policy decisions of `version` (-1: of a store
        // that keeps no versions) are answered with; its RateLimit-Policy value.
        methods.add_method(
            "set",
            |_, this, (version, windows, limits): (Value, Table, Option<Table>)| {
                let version = args::number(SET, "version", &version)?;
                let policy = policy_of(SET, &windows, limits.as_ref())?;
                let value = policy.value().to_string();
                // SAFETY: the block lives as long as `this`; one Lua thread uses it, and no FFI call
                // runs during this method.
                let headers = unsafe { &mut *this.0 };
                headers.held.hold(version_word(version), policy);
                Ok(value)
            },
        );
        // `held(version)`: the RateLimit-Policy value held for `version` (a decision of a named
        // limiter through the FFI took it from the limiter), or nil.
        methods.add_method("held", |_, this, version: Value| {
            let version = version_word(args::number(HELD, "version", &version)?);
            // SAFETY: the block lives as long as `this`; only read here.
            let held = &unsafe { &*this.0 }.held;
            Ok(held
                .holds(version)
                .then(|| held.policy().value().to_string()))
        });
        // `policy(windows[, limits])`: the RateLimit-Policy value of other limits (a tier's,
        // a call's).
        methods.add_method(
            "policy",
            |_, _, (windows, limits): (Table, Option<Table>)| {
                Ok(policy_of(POLICY, &windows, limits.as_ref())?
                    .value()
                    .to_string())
            },
        );
        methods.add_method("ffi_handle", |_, this, ()| {
            Ok(Value::LightUserData(mlua::LightUserData(this.0.cast())))
        });
        // `sends()`: whether admitted answers carry headers, and whether RateLimit-Policy.
        methods.add_method("sends", |_, this, ()| {
            // SAFETY: the block lives as long as `this`; only read here.
            let style = unsafe { &*this.0 }.style;
            Ok((style.sends_headers(), style.sends_policy()))
        });
    }
}

/// Adds `slidewin.headers` to the module.
pub fn register(lua: &Lua, module: &Table) -> LuaResult<()> {
    module.set("headers", lua.create_function(new)?)?;
    Ok(())
}

c_function!(
    /// Decides for `key` (`key_len` bytes; null: the number `key_number`) under the live limits
    /// (`n_limits` 0) or the caller's `limits`, records `cost` when it fits and `commit` is set
    /// (`commit`: 0 a peek, 1 a check, 2 a dry run, whose refusal the store counts apart),
    /// and writes the answer's header values, `headers` taking the policy of the decision's
    /// version from the limiter when it moved (a named limiter; an unnamed one's answer is left
    /// not rendered). Returns 0 with `out` filled, or 1 with `out.message` saying what was wrong.
    ///
    /// # Safety
    /// `block` comes from `lim:ffi_handle()` and `headers` from `headers:ffi_handle()` of objects
    /// still referenced by the caller; `key` points to `key_len` readable bytes (or is null);
    /// `limits` to `n_limits` doubles; `out` to a writable `Answer`.
    #[no_mangle]
    #[c_prototype(DECIDE_PROTOTYPE)]
    pub unsafe extern "C" fn slidewin_decide(
        block: *mut Block,
        headers: *mut Headers,
        key: *const u8,
        key_len: usize,
        key_number: f64,
        cost: f64,
        commit: c_int,
        limits: *const f64,
        n_limits: usize,
        out: *mut Answer,
    ) -> c_int {
        const FUNCTION: &str = "lim:decide";
        // SAFETY: the caller's contract above: `out` is writable and not aliased during the call.
        let out = unsafe { &mut *out };
        // SAFETY: the caller's contract above: the block lives while `lim` does, and a worker's Lua
        // runs on one thread, so nothing else borrows it during the call.
        let block = unsafe { &mut *block };
        // SAFETY: the caller's contract above: a worker's Lua runs on one thread, so nothing
        // else borrows the headers during the call.
        let headers = unsafe { &mut *headers };
        let mut key_text = String::new();
        let mut given = [0u64; MAX_WINDOWS];
        // SAFETY: the caller's contract above: `key` holds `key_len` bytes (or is null) and
        // `limits` holds `n_limits` doubles for the call.
        let read = unsafe {
            let key = (key, key_len, key_number);
            ffi_arguments(FUNCTION, key, (limits, n_limits), &mut key_text, &mut given)
        };
        let key = match read {
            Ok(key) => key,
            Err(message) => return fail(out, &message),
        };
        let limits = (n_limits > 0).then_some(&given[..n_limits]);
        let decided = on_block(block, FUNCTION, |this| {
            let cost = cost_value(cost, FUNCTION)?;
            let call = match commit {
                0 => Call::Peek,
                1 => Call::Check,
                2 => Call::DryRun,
                _ => {
                    return Err(format!(
                        "{FUNCTION}: commit must be 0, 1 or 2, got {commit}"
                    ))
                }
            };
            let decided = decide_versioned(this, key, cost, call, limits, FUNCTION)?;
            headers.held.follow(decided.version, || this.policy());
            Ok(decided)
        });
        match decided {
            Ok(decided) => {
                let (version, stamp_ms) = (decided.version as f64, decided.stamp_ms as f64);
                fill(out, &decided.decision, version, stamp_ms);
                render_into(out, headers);
                0
            }
            Err(message) => fail(out, &message),
        }
    }
);

/// The key and limits of an FFI call, for `function`'s errors: the key (`key_len` bytes at
/// `key`, or when null the number `key_number`, its text kept in `text`), and up to
/// [`MAX_WINDOWS`] limits into `given` (its first `n_limits`).
///
/// # Safety
/// `key` points to `key_len` bytes readable for `'b` (or is null); `limits` to `n_limits`
/// doubles.
pub(crate) unsafe fn ffi_arguments<'b>(
    function: &'static str,
    (key, key_len, key_number): (*const u8, usize, f64),
    (limits, n_limits): (*const f64, usize),
    text: &'b mut String,
    given: &mut [u64; MAX_WINDOWS],
) -> Result<&'b [u8], String> {
    if n_limits > MAX_WINDOWS {
        let got = format!("limits must list at most {MAX_WINDOWS} limits, got {n_limits}");
        return Err(format!("{function}: {got}"));
    }
    for (i, slot) in given.iter_mut().take(n_limits).enumerate() {
        // SAFETY: the caller's contract above: `limits` holds `n_limits` doubles.
        *slot = arg::uint("limit", unsafe { *limits.add(i) })
            .map_err(|e| format!("{function}: {e}"))?;
    }
    if !key.is_null() {
        // SAFETY: the caller's contract above: `key` holds `key_len` bytes for `'b`.
        return Ok(unsafe { std::slice::from_raw_parts(key, key_len) });
    }
    *text = number_key(key_number, function)?;
    Ok(text.as_bytes())
}

c_function!(
    /// Writes the header values of the decision in `out` (filled by `slidewin_decide` or by the
    /// caller, for a store that decides elsewhere) as `headers` renders them. Returns 0, or 1 with
    /// `out.message` set.
    ///
    /// # Safety
    /// `headers` comes from `headers:ffi_handle()` of an object still referenced by the caller;
    /// `out` points to a writable `Answer`.
    #[no_mangle]
    #[c_prototype(RENDER_PROTOTYPE)]
    pub unsafe extern "C" fn slidewin_render(headers: *const Headers, out: *mut Answer) -> c_int {
        // SAFETY: the caller's contract above.
        let (headers, out) = unsafe { (&*headers, &mut *out) };
        let d = decision_of(out);
        fill_values(out, headers, &d);
        0
    }
);

c_function!(
    /// The sliding counter's decision over two counts kept elsewhere (store shdict's dict), as
    /// `slidewin.counter_decide` answers it, into `out`'s decision fields (no header values: the
    /// layer renders them with the limiter's policy). Returns 0, or 1 with `out.message` set.
    ///
    /// # Safety
    /// `out` points to a writable `Answer`.
    #[no_mangle]
    #[c_prototype(COUNTER_DECIDE_PROTOTYPE)]
    pub unsafe extern "C" fn slidewin_counter_decide(
        limit: f64,
        window_ms: f64,
        previous: f64,
        current: f64,
        now_ms: f64,
        cost: f64,
        commit: c_int,
        out: *mut Answer,
    ) -> c_int {
        // SAFETY: the caller's contract above.
        let out = unsafe { &mut *out };
        let numbers = [limit, window_ms, previous, current, now_ms, cost];
        match catch_unwind(|| decide_counts(numbers, commit != 0)) {
            Ok(Ok(d)) => {
                fill(out, &d, out.version, f64::NAN);
                0
            }
            Ok(Err(message)) => fail(out, &message),
            Err(_) => fail(out, "slidewin.counter_decide: internal error"),
        }
    }
);

/// Writes the header values of the decision `out` holds when `headers` holds the policy of its
/// version; else marks it not rendered (the caller holds the rule, then `slidewin_render`).
pub(crate) fn render_into(out: &mut Answer, headers: &Headers) {
    if !headers.held.holds(version_word(out.version)) {
        out.rendered = 0;
        return;
    }
    let d = decision_of(out);
    fill_values(out, headers, &d);
}

/// The decision `out` holds.
fn decision_of(out: &Answer) -> Decision {
    Decision {
        allowed: out.allowed != 0,
        limit: out.limit as u64,
        remaining: out.remaining as u64,
        retry_after_ms: (out.has_retry != 0).then_some(out.retry_after_ms as u64),
        reset_after_ms: out.reset_after_ms as u64,
        window: (out.window.max(1) - 1) as usize,
    }
}

/// `d` into `out`'s decision fields, made under `version` at `stamp_ms` (NaN: a decision with
/// no time of this node).
pub(crate) fn fill(out: &mut Answer, d: &Decision, version: f64, stamp_ms: f64) {
    out.allowed = d.allowed as c_int;
    out.window = d.window as c_int + 1;
    out.has_retry = d.retry_after_ms.is_some() as c_int;
    out.remaining = d.remaining as f64;
    out.retry_after_ms = d.retry_after_ms.unwrap_or(0) as f64;
    out.reset_after_ms = d.reset_after_ms as f64;
    out.limit = d.limit as f64;
    out.version = version;
    out.stamp_ms = stamp_ms;
}

/// The values of `d` in `headers`' style, into `out.text`. They always fit: names are bounded
/// by [`MAX_NAME_BYTES`] and numbers by 20 digits.
fn fill_values(out: &mut Answer, headers: &Headers, d: &Decision) {
    out.len = [0; 5];
    let Answer {
        text, start, len, ..
    } = out;
    let mut at = 0;
    let written = catch_unwind(AssertUnwindSafe(|| {
        headers.held.write(
            headers.style,
            d,
            now_ms(),
            &mut text[..],
            |field, value: &mut [u8]| {
                let i = Field::ALL.iter().position(|&f| f == field).unwrap_or(0);
                start[i] = at as c_int;
                len[i] = value.len() as c_int;
                at += value.len();
            },
        )
    }));
    out.rendered = matches!(written, Ok(true)) as c_int;
}

pub(crate) fn fail(out: &mut Answer, message: &str) -> c_int {
    let len = message.len().min(MESSAGE_BYTES);
    out.message[..len].copy_from_slice(&message.as_bytes()[..len]);
    out.message_len = len as c_int;
    1
}
