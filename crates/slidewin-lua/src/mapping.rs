//! Shared memory for `slidewin.limiter{ shared = ... }`: anonymous `MAP_SHARED` mappings made
//! in nginx's master (in `init_by_lua*`, before the fork), so every worker inherits the same
//! pages. The only `unsafe` of the shared store is here.

use std::sync::atomic::AtomicU64;

/// An anonymous shared mapping of `bytes` (page-aligned, zeroed), unmapped on drop.
pub struct Mapping {
    ptr: *mut libc::c_void,
    bytes: usize,
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
        Ok(Self { ptr, bytes })
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
        // SAFETY: mapped in `new`, unmapped once; no `words()` borrow outlives self.
        unsafe { libc::munmap(self.ptr, self.bytes) };
    }
}
