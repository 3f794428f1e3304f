//! Processes and threads for the shared-memory tests: a region mapped before fork (as nginx's
//! master maps its zones), children forked to run on it, threads as lock owners.

use slidewin::shared::Owner;
use std::sync::atomic::AtomicU64;

/// A region of shared memory mapped before fork, as nginx's master does.
pub struct Mapping {
    ptr: *mut libc::c_void,
    bytes: usize,
}

impl Mapping {
    pub fn new(bytes: usize) -> Self {
        // SAFETY: an anonymous shared mapping; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Self { ptr, bytes }
    }

    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: page-aligned, zeroed, `bytes` long, alive as long as self; only atomics touch it.
        unsafe { std::slice::from_raw_parts(self.ptr as *const AtomicU64, self.bytes / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in new, unmapped once.
        unsafe { libc::munmap(self.ptr, self.bytes) };
    }
}

/// Forks a child that runs `body` and exits; returns its pid.
pub fn fork(body: impl FnOnce()) -> libc::pid_t {
    // SAFETY: the child only runs `body` (on the region and its own stack; a test takes no
    // lock across the fork) and leaves through _exit.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0);
        if pid == 0 {
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_ok();
            libc::_exit(if ok { 0 } else { 1 });
        }
        pid
    }
}

pub fn wait(pid: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    // SAFETY: our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    status
}

/// SIGKILL: no cleanup runs in the child, as when the OOM killer or an operator kills a worker.
pub fn kill(pid: libc::pid_t) {
    // SAFETY: our own child.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// Threads as owners: each its own id, all alive.
pub struct Thread(pub u64);
impl Owner for Thread {
    fn id(&self) -> u64 {
        self.0
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
    fn pause(&self) {
        std::thread::yield_now();
    }
}
