//! Live limits: one word per window that every process sharing it reads on each decision, so a
//! limit changed by one process holds for all at once. Beside each live limit sits the limit
//! the config had when the words were last attached: a new config (an nginx reload) that
//! changes a window's limit sets the live one to it, and one that keeps it keeps whatever was
//! set at run time.
//!
//! ```
//! use core::sync::atomic::AtomicU64;
//! use slidewin::rule::{Rule, RuleWindow};
//! use slidewin::shared::LiveLimits;
//! use slidewin::Quota;
//!
//! let words: Vec<AtomicU64> = (0..LiveLimits::<&[AtomicU64]>::WORDS).map(|_| AtomicU64::new(0)).collect();
//! let rule = Rule::one(RuleWindow::log(Quota::new(10, 1_000)?).with_max_limit(100)?);
//! let live = LiveLimits::attach(&words[..], &rule);
//! live.set(&rule, 0, 50)?;
//! assert_eq!(LiveLimits::attach(&words[..], &rule).get(&rule)[0], 50); // same config: kept
//! assert_eq!(live.set(&rule, 0, 101).unwrap_err().to_string(),
//!     "limit must be a positive integer at most the window's max_limit, got 101");
//! # Ok::<(), slidewin::Error>(())
//! ```

use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::rule::{Limits, Rule, MAX_WINDOWS};
use crate::Error;

/// Words of the live limits, then of the configured ones, then a count of changes.
const LIVE: usize = 0;
const CONFIGURED: usize = MAX_WINDOWS;
const VERSION: usize = 2 * MAX_WINDOWS;

/// A rule's live limits in [`LiveLimits::WORDS`] words of shared memory.
pub struct LiveLimits<R> {
    pub(super) words: R,
}

impl<R: AsRef<[AtomicU64]>> LiveLimits<R> {
    /// Words the limits take.
    pub const WORDS: usize = 2 * MAX_WINDOWS + 1;

    /// The limits of `rule` in `words` (zeroed, or attached before): a window whose configured
    /// limit differs from the one last attached takes it as its live limit.
    pub fn attach(words: R, rule: &Rule) -> Self {
        let w = words.as_ref();
        for (i, window) in rule.windows().iter().enumerate() {
            if crate::live::config_wins(window.limit(), w[CONFIGURED + i].load(Relaxed)) {
                w[CONFIGURED + i].store(window.limit(), Relaxed);
                w[LIVE + i].store(window.limit(), Relaxed);
                w[VERSION].fetch_add(1, Release);
            }
        }
        Self { words }
    }

    /// The live limits, one per window of `rule`.
    pub fn get(&self, rule: &Rule) -> Limits {
        let w = self.words.as_ref();
        Limits::from_fn(rule.windows().len(), |i| w[LIVE + i].load(Relaxed))
    }

    /// Sets window `window`'s live limit (`1..=max_limit`).
    pub fn set(&self, rule: &Rule, window: usize, limit: u64) -> Result<(), Error> {
        let window = rule.check_window(window)?;
        let limit = rule.windows()[window].check_limit(limit)?;
        let w = self.words.as_ref();
        // The limit before the version: whoever sees the new version reads the new limit. A
        // process killed between the two leaves the version behind until the next change;
        // decisions read the limit itself, only what is derived from it (a header) lags.
        w[LIVE + window].store(limit, Relaxed);
        w[VERSION].fetch_add(1, Release);
        Ok(())
    }

    /// How many times a limit changed: a process that derives something from the limits (a
    /// header) rebuilds it when this moves.
    pub fn version(&self) -> u64 {
        self.words.as_ref()[VERSION].load(Acquire)
    }
}
