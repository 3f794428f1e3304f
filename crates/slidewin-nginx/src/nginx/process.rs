//! The worker process as the zone's code sees it: a lock owner named by nginx's own pid, and
//! the wall clock of every decision. Nothing here reads the module's configuration, so the
//! zone's side uses it without going back up to the module's tables.

use slidewin::shared::{Owner, ProcessOwner};
use slidewin::Clock;

/// Worker processes as the zone's lock owners, by nginx's own `ngx_pid` (set in each process
/// as it starts): `getpid` would be a system call on every lock.
#[derive(Debug, Clone, Copy)]
pub struct WorkerOwner;

impl Owner for WorkerOwner {
    fn id(&self) -> u64 {
        // SAFETY: nginx writes ngx_pid once in each process before any request or zone init.
        u64::from(unsafe { ngx::ffi::ngx_pid }.unsigned_abs())
    }
    fn is_alive(&self, id: u64) -> bool {
        ProcessOwner.is_alive(id)
    }
    fn pause(&self) {
        ProcessOwner.pause();
    }
}

/// The wall clock in milliseconds since the Unix epoch, the core's `SystemClock`'s
/// (CLOCK_REALTIME), read without std's `Duration` arithmetic: this runs for every request.
#[derive(Debug, Clone, Copy)]
pub struct WallClock;

impl Clock for WallClock {
    fn now_ms(&self) -> i64 {
        let mut now = ngx::ffi::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec to write; CLOCK_REALTIME exists on every system
        // nginx runs on.
        unsafe { ngx::ffi::clock_gettime(ngx::ffi::CLOCK_REALTIME as _, &mut now) };
        // Before 1970 tv_sec is negative and tv_nsec still counts up from it: one scale.
        now.tv_sec * 1000 + now.tv_nsec / 1_000_000
    }
}
