//! What a region is made for ([`RegionKind`]), and how a zone's region is cut for one limiter
//! config: the header, then `sets` of [`WAYS`] ways, each way a key's length word, its last
//! use, its bytes, its refusals and the windows' states.

use alloc::vec::Vec;
use core::fmt;

use super::region;
use super::state;
use super::table::{check_key_bytes, Cut};
use crate::rule::{Rule, RuleWindow, MAX_WINDOWS};
use crate::window_spec::Algorithm;
use crate::{Error, Value};

/// Header words of a zone's region (zone.rs names them).
pub(crate) const HEADER_WORDS: usize = 32;
/// After the key, a zone's way keeps its refusals since its windows were last all empty
/// (scan.rs), then the windows' states.
pub(crate) const REFUSED_WORDS: usize = 1;

/// What a region of shared memory is made for, with what fixes its layout: a host that keeps
/// regions by name (across an nginx reload) reuses one only for an equal kind and size, so
/// no region is ever read as another kind or another layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionKind {
    /// A keyed rule ([`super::Zone`]).
    Rule {
        /// Its windows, by shape.
        windows: Vec<WindowShape>,
        /// The longest key stored as it is.
        max_key_bytes: usize,
    },
    /// The live limits alone ([`super::LiveLimits`]) of a rule whose keys live in one process.
    LiveLimits {
        /// The rule's windows, by shape.
        windows: Vec<WindowShape>,
        /// The key length of the rule's in-process store.
        max_key_bytes: usize,
    },
    /// Concurrency slots ([`super::Inflight`]).
    Concurrency {
        /// The most slots a key may hold.
        max_limit: u64,
        /// The longest key stored as it is.
        max_key_bytes: usize,
    },
    /// A node's leases of a limiter kept in Redis ([`super::Leases`]).
    Leases {
        /// How long a lease is spent, and its margin: leases in the region were granted for
        /// them, so other ones need another region.
        validity_ms: u64,
        /// See `validity_ms`.
        margin_ms: u64,
        /// The longest key stored as it is.
        max_key_bytes: usize,
    },
    /// Runtime rules ([`super::Directory`]).
    Directory {
        /// Rules the table has room for.
        max_rules: usize,
    },
}

impl RegionKind {
    /// A keyed rule's region.
    pub fn rule(rule: &Rule, max_key_bytes: usize) -> Self {
        let windows = rule.windows().iter().map(WindowShape::of).collect();
        Self::Rule {
            windows,
            max_key_bytes,
        }
    }

    /// The region of a rule's live limits, for its in-process store of `max_key_bytes`.
    pub fn live_limits(rule: &Rule, max_key_bytes: usize) -> Self {
        let windows = rule.windows().iter().map(WindowShape::of).collect();
        Self::LiveLimits {
            windows,
            max_key_bytes,
        }
    }
}

/// A window as a region is laid out for it: its algorithm and lengths, not its limit (which
/// may change while the region lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowShape {
    /// How the window counts.
    pub algorithm: Algorithm,
    /// A bucket's length, for buckets.
    pub bucket_ms: Option<i64>,
    /// The window's length.
    pub window_ms: i64,
    /// The most its limit may be.
    pub max_limit: u64,
}

impl WindowShape {
    /// The shape of `window`.
    pub fn of(window: &RuleWindow) -> Self {
        Self {
            algorithm: window.algorithm(),
            bucket_ms: window.bucket_ms(),
            window_ms: window.window_ms(),
            max_limit: window.max_limit(),
        }
    }
}

/// As a note names it: `log max_limit 30 window_ms 5000`.
impl fmt::Display for WindowShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            algorithm,
            bucket_ms,
            window_ms,
            max_limit,
        } = self;
        let name = algorithm.name();
        write!(f, "{name} max_limit {max_limit} window_ms {window_ms}")?;
        match bucket_ms {
            Some(bucket_ms) => write!(f, " bucket_ms {bucket_ms}"),
            None => Ok(()),
        }
    }
}

/// How a zone's region is cut for one rule: the table's [`Cut`], and where each window's
/// state starts in a way's payload (after its refusals word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) cut: Cut,
    pub(crate) state_words: usize,
    /// Where each window's state starts within the way's state (and where the last ends).
    pub(crate) offsets: [usize; MAX_WINDOWS + 1],
}

impl Layout {
    pub(crate) fn new(
        rule: &Rule,
        max_key_bytes: usize,
        region_words: usize,
    ) -> Result<Self, Error> {
        let (state_words, offsets) = Self::states(rule)?;
        let payload_words = REFUSED_WORDS + state_words;
        Ok(Self {
            cut: Cut::new(HEADER_WORDS, max_key_bytes, payload_words, region_words)?,
            state_words,
            offsets,
        })
    }

    /// Bytes one key of `rule` takes in a region (its share of a set).
    pub(crate) fn bytes_per_key(rule: &Rule, max_key_bytes: usize) -> Result<usize, Error> {
        check_key_bytes(max_key_bytes)?;
        let (state_words, _) = Self::states(rule)?;
        let payload_words = REFUSED_WORDS + state_words;
        Ok(Cut::bytes_per_key(
            HEADER_WORDS,
            max_key_bytes,
            payload_words,
        ))
    }

    /// Words of a key's windows' states, and where each window's starts.
    fn states(rule: &Rule) -> Result<(usize, [usize; MAX_WINDOWS + 1]), Error> {
        let mut offsets = [0_usize; MAX_WINDOWS + 1];
        for (w, window) in rule.windows().iter().enumerate() {
            let words = offsets[w].checked_add(state::state_words(window)?);
            offsets[w + 1] = words.ok_or(Error::invalid(
                "limit",
                "at most 2^61 with a window that long",
                Value::UInt(window.max_limit()),
            ))?;
        }
        Ok((offsets[rule.windows().len()], offsets))
    }

    /// The rule's windows (by algorithm, max_limit and length: not their limits, which may
    /// change while the region lives) and the cut, as one word.
    pub(crate) fn fingerprint(&self, rule: &Rule, region_words: usize) -> u64 {
        let windows = rule.windows().iter().flat_map(state::fingerprint);
        let words = windows.chain([
            rule.windows().len() as u64,
            self.cut.key_words as u64,
            self.state_words as u64,
            self.cut.sets as u64,
            region_words as u64,
        ]);
        region::fingerprint(words)
    }
}
