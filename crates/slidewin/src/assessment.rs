//! One window's answer to a call, and the fold of every window's answer into the one
//! [`Decision`] of a rule. A limiter of one window and a rule of several, on the heap or in
//! shared memory, all answer through here; a rule of one window takes its limiter's own path
//! ([`crate::window::decide_alone`]), so it decides exactly as its limiter alone.

use crate::Decision;

/// Whether `cost` fits one window under `limit`, before anything is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Assessment {
    pub(crate) allowed: bool,
    /// Cost the window still admits.
    pub(crate) room: u64,
    /// As [`Decision::retry_after_ms`].
    pub(crate) retry_after_ms: Option<u64>,
}

impl Assessment {
    /// The answer to a call of `cost` that this assessment describes, as window `window`.
    #[inline]
    pub(crate) fn decision(
        self,
        cost: u64,
        limit: u64,
        reset_after_ms: u64,
        window: usize,
    ) -> Decision {
        Decision {
            allowed: self.allowed,
            limit,
            // A peek reports what would remain once the cost is recorded, like a committed call.
            remaining: if self.allowed {
                self.room - cost
            } else {
                self.room
            },
            retry_after_ms: self.retry_after_ms,
            reset_after_ms,
            window,
        }
    }
}

/// The windows' states of one key, as [`fold`] reads them: a rule's states on the heap,
/// or a way of a shared region.
pub(crate) trait States {
    /// Move window `w` to `now_ms` (checked) and tell whether `cost` fits under `limit`,
    /// recording nothing.
    fn assess(&mut self, w: usize, now_ms: i64, cost: u64, limit: u64) -> Assessment;
    /// Record `cost` in window `w`.
    fn record(&mut self, w: usize, cost: u64);
    /// Milliseconds until window `w` holds nothing.
    fn reset_after_ms(&self, w: usize) -> u64;
    /// The decision of window 0 when it is the only one ([`crate::window::decide_alone`]).
    fn decide_alone(&mut self, now_ms: i64, cost: u64, limit: u64, commit: bool) -> Decision;
}

/// The one decision of every limiter and rule: all windows admit `cost`, or none records it.
#[inline]
pub(crate) fn fold(
    states: &mut impl States,
    limits: &[u64],
    now_ms: i64,
    cost: u64,
    commit: bool,
) -> Decision {
    // One window decides as a limiter does: its admission is the rule's.
    if let [limit] = *limits {
        return states.decide_alone(now_ms, cost, limit, commit);
    }
    let mut allowed = true;
    let (mut least_room, mut least_room_window) = (u64::MAX, 0);
    // The refusing window that waits longest (`None`: never fits) and its wait.
    let (mut longest, mut longest_window) = (Some(0), 0);
    for (w, &limit) in limits.iter().enumerate() {
        let found = states.assess(w, now_ms, cost, limit);
        if found.room < least_room {
            (least_room, least_room_window) = (found.room, w);
        }
        if !found.allowed {
            let longer = match (found.retry_after_ms, longest) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(wait), Some(most)) => allowed || wait > most,
            };
            if longer {
                (longest, longest_window) = (found.retry_after_ms, w);
            }
            allowed = false;
        }
    }
    if allowed && commit {
        for w in 0..limits.len() {
            states.record(w, cost);
        }
    }
    let window = if allowed {
        least_room_window
    } else {
        longest_window
    };
    let found = Assessment {
        allowed,
        room: least_room,
        retry_after_ms: longest,
    };
    found.decision(cost, limits[window], states.reset_after_ms(window), window)
}
