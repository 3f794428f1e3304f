//! The answer to one rate-limit call, and what the call asks besides the answer ([`Call`]).

/// What a call asks besides deciding: every store and door takes one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Records nothing (an unknown key is not stored).
    Peek,
    /// Records the cost when it fits; a refusal is counted as one.
    Check,
    /// Records as `Check`; the caller lets a refused call through, so a refusal is counted as
    /// a would-be one.
    DryRun,
}

impl Call {
    /// Whether the call records its cost when it fits.
    pub const fn commits(self) -> bool {
        !matches!(self, Call::Peek)
    }
}

/// What a limiter decided, with everything an HTTP layer needs for its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Decision {
    /// Whether the call's cost fits (and, for a committing call, was recorded).
    pub allowed: bool,
    /// The configured limit.
    pub limit: u64,
    /// Cost still admissible in the window after this call. An allowed peek reports it as if
    /// its cost were recorded, like the committing call it previews; a refused call records
    /// nothing, so it reports the room left before it.
    pub remaining: u64,
    /// `Some(0)` when allowed; when refused, the exact wait in milliseconds until the same call
    /// would be admitted if nothing else arrives; `None` means never (`cost > limit`).
    pub retry_after_ms: Option<u64>,
    /// Milliseconds until the window holds nothing (0 when it is empty).
    pub reset_after_ms: u64,
    /// Which window of a [`crate::rule::Rule`] the other fields describe (0-based; always 0
    /// for a single-window limiter): when refused, the refusing window with the longest wait;
    /// when admitted, the one with the least remaining.
    pub window: usize,
}

impl Decision {
    /// Cost the window counted when this decision on `cost` was made: the limit less the room
    /// found (an admitted call's `remaining` is what is left after its own cost).
    ///
    /// ```
    /// use slidewin::{Limiter, SlidingLog};
    /// let mut limiter = SlidingLog::new(10, 1_000)?;
    /// limiter.check_at(0, 3)?;
    /// assert_eq!(limiter.peek_at(1, 2)?.used(2), 3);   // admitted: 10 - (5 + 2)
    /// assert_eq!(limiter.peek_at(1, 8)?.used(8), 3);   // refused: 10 - 7
    /// # Ok::<(), slidewin::Error>(())
    /// ```
    pub fn used(&self, cost: u64) -> u64 {
        let room = if self.allowed {
            self.remaining.saturating_add(cost)
        } else {
            self.remaining
        };
        self.limit.saturating_sub(room)
    }
}
