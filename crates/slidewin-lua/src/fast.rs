//! `lim:decide` as a plain C function for LuaJIT's FFI (`resty.slidewin.fast`), so that a
//! compiled trace calls it directly. A method on the Lua C API makes LuaJIT leave the trace and
//! stitch a new one around the call, which costs a request more than the decision itself
//! (BENCHMARKS.md, "The access phase").
//!
//! The Lua side gets the limiter's block with `lim:ffi_handle()` and keeps `lim` beside it, so
//! the block outlives every call made through the handle. The decision comes back in a
//! [`FastDecision`] the caller owns; errors as its message, never as a panic or a long jump.

use std::ffi::c_int;

use crate::{
    limiter::{decide_versioned, on_block, Block},
    stack::cost_value,
};

/// The decision as `resty.slidewin.fast` declares it (`slidewin_decision_t`): numbers as
/// doubles, which LuaJIT reads as plain Lua numbers.
#[repr(C)]
pub struct FastDecision {
    allowed: c_int,
    /// 1-based.
    window: c_int,
    /// 0: `retry_after_ms` is nil (the cost never fits).
    has_retry: c_int,
    message_len: c_int,
    remaining: f64,
    retry_after_ms: f64,
    reset_after_ms: f64,
    version: f64,
    message: [u8; MESSAGE_BYTES],
}

const MESSAGE_BYTES: usize = 256;

/// Decides for `key` (`key_len` bytes) as `lim:decide(key, cost, commit)` under the live
/// limits. Returns 0 with `out` filled, or 1 with `out.message` saying what was wrong.
///
/// # Safety
/// `block` comes from `lim:ffi_handle()` of a limiter still referenced by the caller; `key`
/// points to `key_len` readable bytes; `out` to a writable `FastDecision`.
#[no_mangle]
pub unsafe extern "C" fn slidewin_decide(
    block: *mut Block,
    key: *const u8,
    key_len: usize,
    cost: f64,
    commit: c_int,
    out: *mut FastDecision,
) -> c_int {
    // SAFETY: the caller's contract above: `out` is writable and not aliased during the call.
    let out = unsafe { &mut *out };
    // SAFETY: the caller's contract above: `key` holds `key_len` bytes for the call's length.
    let key = unsafe { std::slice::from_raw_parts(key, key_len) };
    // SAFETY: the block lives while `lim` does (the caller keeps it), and a worker's Lua runs
    // on one thread, so nothing else borrows it during the call.
    let block = unsafe { &mut *block };
    let decided = on_block(block, "lim:decide", |this| {
        let cost = cost_value(cost, "lim:decide")?;
        decide_versioned(this, key, cost, commit != 0, None, "lim:decide")
    });
    match decided {
        Ok((d, version)) => {
            out.allowed = d.allowed as c_int;
            out.window = d.window as c_int + 1;
            out.has_retry = d.retry_after_ms.is_some() as c_int;
            out.remaining = d.remaining as f64;
            out.retry_after_ms = d.retry_after_ms.unwrap_or(0) as f64;
            out.reset_after_ms = d.reset_after_ms as f64;
            out.version = version as f64;
            0
        }
        Err(message) => fail(out, &message),
    }
}

fn fail(out: &mut FastDecision, message: &str) -> c_int {
    let len = message.len().min(MESSAGE_BYTES);
    out.message[..len].copy_from_slice(&message.as_bytes()[..len]);
    out.message_len = len as c_int;
    1
}

/// Writes the RateLimit header's value, `<prefix><remaining>;t=<t_ms in whole seconds, rounded
/// up>`, into `out` (`cap` bytes): its length, or -1 when it does not fit. Every store's
/// headers are written by this one function (`resty.slidewin.fast`).
///
/// # Safety
/// `prefix` points to `prefix_len` readable bytes, `out` to `cap` writable ones.
#[no_mangle]
pub unsafe extern "C" fn slidewin_rate_value(
    prefix: *const u8,
    prefix_len: usize,
    remaining: f64,
    t_ms: f64,
    out: *mut u8,
    cap: usize,
) -> c_int {
    use std::io::Write;
    // SAFETY: the caller's contract above.
    let (prefix, out) = unsafe {
        (
            std::slice::from_raw_parts(prefix, prefix_len),
            std::slice::from_raw_parts_mut(out, cap),
        )
    };
    // Whole numbers below 2^53 (counts and milliseconds), exact as doubles.
    let (remaining, t_ms) = (remaining as u64, t_ms as u64);
    let mut rest = &mut out[..];
    let written = rest.write_all(prefix).is_ok()
        && write!(rest, "{remaining};t={}", t_ms.div_ceil(1000)).is_ok();
    match written {
        true => (cap - rest.len()) as c_int,
        false => -1,
    }
}
