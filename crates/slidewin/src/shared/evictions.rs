//! What a process tells its error log of a zone's evictions: a key evicted while its windows
//! held units has them forgotten (its next call starts afresh), so evictions mean a zone too
//! small for its keys. Each binding reads [`super::Zone::evictions`] as often as it likes and
//! logs what [`EvictionWatch::poll`] answers, with its own way to fix it.
//!
//! ```
//! use slidewin::shared::EvictionWatch;
//!
//! let mut watch = EvictionWatch::new();
//! assert!(watch.poll(7, 0, 10_000).is_none()); // the first look only counts from there
//! assert!(watch.poll(7, 500, 10_000).is_none()); // nothing evicted since
//! let told = watch.poll(27, 2_000, 10_000).unwrap(); // told at once...
//! assert_eq!(
//!     told.to_string(),
//!     "20 keys holding units evicted in 2.0 s (10.0 a second), their windows forgotten \
//!      (they may be admitted past their limits)"
//! );
//! assert!(watch.poll(40, 5_000, 10_000).is_none()); // ...then at most every 10 s
//! assert_eq!(watch.poll(41, 12_000, 10_000).unwrap().keys, 14);
//! ```

use core::fmt;

/// A process's view of one zone's eviction count, for its error log.
#[derive(Debug, Clone, Copy)]
pub struct EvictionWatch {
    /// The count last told of (`u64::MAX`: not looked at yet).
    told: u64,
    /// Since when the untold evictions count, and when it last told.
    since_ms: i64,
    told_ms: i64,
}

/// Keys evicted with units in their windows over `ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// Keys evicted since the last telling.
    pub keys: u64,
    /// Milliseconds since the last telling (at least 1).
    pub ms: i64,
}

impl EvictionWatch {
    /// A watch that has not looked yet.
    pub const fn new() -> Self {
        Self {
            told: u64::MAX,
            since_ms: 0,
            told_ms: i64::MIN,
        }
    }

    /// The zone's count `evictions` read at `now_ms`: what to tell when it moved since the
    /// last telling, at once and then at most every `every_ms`. The first look only sets
    /// where counting starts.
    #[inline]
    pub fn poll(&mut self, evictions: u64, now_ms: i64, every_ms: i64) -> Option<Evicted> {
        // Every request may ask: one compare while nothing was evicted.
        if evictions == self.told {
            return None;
        }
        self.moved(evictions, now_ms, every_ms)
    }

    #[cold]
    fn moved(&mut self, evictions: u64, now_ms: i64, every_ms: i64) -> Option<Evicted> {
        if self.told == u64::MAX {
            (self.told, self.since_ms) = (evictions, now_ms);
            return None;
        }
        if now_ms.saturating_sub(self.told_ms) < every_ms {
            return None;
        }
        let keys = evictions.wrapping_sub(self.told);
        let ms = (now_ms - self.since_ms).max(1);
        (self.told, self.since_ms, self.told_ms) = (evictions, now_ms, now_ms);
        Some(Evicted { keys, ms })
    }
}

impl Default for EvictionWatch {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for Evicted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.ms as f64 / 1000.0;
        write!(
            f,
            "{} keys holding units evicted in {seconds:.1} s ({:.1} a second), their windows \
             forgotten (they may be admitted past their limits)",
            self.keys,
            self.keys as f64 / seconds
        )
    }
}
