//! The answer to one rate-limit call.

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
