//! The request's side: the preaccess handler, the log phase's settlements, `$slidewin_status`
//! and the export of a zone to the Lua module.

use core::ffi::c_int;
use core::ptr;

use ngx::core::Status as NgxStatus;
use ngx::ffi::{
    ngx_http_complex_value, ngx_http_complex_value_t, ngx_http_get_flushed_variable,
    ngx_http_request_t, ngx_http_variable_value_t, ngx_int_t, ngx_list_push, ngx_palloc,
    ngx_pnalloc, ngx_str_t, ngx_table_elt_t, ngx_uint_t, NGX_LOG_ERR, NGX_LOG_WARN,
};
use ngx::http::{HttpModuleLocationConf, HttpModuleMainConf};
use ngx::ngx_log_error;
use slidewin::reservation::{Excess, Reservation};
use slidewin::rule::Limits;
use slidewin::shared::ZoneExport;

use super::{guarded, KeyLimits, Limit, LimitCost, Module};
use crate::config;
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

/// What a request's decision leaves for the rest of it: the mark that it was decided, and
/// what `$slidewin_status` and `$slidewin_msec` tell. It rides in the main request's slot of
/// a hidden variable (the module's `slidewin_decision`), which internal redirects keep where
/// they zero the module contexts, as `limit_req` keeps its status on the main request: the
/// time above the status in the slot's data word.
#[derive(Clone, Copy)]
struct Decided {
    status: Status,
    now_ms: i64,
}

/// The statuses in the order of their discriminants, which a decision's word holds.
const STATUSES: [Status; 3] = [Status::Passed, Status::Rejected, Status::RejectedDryRun];

impl Decided {
    fn word(self) -> usize {
        ((self.now_ms as usize) << 2) | self.status as usize
    }
    fn of(word: usize) -> Self {
        Decided {
            status: STATUSES[(word & 3).min(2)],
            now_ms: (word >> 2) as i64,
        }
    }
}

/// The decision of request `r`'s main request, if made (`index`: the hidden variable's).
///
/// # Safety
/// `r` is a live request of the configuration that gave `index`.
unsafe fn decided(r: *mut ngx_http_request_t, index: ngx_uint_t) -> Option<Decided> {
    // SAFETY: the caller's contract: the main request has a value slot per indexed variable.
    unsafe {
        let slot = &*(*(*r).main).variables.add(index);
        (slot.valid() != 0).then(|| Decided::of(slot.data as usize))
    }
}

/// Marks `r`'s main request decided with `status` at `now_ms`.
///
/// # Safety
/// As [`decided`].
unsafe fn set_decided(r: *mut ngx_http_request_t, index: ngx_uint_t, decided: Decided) {
    // SAFETY: as decided; only this module writes the slot (no config can name it).
    unsafe {
        let slot = &mut *(*(*r).main).variables.add(index);
        slot.data = decided.word() as *mut u8;
        slot.set_valid(1);
    }
}

/// The hidden variable read by name: nothing (no config can name it; nginx wants a handler).
pub(super) extern "C" fn no_value(
    _: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    _: usize,
) -> ngx_int_t {
    // SAFETY: nginx passes a value to fill.
    unsafe { (*v).set_not_found(1) };
    NgxStatus::NGX_OK.into()
}

pub(super) extern "C" fn preaccess(r: *mut ngx_http_request_t) -> ngx_int_t {
    guarded(500, || {
        // SAFETY: nginx passes a live request; loc_conf holds this module's LocConf.
        let Some(loc) = Module::location_conf(unsafe { &*r }) else {
            return NgxStatus::NGX_DECLINED.into();
        };
        // SAFETY: r is live, and the index is its configuration's. A request already decided
        // (before an internal redirect, or a subrequest's parent) is not counted again.
        if loc.limits.is_empty() || unsafe { decided(r, loc.decision) }.is_some() {
            return NgxStatus::NGX_DECLINED.into();
        }
        let calls = loc.limits.iter().filter_map(|l| {
            // SAFETY: the limit's zone and values live as long as the configuration.
            let key = unsafe { key(r, l) }?;
            if key.is_empty() {
                return None; // like limit_req: an empty key is not limited
            }
            // SAFETY: the zone is boxed in the main conf, which outlives the request.
            let zone = unsafe { &*l.zone };
            let cost = match l.cost {
                LimitCost::Fixed(cost) => Ok(cost),
                // SAFETY: as above.
                LimitCost::Variable(cv) => unsafe { value(r, cv) }
                    .ok_or_else(String::new)
                    .and_then(config::cost),
            };
            let limits = match &l.limits {
                KeyLimits::Zone => None,
                // SAFETY: as above.
                given => match unsafe { own_limits(r, given, zone) } {
                    Ok(limits) => limits,
                    Err(message) => return Some(Err(message)),
                },
            };
            Some(cost.map(|cost| Call {
                zone,
                key,
                cost,
                limits,
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
        let mut admitted = Vec::new();
        let kept = loc.settles.then_some(&mut admitted);
        match limit::decide(calls, loc.limits.len(), logged, kept) {
            Ok(None) => NgxStatus::NGX_DECLINED.into(),
            Ok(Some(outcome)) => {
                let (zone, answer) = outcome.answer;
                for l in &loc.limits {
                    // SAFETY: the zone is boxed in the main conf, which outlives the request.
                    let warning = unsafe { &*l.zone }.eviction_warning(answer.now_ms);
                    if let Some(warning) = warning {
                        ngx_log_error!(NGX_LOG_WARN, log, "{}", warning);
                    }
                }
                let decision = Decided {
                    status: outcome.status,
                    now_ms: answer.now_ms,
                };
                // SAFETY: r is live, and the index is its configuration's.
                unsafe { set_decided(r, loc.decision, decision) };
                // SAFETY: r is live; the limits are its location's.
                if loc.settles && !unsafe { keep_reserved(r, &loc.limits, &admitted) } {
                    return 500;
                }
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

/// A call that reserved its cost, kept in the main request's pool until the log phase.
#[derive(Clone, Copy)]
struct Reserved {
    zone: *const ZoneState,
    /// The limit's `settle=` and `above=`.
    settle: *mut ngx_http_complex_value_t,
    above: Excess,
    key: *const u8,
    key_len: usize,
    cost: u64,
    stamp_ms: i64,
}

/// Keeps the calls of `admitted` whose limit has `settle=` in `r`'s main request for the log
/// phase: in its pool, named by the hidden variable's slot (as the decision is). False when
/// the pool had no room.
///
/// # Safety
/// `r` is a live request whose location has `limits`.
#[cold]
#[inline(never)]
unsafe fn keep_reserved(
    r: *mut ngx_http_request_t,
    limits: &[Limit],
    admitted: &[(Call, i64)],
) -> bool {
    // The admitted calls whose limit has settle=, with it (read twice: a count, then the
    // records, with no list on the heap between).
    let reserved = || {
        admitted.iter().filter_map(|&(call, stamp_ms)| {
            let limit = limits.iter().find(|l| ptr::eq(l.zone, call.zone))?;
            Some((call, stamp_ms, (limit.settle?, limit.above)))
        })
    };
    let n = reserved().count();
    if n == 0 {
        return true;
    }
    // SAFETY: the caller's contract: the main conf is the request's configuration's.
    let Some(index) = Module::main_conf(unsafe { &*r }).and_then(|m| m.reserved) else {
        return true;
    };
    // SAFETY: r is live; ngx_palloc gives aligned room for the records or null.
    let items = unsafe {
        let main = (*r).main;
        ngx_palloc((*main).pool, n * core::mem::size_of::<Reserved>())
    } as *mut Reserved;
    if items.is_null() {
        return false;
    }
    for (i, (call, stamp_ms, (settle, above))) in reserved().enumerate() {
        // SAFETY: r is live; the key's copy lives as long as the main request's pool.
        let Some(key) = (unsafe { pool_bytes((*r).main, call.key.len()) }) else {
            return false;
        };
        key.copy_from_slice(call.key);
        let item = Reserved {
            zone: call.zone,
            settle,
            above,
            key: key.as_ptr(),
            key_len: key.len(),
            cost: call.cost,
            stamp_ms,
        };
        // SAFETY: `items` has room for the `n` records `reserved` gives.
        unsafe { items.add(i).write(item) };
    }
    // SAFETY: r is live and `index` names a variable of its configuration; only this module
    // writes the slot (no config can name it).
    unsafe {
        let slot = &mut *(*(*r).main).variables.add(index);
        slot.data = items.cast();
        slot.set_len(n as _);
        slot.set_valid(1);
    }
    true
}

/// The log phase: a main request's reservations settled for what each call used (its
/// `settle=` value), once; one whose value is missing or empty stays whole.
pub(super) extern "C" fn log_phase(r: *mut ngx_http_request_t) -> ngx_int_t {
    guarded(NgxStatus::NGX_DECLINED.into(), || {
        // SAFETY: nginx passes a live request; the main conf is its configuration's.
        let Some(index) = Module::main_conf(unsafe { &*r }).and_then(|m| m.reserved) else {
            return NgxStatus::NGX_DECLINED.into();
        };
        // SAFETY: r is live; a subrequest's log phase leaves the main request's to it.
        if unsafe { (*r).main } != r {
            return NgxStatus::NGX_DECLINED.into();
        }
        // SAFETY: r is live and `index` names a variable of its configuration.
        let slot = unsafe { &mut *(*r).variables.add(index) };
        if slot.valid() == 0 {
            return NgxStatus::NGX_DECLINED.into();
        }
        slot.set_valid(0);
        // SAFETY: keep_reserved wrote `len` records at `data`, in this request's pool.
        let items = unsafe {
            core::slice::from_raw_parts(slot.data as *const Reserved, slot.len() as usize)
        };
        // SAFETY: the connection's log, valid while the request lives.
        let log = unsafe { (*(*r).connection).log };
        for item in items {
            // SAFETY: the zone and the value live as long as the configuration, the key as
            // the request's pool.
            let (zone, used, key) = unsafe {
                (
                    &*item.zone,
                    value(r, item.settle),
                    core::slice::from_raw_parts(item.key, item.key_len),
                )
            };
            let reserved = Reservation {
                stamp_ms: item.stamp_ms,
                units: item.cost,
            };
            if let Err(message) = limit::settle(zone, key, &reserved, (used, item.above)) {
                ngx_log_error!(NGX_LOG_ERR, log, "{}", message);
            }
        }
        NgxStatus::NGX_DECLINED.into()
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

/// A limit's `limit=` for `r` (none: the zone's limits), off the path of limits without it.
///
/// # Safety
/// `r` is a live request and `given` its location's.
#[cold]
#[inline(never)]
unsafe fn own_limits<'r>(
    r: *mut ngx_http_request_t,
    given: &'r KeyLimits,
    zone: &ZoneState,
) -> Result<Option<&'r Limits>, String> {
    let text = match given {
        KeyLimits::Zone => return Ok(None),
        KeyLimits::Fixed(limits) => return Ok(Some(limits)),
        // SAFETY: the caller's contract.
        KeyLimits::Variable(cv) => match unsafe { value(r, *cv) } {
            None | Some([]) => return Ok(None),
            Some(text) => text,
        },
    };
    let limits = config::limits(&zone.spec.name, &zone.spec.rule, text)?;
    // SAFETY: the caller's contract.
    let pooled = unsafe { pool_value(r, limits) };
    pooled
        .map(Some)
        .ok_or_else(|| "slidewin_limit: no memory for the limits".to_string())
}

/// `value` moved into the request's pool (none: the pool had no room).
///
/// # Safety
/// `r` is a live request; the value lives as long as its pool.
unsafe fn pool_value<'r, T: Copy>(r: *mut ngx_http_request_t, value: T) -> Option<&'r T> {
    // SAFETY: the caller's contract; ngx_palloc gives room aligned for a word (a T of words
    // here) or null.
    let data = unsafe { ngx_palloc((*r).pool, core::mem::size_of::<T>()) } as *mut T;
    if data.is_null() {
        return None;
    }
    // SAFETY: room for one T at `data`, which nothing else refers to.
    unsafe {
        data.write(value);
        Some(&*data)
    }
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

/// A variable that tells of the request's decision (`index`: the hidden variable's, the
/// variable's data): `text` of it, in bytes of the request's pool or static; not found before
/// the decision (or without one).
fn decided_variable<'r>(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    index: usize,
    text: impl FnOnce(Decided) -> Option<&'r [u8]>,
) -> ngx_int_t {
    guarded(NgxStatus::NGX_ERROR.into(), || {
        // SAFETY: nginx passes a live request of the configuration whose preconfiguration
        // gave `index`, and a value to fill.
        let (decided, v) = unsafe { (decided(r, index as ngx_uint_t), &mut *v) };
        match decided.and_then(text) {
            Some(text) => {
                v.data = text.as_ptr() as *mut u8;
                v.set_len(text.len() as _);
                v.set_valid(1);
                v.set_no_cacheable(0);
                v.set_not_found(0);
            }
            None => v.set_not_found(1),
        }
        NgxStatus::NGX_OK.into()
    })
}

/// `$slidewin_status`: PASSED, REJECTED or REJECTED_DRY_RUN, as `$limit_req_status`.
pub(super) extern "C" fn status_variable(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    index: usize,
) -> ngx_int_t {
    decided_variable(r, v, index, |d| Some(d.status.text().as_bytes()))
}

/// `$slidewin_msec`: when the decision was made, in seconds with millisecond resolution, as
/// `$msec` (which is the time nginx's event loop last woke, earlier on a loaded worker): an
/// access log replays the decisions at their own times with it.
pub(super) extern "C" fn msec_variable(
    r: *mut ngx_http_request_t,
    v: *mut ngx_http_variable_value_t,
    index: usize,
) -> ngx_int_t {
    decided_variable(r, v, index, |d| {
        let (s, ms) = (d.now_ms.div_euclid(1000), d.now_ms.rem_euclid(1000));
        let text = format!("{s}.{ms:03}");
        // SAFETY: r is live; the bytes live as long as its pool.
        let bytes = unsafe { pool_bytes(r, text.len()) }?;
        bytes.copy_from_slice(text.as_bytes());
        Some(&*bytes)
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
