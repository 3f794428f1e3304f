//! One lock word per set of keys, held for the few hundred nanoseconds of one call.
//!
//! The word holds its owner's id (0: free), so a waiter can ask whether the owner still lives.
//! A process killed while it holds a lock (SIGKILL: no cleanup runs) leaves its id there; the
//! next waiter finds the owner dead, takes the lock over and repairs the set before using it.

use core::sync::atomic::{AtomicU64, Ordering};

/// Who takes locks, and how to tell whether another owner still lives: the host's view of
/// processes (the Lua module answers with process ids; tests with threads).
pub trait Owner {
    /// This caller's id: non-zero, and different from every other caller sharing the region.
    fn id(&self) -> u64;
    /// Whether the owner `id` is still running (a dead one will never release its locks).
    fn is_alive(&self, id: u64) -> bool;
    /// Called while waiting, after a short spin (e.g. yield the processor).
    fn pause(&self) {
        core::hint::spin_loop();
    }
}

impl<O: Owner> Owner for &O {
    fn id(&self) -> u64 {
        (**self).id()
    }
    fn is_alive(&self, id: u64) -> bool {
        (**self).is_alive(id)
    }
    fn pause(&self) {
        (**self).pause()
    }
}

/// Spins before the first pause: a lock is held for a call's length.
const SPINS: u32 = 64;
/// Pauses between two questions whether the owner lives.
const PAUSES_PER_CHECK: u32 = 16;

/// How the lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// From a free word.
    Free,
    /// From a dead owner: what it guarded may be half written.
    FromDead,
}

/// Takes `word` for `owner`, waiting while a live owner holds it.
pub(crate) fn lock(word: &AtomicU64, owner: &impl Owner) -> Taken {
    let me = owner.id();
    let mut waits = 0u32;
    loop {
        let holder = match word.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Taken::Free,
            Err(holder) => holder,
        };
        waits = waits.wrapping_add(1);
        if waits < SPINS || holder == 0 {
            core::hint::spin_loop();
            continue;
        }
        owner.pause();
        let checks = (waits - SPINS) % PAUSES_PER_CHECK == 0;
        if checks
            && !owner.is_alive(holder)
            && word
                .compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            return Taken::FromDead;
        }
    }
}

/// Releases `word`, publishing every write made under it.
pub(crate) fn unlock(word: &AtomicU64) {
    word.store(0, Ordering::Release);
}

/// The processes of one machine as owners, by process id: an owner is dead when its
/// `/proc/<pid>/stat` is gone or says zombie (killed, not yet reaped). Linux; feature `std`.
///
/// A dead owner's id could be taken by a new process before a waiter asks about it; process
/// ids are reused only after the kernel has cycled through `pid_max` of them, far longer than
/// a waiter takes to notice.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessOwner;

#[cfg(feature = "std")]
impl Owner for ProcessOwner {
    fn id(&self) -> u64 {
        u64::from(std::process::id())
    }

    fn is_alive(&self, id: u64) -> bool {
        let Ok(stat) = std::fs::read_to_string(std::format!("/proc/{id}/stat")) else {
            return false;
        };
        // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        !matches!(state, Some('Z' | 'X' | 'x'))
    }

    fn pause(&self) {
        std::thread::yield_now();
    }
}
