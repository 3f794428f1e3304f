//! The request's side: the preaccess handler, `$slidewin_status` and the export of a zone to
//! the Lua module.

use core::ffi::{c_int, c_void};
use core::ptr;

use ngx::core::Status as NgxStatus;
use ngx::ffi::{
    ngx_http_complex_value, ngx_http_complex_value_t, ngx_http_get_flushed_variable,
    ngx_http_request_t, ngx_http_variable_value_t, ngx_int_t, ngx_list_push, ngx_pnalloc,
    ngx_str_t, ngx_table_elt_t, NGX_LOG_ERR,
};
use ngx::http::{HttpModule, HttpModuleLocationConf, HttpModuleMainConf};
use ngx::ngx_log_error;
use slidewin::shared::ZoneExport;

use super::{guarded, Limit, Module};
use crate::limit::{self, Call, Refusal, Status};
use crate::zone::ZoneState;

/// A complex value of the request (its bytes live in the request's pool).
///
/// # Safety
/// `r` is a live request and `cv` was compiled for this configuration.
unsafe fn value<'r>(
    r: *mut ngx_http_request_t,
    cv: *mut ngx_http_complex_value_t,
) -> Option<&'r [u8]> {
    let mut out = ngx_str_t::empty();
    // SAFETY: the caller's contract.
    if unsafe { ngx_http_complex_value(r, cv, &mut out) } != NgxStatus::NGX_OK.into() {
        return None;
    }
    Some(if out.len == 0 {
        &[]
    } else {
        // SAFETY: nginx wrote `len` bytes at `data`, in the request's pool.
        unsafe { core::slice::from_raw_parts(out.data, out.len) }
    })
}

/// The key of `limit`: its one variable as nginx holds it, or its complex value.
///
/// # Safety
/// `r` is a live request and `limit` was compiled for this configuration.
unsafe fn key<'r>(r: *mut ngx_http_request_t, limit: &Limit) -> Option<&'r [u8]> {
    let Some(index) = limit.key_index else {
        // SAFETY: the caller's contract.
        return unsafe { value(r, limit.key) };
    };
    // SAFETY: the caller's contract; nginx gave the index for this configuration.
    let v = unsafe { ngx_http_get_flushed_variable(r, index) };
    if v.is_null() {
        return None;
    }
    // SAFETY: a value nginx filled: `len` bytes at `data`, valid while the request lives; a
    // variable not found is empty, as in a complex value.
    // (Its bit fields read once: each read is a loop over the bits in the bindings.)
    unsafe {
        let len = (*v).len() as usize;
        if len == 0 || (*v).not_found() != 0 {
            return Some(&[]);
        }
        Some(core::slice::from_raw_parts((*v).data, len))
    }
}

/// Sets `$slidewin_status` for the request (a static string, so no allocation).
///
/// # Safety
/// `r` is a live request.
unsafe fn set_status(r: *mut ngx_http_request_t, status: Status) {
    let index = Module::module().ctx_index;
    // SAFETY: r->ctx has a slot per http module; ours holds a pointer to a static string.
    unsafe { *(*r).ctx.add(index) = status.text().as_ptr() as *mut c_void };
}

pub(super) extern "C" fn preaccess(r: *mut ngx_http_request_t) -> ngx_int_t {
    guarded(500, || {
        // SAFETY: nginx passes a live request; ctx is a per-module array of pointers.
        let main = unsafe { (*r).main };
        let index = Module::module().ctx_index;
        // SAFETY: as above; a request already decided (an internal redirect, a subrequest's
        // parent) is not counted again.
        if unsafe { !(*(*main).ctx.add(index)).is_null() } {
            return NgxStatus::NGX_DECLINED.into();
        }
        // SAFETY: r is live; loc_conf holds this module's LocConf.
        let Some(loc) = Module::location_conf(unsafe { &*r }) else {
            return NgxStatus::NGX_DECLINED.into();
        };
        if loc.limits.is_empty() {
            return NgxStatus::NGX_DECLINED.into();
        }
        let calls = loc.limits.iter().filter_map(|l| {
            // SAFETY: the limit's zone and values live as long as the configuration.
            let key = unsafe { key(r, l) }?;
            if key.is_empty() {
                return None; // like limit_req: an empty key is not limited
            }
            let cost = match l.cost.is_null() {
                true => Ok(1),
                // SAFETY: as above.
                false => unsafe { value(r, l.cost) }
                    .ok_or_else(String::new)
                    .and_then(limit::cost),
            };
            Some(cost.map(|cost| Call {
                // SAFETY: the zone is boxed in the main conf, which outlives the request.
                zone: unsafe { &*l.zone },
                key,
                cost,
                style: l.style,
                dry_run: l.dry_run,
                status: l.status,
            }))
        });
        // SAFETY: the connection's log, valid while the request lives.
        let log = unsafe { (*(*r).connection).log };
        let logged = |refusal: Refusal| {
            ngx_log_error!(loc.refusal_log_level(), log, "{refusal}");
        };
        match limit::decide(calls, logged) {
            Ok(None) => NgxStatus::NGX_DECLINED.into(),
            Ok(Some(outcome)) => {
                // SAFETY: r is live; set on the main request, which every phase of it reads.
                unsafe { set_status(main, outcome.status) };
                let (zone, answer) = outcome.answer;
                // SAFETY: r is live; the values are written into its pool.
                let headers = zone.headers(
                    answer,
                    |len| unsafe { pool_bytes(r, len) },
                    |name, value| unsafe { add_header(r, name, value) },
                );
                if !headers {
                    return 500;
                }
                match outcome.refuse_with {
                    Some(status) => status as ngx_int_t,
                    None => NgxStatus::NGX_DECLINED.into(),
                }
            }
            Err(message) => {
                ngx_log_error!(NGX_LOG_ERR, log, "{}", message);
                500
            }
        }
    })
}

/// `len` bytes of the request's pool, for header values.
///
/// # Safety
/// `r` is a live request; the bytes live as long as its pool.
unsafe fn pool_bytes<'r>(r: *mut ngx_http_request_t, len: usize) -> Option<&'r mut [u8]> {
    // SAFETY: the caller's contract; ngx_pnalloc gives `len` writable bytes or null.
    let data = unsafe { ngx_pnalloc((*r).pool, len) } as *mut u8;
    // SAFETY: as above, `len` bytes at a non-null `data`, nothing else refers to them.
    (!data.is_null()).then(|| unsafe { core::slice::from_raw_parts_mut(data, len) })
}

/// Adds an output header: `name` static, `value` in the request's pool.
///
/// # Safety
/// `r` is a live request and `value` lives as long as its pool.
unsafe fn add_header(r: *mut ngx_http_request_t, name: &'static str, value: &mut [u8]) -> bool {
    // SAFETY: the caller's contract; ngx_list_push gives an uninitialised element, zeroed
    // here (so `next`, in nginx versions that have it, is null).
    unsafe {
        let h = ngx_list_push(&mut (*r).headers_out.headers) as *mut ngx_table_elt_t;
        if h.is_null() {
            return false;
        }
        ptr::write_bytes(h, 0, 1);
        (*h).hash = 1;
        (*h).key = ngx_str_t {
            len: name.len(),
            data: name.as_ptr() as *mut u8,
        };
        (*h).value = ngx_str_t {
            len: value.len(),
            data: value.as_mut_ptr(),
        };
    }
    true
}

pub(super) extern "C" fn status_variable(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    _: usize,
) -> ngx_int_t {
    guarded(NgxStatus::NGX_ERROR.into(), || {
        let index = Module::module().ctx_index;
        // SAFETY: nginx passes a live request and a value to fill; our ctx slot holds null or
        // a status text from set_status.
        unsafe {
            let text = *(*(*r).main).ctx.add(index) as *const u8;
            let v = &mut *v;
            if text.is_null() {
                v.set_not_found(1);
                return NgxStatus::NGX_OK.into();
            }
            let len = [Status::Passed, Status::Rejected, Status::RejectedDryRun]
                .iter()
                .find(|s| s.text().as_ptr() == text)
                .map_or(0, |s| s.text().len());
            v.data = text as *mut u8;
            v.set_len(len as _);
            v.set_valid(1);
            v.set_no_cacheable(0);
            v.set_not_found(0);
        }
        NgxStatus::NGX_OK.into()
    })
}

/// The zone named by the `len` bytes at `name` in the configuration the calling worker runs.
///
/// # Safety
/// `name` points to `len` readable bytes; called in an nginx worker, on its one thread.
unsafe fn zone_named<'c>(name: *const u8, len: usize) -> Option<&'c ZoneState> {
    // SAFETY: the caller's contract.
    let name = unsafe { core::slice::from_raw_parts(name, len) };
    // SAFETY: ngx_cycle is the worker's running cycle; its http main conf holds our MainConf.
    let main = Module::main_conf(unsafe { &*ngx::ffi::ngx_cycle })?;
    let zone = main.zones.iter().find(|z| z.spec.name.as_bytes() == name)?;
    Some(&**zone)
}

/// The zone `name` (`len` bytes) of the configuration the calling worker runs, for the Lua
/// module's `slidewin.nginx_zone(name)` (nginx loads modules with `RTLD_GLOBAL`, so it finds
/// this symbol): 0 with `out` filled, 1 when no such zone is mapped.
///
/// # Safety
/// `name` points to `len` readable bytes and `out` to a writable `ZoneExport`; called in an
/// nginx worker, on its one thread.
#[no_mangle]
pub unsafe extern "C" fn slidewin_nginx_zone(
    name: *const u8,
    len: usize,
    out: *mut ZoneExport,
) -> c_int {
    guarded(1, || {
        // SAFETY: the caller's contract.
        match unsafe { zone_named(name, len) }.and_then(|z| z.export()) {
            Some(export) => {
                // SAFETY: the caller's contract.
                unsafe { out.write(export) };
                0
            }
            None => 1,
        }
    })
}

/// The name `RateLimit-Policy` gives window `window` (0-based) of the zone `name` (`len`
/// bytes), for the Lua module's door to send the same headers: 0 with `out`/`out_len` set to
/// bytes that live as long as the configuration, 1 when there is no such zone or window.
///
/// # Safety
/// As [`slidewin_nginx_zone`]; `out` and `out_len` are writable.
#[no_mangle]
pub unsafe extern "C" fn slidewin_nginx_zone_window_name(
    name: *const u8,
    len: usize,
    window: usize,
    out: *mut *const u8,
    out_len: *mut usize,
) -> c_int {
    guarded(1, || {
        // SAFETY: the caller's contract.
        let zone = unsafe { zone_named(name, len) };
        match zone.and_then(|z| z.spec.window_names.get(window)) {
            Some(window_name) => {
                // SAFETY: the caller's contract; the name lives in the configuration.
                unsafe {
                    out.write(window_name.as_ptr());
                    out_len.write(window_name.len());
                }
                0
            }
            None => 1,
        }
    })
}
