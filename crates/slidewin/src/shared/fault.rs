//! Kill points, for tests only (feature `fault-points`, which no binding enables).
//!
//! A process killed (SIGKILL) in the middle of a call leaves the words it was writing half
//! written and its set's lock held; the next caller finds the owner dead, takes the lock over
//! and repairs the set. To prove that holds wherever the kill lands, every store a locked call
//! makes into a region's words goes through [`point`], and a test arms its thread with
//! [`stop_after`]: right after the N-th such store the thread calls the test's `stop`, which
//! parks it for good (no unwinding, so the lock stays held, exactly as a kill leaves it).
//! Without the feature [`point`] is empty and the stores cost what they did.

#[cfg(feature = "fault-points")]
mod armed {
    use std::boxed::Box;
    use std::cell::RefCell;

    type Stop = Box<dyn FnOnce()>;

    std::thread_local! {
        /// Stores left before `stop` runs, and `stop`.
        static ARMED: RefCell<Option<(u64, Stop)>> = const { RefCell::new(None) };
    }

    /// Runs `stop` on this thread right after its `stores`-th store into a region's words from
    /// now (the first when `stores` is 0). `stop` is meant never to return, as a killed
    /// process never does; if it returns, the call goes on.
    pub fn stop_after(stores: u64, stop: impl FnOnce() + 'static) {
        ARMED.with(|armed| *armed.borrow_mut() = Some((stores, Box::new(stop))));
    }

    /// Disarms this thread: whether it was still armed (its calls made fewer stores).
    pub fn disarm() -> bool {
        ARMED.with(|armed| armed.borrow_mut().take().is_some())
    }

    /// Counts one store; runs the armed `stop` when it was the last one allowed.
    pub(crate) fn point() {
        let stop = ARMED.with(|armed| {
            let mut armed = armed.borrow_mut();
            match armed.as_mut() {
                Some((left, _)) if *left > 1 => {
                    *left -= 1;
                    None
                }
                _ => armed.take().map(|(_, stop)| stop),
            }
        });
        // Outside the borrow: `stop` may arm the thread again.
        if let Some(stop) = stop {
            stop();
        }
    }
}

#[cfg(feature = "fault-points")]
pub(crate) use armed::point;
#[cfg(feature = "fault-points")]
pub use armed::{disarm, stop_after};

/// Counts one store (nothing without the feature).
#[cfg(not(feature = "fault-points"))]
#[inline(always)]
pub(crate) fn point() {}
