//! `slidewin_metrics`'s content handler. A scrape walks every zone [`metrics::STEP`] at a
//! time; while it is not over, the request stays open (one more reference on it) and an event
//! posted to the event loop's next round walks the next step, so the worker serves the
//! connections that are ready in between, as nginx's own modules do with work in parts. The
//! pending scrape lives in the request's pool with a cleanup, so a request nginx ends before
//! the walk does (terminated) takes its posted event and its walk with it.

use core::ffi::c_void;
use core::ptr;

use ngx::core::Status as NgxStatus;
use ngx::ffi::{
    ngx_chain_t, ngx_event_t, ngx_http_finalize_request, ngx_http_output_filter,
    ngx_http_request_t, ngx_http_run_posted_requests, ngx_http_send_header, ngx_int_t,
    ngx_pool_cleanup_add, ngx_post_event, ngx_posted_next_events, ngx_str_t, NGX_LOG_ERR,
};
use ngx::http::HttpModuleMainConf;
use ngx::ngx_log_error;
use slidewin::shared::ZoneExport;

use super::{guarded, Module};
use crate::metrics::{self, Scrape};
use crate::zone::Words;

/// A scrape between two steps. The event comes first (`repr(C)`), so the event nginx hands
/// back is the scrape.
#[repr(C)]
struct Pending {
    event: ngx_event_t,
    r: *mut ngx_http_request_t,
    /// Taken when the walk is over.
    scrape: Option<Scrape>,
}

/// The words an export points at.
fn words(export: &ZoneExport) -> Words {
    // SAFETY: an export of a mapped zone points at its words, which nginx keeps mapped while
    // the cycle that made them lives: at least as long as a request of that cycle.
    unsafe { core::slice::from_raw_parts(export.words, export.n_words) }
}

pub(super) extern "C" fn metrics_handler(r: *mut ngx_http_request_t) -> ngx_int_t {
    guarded(500, || {
        // SAFETY: r is live; the main conf outlives it.
        let Some(main) = Module::main_conf(unsafe { &*r }) else {
            return 500;
        };
        let zones = main.zones.iter().filter_map(|z| {
            let export = z.export()?;
            Some((z.spec.name.as_str(), z.dry_runs, export, words(&export)))
        });
        let mut scrape = match Scrape::new(zones) {
            Ok(scrape) => scrape,
            // SAFETY: r is live.
            Err(message) => return unsafe { failed(r, &message) },
        };
        match scrape.step(metrics::STEP) {
            // SAFETY: r is live, in its content phase.
            Ok(true) => return unsafe { send(r, scrape.text()) },
            Ok(false) => {}
            // SAFETY: r is live.
            Err(message) => return unsafe { failed(r, &message) },
        }
        // SAFETY: an all-zero event is an idle one (nginx's own are calloc'ed).
        let mut event: ngx_event_t = unsafe { core::mem::zeroed() };
        event.handler = Some(step);
        // SAFETY: r is live: its connection and log too.
        unsafe {
            event.data = (*r).connection.cast();
            event.log = (*(*r).connection).log;
        }
        // SAFETY: r is live; the cleanup's data is `size_of::<Pending>()` bytes of its pool,
        // aligned for pointers (all Pending holds), freed with the request.
        let pending = unsafe {
            let cleanup = ngx_pool_cleanup_add((*r).pool, size_of::<Pending>());
            if cleanup.is_null() {
                return 500;
            }
            let pending = (*cleanup).data.cast::<Pending>();
            pending.write(Pending {
                event,
                r,
                scrape: Some(scrape),
            });
            (*cleanup).handler = Some(forget);
            pending
        };
        // SAFETY: the pending scrape lives as long as the request; the main request is kept
        // by one more reference until `step` finalizes it.
        unsafe {
            let main = (*r).main;
            (*main).set_count((*main).count() + 1);
            ngx_post_event(
                &mut (*pending).event,
                ptr::addr_of_mut!(ngx_posted_next_events),
            );
        }
        NgxStatus::NGX_DONE.into()
    })
}

/// The posted event: walks a step, then posts itself again or answers.
extern "C" fn step(ev: *mut ngx_event_t) {
    let pending = ev.cast::<Pending>();
    // SAFETY: `ev` is the event of the Pending metrics_handler posted, in its request's pool;
    // the request is kept open by the reference metrics_handler added.
    let r = unsafe { (*pending).r };
    let rc = guarded(Some(500), || {
        // SAFETY: as above; nothing else reaches the scrape.
        let scrape = unsafe { &mut (*pending).scrape };
        let walked = scrape.as_mut().map(|s| s.step(metrics::STEP));
        match walked {
            Some(Ok(false)) => None,
            // SAFETY: r is live, past its content handler, nothing sent yet.
            Some(Ok(true)) => scrape.take().map(|s| unsafe { send(r, s.text()) }),
            // SAFETY: r is live.
            Some(Err(message)) => Some(unsafe { failed(r, &message) }),
            None => Some(500),
        }
    });
    // SAFETY: `ev` and `r` as above: a step to come keeps both; the finalization drops the
    // reference metrics_handler added (the pool's cleanup drops what the scrape still holds).
    unsafe {
        let Some(rc) = rc else {
            ngx_post_event(ev, ptr::addr_of_mut!(ngx_posted_next_events));
            return;
        };
        let c = (*r).connection;
        ngx_http_finalize_request(r, rc);
        ngx_http_run_posted_requests(c);
    }
}

/// The request pool's cleanup: a scrape still posted leaves the event queue, and what it
/// holds is dropped.
extern "C" fn forget(data: *mut c_void) {
    let pending = data.cast::<Pending>();
    guarded((), || {
        // SAFETY: `data` is the Pending metrics_handler wrote, in the pool being destroyed;
        // a posted event is in nginx's queue, taken out as ngx_delete_posted_event does.
        unsafe {
            let event = &mut (*pending).event;
            if event.posted() != 0 {
                event.set_posted(0);
                let queue = &mut event.queue;
                (*queue.next).prev = queue.prev;
                (*queue.prev).next = queue.next;
            }
            ptr::drop_in_place(pending);
        }
    });
}

/// Logs `message` and answers 500.
///
/// # Safety
/// `r` is a live request.
unsafe fn failed(r: *mut ngx_http_request_t, message: &str) -> ngx_int_t {
    // SAFETY: the caller's contract: the connection's log lives as long as the request.
    let log = unsafe { (*(*r).connection).log };
    ngx_log_error!(NGX_LOG_ERR, log, "{}", message);
    500
}

/// Sends a 200 with `body` as Prometheus text.
///
/// # Safety
/// `r` is a live request in its content phase (or kept open after it), nothing sent yet.
unsafe fn send(r: *mut ngx_http_request_t, body: String) -> ngx_int_t {
    const CONTENT_TYPE: &str = "text/plain; version=0.0.4";
    // SAFETY: the caller's contract; the buffer and chain are allocated in the request pool.
    unsafe {
        let r = &mut *r;
        r.headers_out.status = 200;
        r.headers_out.content_length_n = body.len() as _;
        r.headers_out.content_type = ngx_str_t {
            len: CONTENT_TYPE.len(),
            data: CONTENT_TYPE.as_ptr() as *mut u8,
        };
        r.headers_out.content_type_len = CONTENT_TYPE.len();
        let rc = ngx_http_send_header(r);
        if rc == NgxStatus::NGX_ERROR.into()
            || rc > NgxStatus::NGX_OK.into()
            || r.header_only() != 0
        {
            return rc;
        }
        let buf = ngx::ffi::ngx_create_temp_buf(r.pool, body.len().max(1));
        if buf.is_null() {
            return 500;
        }
        ptr::copy_nonoverlapping(body.as_ptr(), (*buf).pos, body.len());
        (*buf).last = (*buf).pos.add(body.len());
        (*buf).set_last_buf(1);
        (*buf).set_last_in_chain(1);
        let mut out = ngx_chain_t {
            buf,
            next: ptr::null_mut(),
        };
        ngx_http_output_filter(r, &mut out)
    }
}
