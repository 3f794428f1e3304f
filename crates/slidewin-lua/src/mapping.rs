//! Shared memory for `slidewin.limiter{ shared = ... }`: anonymous `MAP_SHARED` mappings made
//! in nginx's master (in `init_by_lua*`, before the fork), so every worker inherits the same
//! pages, and the workers' identity as lock owners. The only `unsafe` of the shared store is
//! here.

use std::sync::atomic::{AtomicU64, Ordering};

use slidewin::shared::{Owner, ProcessOwner};

/// An anonymous shared mapping of `bytes` (page-aligned, zeroed), unmapped on drop; or
/// memory another module of the process mapped (`owned` false: never unmapped here).
pub struct Mapping {
    ptr: *mut libc::c_void,
    bytes: usize,
    owned: bool,
}

// SAFETY: the mapping is only reached as `&[AtomicU64]`, which is Send + Sync.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub fn new(bytes: usize) -> Result<Self, String> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
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
        if ptr == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(format!(
                "size: cannot map {bytes} bytes of shared memory: {err}"
            ));
        }
        Ok(Self {
            ptr,
            bytes,
            owned: true,
        })
    }

    /// The `n_words` words at `words`, mapped by another module (the native nginx module's
    /// zone, through `slidewin_nginx_zone`).
    ///
    /// # Safety
    /// `words` points to `n_words` aligned words of shared memory that stay mapped for the
    /// life of the process, and are only ever accessed atomically.
    pub unsafe fn borrowed(words: *const AtomicU64, n_words: usize) -> Self {
        Self {
            ptr: words as *mut libc::c_void,
            bytes: n_words * 8,
            owned: false,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The region as words, for as long as `self` lives.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: page-aligned (so aligned for AtomicU64), `bytes` long and mapped until drop;
        // every access to it goes through atomics, so other processes' writes are no data race.
        unsafe { std::slice::from_raw_parts(self.ptr as *const AtomicU64, self.bytes / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: mapped in `new`, unmapped once; no `words()` borrow outlives self.
            unsafe { libc::munmap(self.ptr, self.bytes) };
        }
    }
}

/// Worker processes as lock owners ([`slidewin::shared::ProcessOwner`]), with the process id
/// cached: `getpid` is a system call on every lock otherwise. A fork handler forgets the
/// cached id in the child, so each worker caches its own.
#[derive(Debug, Clone, Copy)]
pub struct WorkerOwner;

static PID: AtomicU64 = AtomicU64::new(0);
static FORK_HANDLER: std::sync::Once = std::sync::Once::new();

extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

impl WorkerOwner {
    pub fn new() -> Self {
        FORK_HANDLER.call_once(|| {
            // SAFETY: registers a handler that only stores to an atomic (async-signal-safe),
            // once per process; the module is never unloaded from a process that forks after.
            unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) };
        });
        Self
    }
}

impl Owner for WorkerOwner {
    fn id(&self) -> u64 {
        match PID.load(Ordering::Relaxed) {
            0 => {
                let pid = u64::from(std::process::id());
                PID.store(pid, Ordering::Relaxed);
                pid
            }
            pid => pid,
        }
    }
    fn is_alive(&self, id: u64) -> bool {
        ProcessOwner.is_alive(id)
    }
    fn pause(&self) {
        ProcessOwner.pause();
    }
}
