//! A window's per-key state laid out in words of a shared region, read as the very state type
//! the in-process limiter uses (its arrays through [`crate::storage`]), so the algorithm in
//! shared memory is the one in `window.rs`, not a copy.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::assessment::{Assessment, States};
use crate::clock::check_time;
use crate::reservation::Amend;
use crate::rule::{RuleWindow, WindowConfig};
use crate::storage::{Cells, Entries, Ring, SharedCells};
use crate::window::{self, Window, NEVER};
use crate::{BucketQuota, BucketState, CounterState, Decision, Error, LogState, Quota};

/// A state read from words: loaded before a call, stored after it.
trait View<'a>: Window + Sized {
    /// Words the state takes (a log: room for `min(max_limit, window_ms) + 1` entries, the
    /// most it can hold and a spare).
    fn words(config: &Self::Config, max_limit: u64) -> Result<usize, Error>;
    fn load(config: &Self::Config, words: &'a [AtomicU64]) -> Self;
    fn store(&self, words: &'a [AtomicU64]);
    /// Empties the state.
    fn clear(config: &Self::Config, words: &[AtomicU64]);
    /// After a process died while writing the state: makes it one the algorithm can have
    /// made, counting at least what it held before the call that died (derived fields
    /// recounted, a header stored in part completed or rolled back); false when it cannot.
    fn repair(config: &Self::Config, max_limit: u64, words: &'a [AtomicU64]) -> bool;
}

fn get(words: &[AtomicU64], i: usize) -> u64 {
    words[i].load(Relaxed)
}

fn set(words: &[AtomicU64], i: usize, value: u64) {
    words[i].store(value, Relaxed);
    super::fault::point();
}

/// Runs `$f::<View>(&config, args)` for the view type of `$window`'s algorithm.
macro_rules! on_view {
    ($window:expr, $f:ident($($arg:expr),*)) => {
        match $window.config() {
            WindowConfig::Log(c) => $f::<SharedLog<'_>>(&c, $($arg),*),
            WindowConfig::Buckets(c) => $f::<SharedBuckets<'_>>(&c, $($arg),*),
            WindowConfig::Counter(c) => $f::<CounterState>(&c, $($arg),*),
        }
    };
}

fn words_of<'a, V: View<'a>>(config: &V::Config, max_limit: u64) -> Result<usize, Error> {
    V::words(config, max_limit)
}

fn clear_of<'a, V: View<'a>>(config: &V::Config, words: &[AtomicU64]) {
    V::clear(config, words)
}

fn repair_of<'a, V: View<'a>>(config: &V::Config, max_limit: u64, words: &'a [AtomicU64]) -> bool {
    V::repair(config, max_limit, words)
}

/// Runs `f` on the window state in `words`, then writes the state back.
#[inline]
fn updated<'a, V: View<'a>, T>(
    config: &V::Config,
    words: &'a [AtomicU64],
    f: impl FnOnce(&mut V) -> T,
) -> T {
    let mut view = V::load(config, words);
    let out = f(&mut view);
    view.store(words);
    out
}

fn assess_of<'a, V: View<'a>>(
    config: &V::Config,
    words: &'a [AtomicU64],
    now_ms: i64,
    cost: u64,
    limit: u64,
) -> Assessment {
    updated(config, words, |view: &mut V| {
        window::assess(config, view, now_ms, cost, limit, false)
    })
}

fn decide_alone_of<'a, V: View<'a>>(
    config: &V::Config,
    words: &'a [AtomicU64],
    now_ms: i64,
    cost: u64,
    limit: u64,
    commit: bool,
) -> Decision {
    updated(config, words, |view: &mut V| {
        window::decide_alone(config, view, now_ms, cost, limit, commit)
    })
}

fn record_of<'a, V: View<'a>>(config: &V::Config, words: &'a [AtomicU64], cost: u64) {
    updated(config, words, |view: &mut V| {
        window::record(config, view, cost)
    })
}

fn reset_after_of<'a, V: View<'a>>(config: &V::Config, words: &'a [AtomicU64]) -> u64 {
    V::load(config, words).reset_after_ms(config)
}

fn amend_of<'a, V: View<'a>>(
    config: &V::Config,
    words: &'a [AtomicU64],
    at: (i64, Option<i64>),
    (amend, max_limit): (Amend, u64),
) -> Result<(), Error> {
    // A refused time changes nothing, so storing the state back then is harmless.
    updated(config, words, |view: &mut V| {
        window::amend(config, view, at, amend, max_limit)
    })
}

fn used_of<'a, V: View<'a>>(config: &V::Config, words: &'a [AtomicU64], now_ms: i64) -> u64 {
    updated(config, words, |view: &mut V| {
        window::used_at(config, view, now_ms)
    })
}

fn idle_in_of<'a, V: View<'a>>(config: &V::Config, words: &'a [AtomicU64], now_ms: i64) -> u64 {
    window::idle_in_ms(config, &V::load(config, words), now_ms)
}

/// Words one window's state takes.
pub(crate) fn state_words(window: &RuleWindow) -> Result<usize, Error> {
    on_view!(window, words_of(window.max_limit()))
}

/// A window as words for a region's fingerprint, so a region made for another window is not
/// reused: its algorithm's number, max_limit, window_ms, bucket_ms (not the limit, which
/// changes live).
pub(crate) fn fingerprint(window: &RuleWindow) -> [u64; 4] {
    let [code, _limit, window_ms, bucket_ms, max_limit] = window.words();
    [code, max_limit, window_ms, bucket_ms]
}

/// The states of one key's windows in a way of the region, window `w` at `words[offsets[w]..offsets[w + 1]]`.
pub(crate) struct Way<'a> {
    pub(crate) windows: &'a [RuleWindow],
    pub(crate) offsets: &'a [usize],
    pub(crate) words: &'a [AtomicU64],
}

impl<'a> Way<'a> {
    #[inline]
    fn of(&self, w: usize) -> &'a [AtomicU64] {
        &self.words[self.offsets[w]..self.offsets[w + 1]]
    }

    /// Empties every window.
    pub(crate) fn clear(&self) {
        for (w, window) in self.windows.iter().enumerate() {
            on_view!(window, clear_of(self.of(w)));
        }
    }

    /// Whether every window holds a state its algorithm can have made; a window that does
    /// not is emptied, and the answer is false.
    pub(crate) fn repair(&self) -> bool {
        let mut sound = true;
        for (w, window) in self.windows.iter().enumerate() {
            if !on_view!(window, repair_of(window.max_limit(), self.of(w))) {
                on_view!(window, clear_of(self.of(w)));
                sound = false;
            }
        }
        sound
    }

    /// Changes what every window recorded at `stamp_ms` (`None`: the newest), at `now_ms`.
    pub(crate) fn amend(
        &self,
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        for (w, window) in self.windows.iter().enumerate() {
            let change = (amend, window.max_limit());
            on_view!(window, amend_of(self.of(w), (now_ms, stamp_ms), change))?;
        }
        Ok(())
    }

    /// The cost window `w` counts at `now_ms` (moved there, as a peek moves it).
    pub(crate) fn used(&self, w: usize, now_ms: i64) -> u64 {
        on_view!(self.windows[w], used_of(self.of(w), now_ms))
    }

    /// Whether every window is empty at `now_ms`.
    pub(crate) fn is_idle(&self, now_ms: i64) -> bool {
        self.idle_in_ms(now_ms) == 0
    }

    /// Milliseconds from `now_ms` until every window is empty, if nothing else arrives.
    pub(crate) fn idle_in_ms(&self, now_ms: i64) -> u64 {
        let idle_in =
            |(w, window): (usize, &RuleWindow)| on_view!(window, idle_in_of(self.of(w), now_ms));
        self.windows
            .iter()
            .enumerate()
            .map(idle_in)
            .max()
            .unwrap_or(0)
    }
}

impl States for Way<'_> {
    #[inline]
    fn assess(&mut self, w: usize, now_ms: i64, cost: u64, limit: u64) -> Assessment {
        on_view!(self.windows[w], assess_of(self.of(w), now_ms, cost, limit))
    }
    #[inline]
    fn record(&mut self, w: usize, cost: u64) {
        on_view!(self.windows[w], record_of(self.of(w), cost))
    }
    #[inline]
    fn reset_after_ms(&self, w: usize) -> u64 {
        on_view!(self.windows[w], reset_after_of(self.of(w)))
    }
    #[inline]
    fn decide_alone(&mut self, now_ms: i64, cost: u64, limit: u64, commit: bool) -> Decision {
        on_view!(
            self.windows[0],
            decide_alone_of(self.of(0), now_ms, cost, limit, commit)
        )
    }
}

/// A `newest_ms` word that a call can have written: [`NEVER`] or a valid time.
fn valid_time(word: u64) -> bool {
    word as i64 == NEVER || check_time("newest_ms", word as i64).is_ok()
}

// Counter: [newest_ms, previous, current].
impl<'a> View<'a> for CounterState {
    fn words(_: &Quota, _: u64) -> Result<usize, Error> {
        Ok(3)
    }
    #[inline]
    fn load(_: &Quota, words: &'a [AtomicU64]) -> Self {
        Self {
            newest_ms: get(words, 0) as i64,
            previous: get(words, 1),
            current: get(words, 2),
        }
    }
    #[inline]
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.previous);
        set(words, 2, self.current);
    }
    fn clear(_: &Quota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        set(words, 1, 0);
        set(words, 2, 0);
    }
    fn repair(_: &Quota, _: u64, words: &[AtomicU64]) -> bool {
        valid_time(get(words, 0))
    }
}

// Log: [newest_ms, expired, head, len], then a ring of `min(max_limit, window_ms) + 1`
// entries: one more than a log holds, so a call's new entry always lands in a slot past what
// the stored header covers (in a ring without the spare slot, a full one's new entry took the
// slot of the oldest, which a process killed before the header was stored left in the log as
// a time not yet reached). The header is stored in an order whose every prefix the repair
// reads back as a log counting at least what it held before the call: the time, then
// `expired` (the entries the call popped still lead the list, and are found by their running
// sums), then `head` (slots past the call's entries trail the list, and are found by their
// times), then the length.
type SharedLog<'a> = LogState<Ring<SharedCells<'a>>>;
const LOG_HEADER: usize = 4;

impl<'a> View<'a> for SharedLog<'a> {
    fn words(quota: &Quota, max_limit: u64) -> Result<usize, Error> {
        let entries = max_limit.min(quota.window_ms() as u64).saturating_add(1);
        let words = entries
            .checked_mul(2)
            .and_then(|w| usize::try_from(w + LOG_HEADER as u64).ok());
        words.ok_or(Error::invalid(
            "limit",
            "at most 2^61 with a window that long",
            crate::Value::UInt(max_limit),
        ))
    }
    #[inline]
    fn load(_: &Quota, words: &'a [AtomicU64]) -> Self {
        LogState {
            entries: Ring {
                cells: SharedCells(&words[LOG_HEADER..]),
                head: get(words, 2) as usize,
                len: get(words, 3) as usize,
            },
            expired: get(words, 1),
            newest_ms: get(words, 0) as i64,
        }
    }
    #[inline]
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.expired);
        set(words, 2, self.entries.head as u64);
        set(words, 3, self.entries.len as u64);
    }
    fn clear(_: &Quota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        for i in 1..LOG_HEADER {
            set(words, i, 0);
        }
    }
    /// A log whose header a killed call stored in part is made whole: the entries it popped
    /// are dropped from the front, the slots past its entries cut from the back, and copies
    /// a give-back that moved entries down left behind are dropped, the entries after them
    /// moved down (ascending, so a repair that dies too leaves copies again). A log the
    /// algorithm made is left as it is.
    fn repair(quota: &Quota, max_limit: u64, words: &'a [AtomicU64]) -> bool {
        let cap = (words.len() - LOG_HEADER) / 2;
        let (head, len) = (get(words, 2), get(words, 3));
        if !valid_time(get(words, 0)) || head >= cap as u64 || len > cap as u64 {
            return false;
        }
        let log = SharedLog::load(quota, words);
        let oldest_kept = log.newest_ms.saturating_sub(quota.window_ms());
        let mut expired = log.expired;
        // Leading entries that left the window by `newest_ms`, or that `expired` already
        // counts: the call that died had popped them.
        let mut popped = 0;
        while popped < log.entries.len() {
            let entry = log.entries.get(popped);
            if entry.ms <= oldest_kept {
                expired = entry.through;
            } else if entry.through.wrapping_sub(expired) as i64 > 0 {
                break;
            }
            popped += 1;
        }
        // Then entries in order, each adding cost, all of them within twice `max_limit` (a
        // limit lowered at run time leaves what the higher one admitted; debts fill up to
        // twice it). One that is not is a slot past the end, or a copy of an entry kept
        // already (with the count it had before or after a give-back, never more than the
        // entries after it): skipped.
        let mut entries = log.entries;
        let (mut kept, mut after_ms, mut before) = (0, i64::MIN, expired);
        for i in popped..entries.len() {
            let entry = entries.get(i);
            let cost = entry.through.wrapping_sub(before) as i64;
            let in_order = entry.ms > after_ms && entry.ms <= log.newest_ms && cost > 0;
            if !in_order || entry.through.wrapping_sub(expired) > max_limit.saturating_mul(2) {
                continue;
            }
            if i != popped + kept {
                entries.set(popped + kept, entry);
            }
            (after_ms, before) = (entry.ms, entry.through);
            kept += 1;
        }
        if popped > 0 || popped + kept < entries.len() {
            set(words, 1, expired);
            set(words, 2, ((entries.head + popped) % cap) as u64);
            set(words, 3, kept as u64);
        }
        true
    }
}

// Buckets: [newest_ms, head_start_ms, head, newest_used, total], then the ring of counters.
type SharedBuckets<'a> = BucketState<SharedCells<'a>>;
const BUCKETS_HEADER: usize = 5;

impl<'a> View<'a> for SharedBuckets<'a> {
    fn words(config: &BucketQuota, _: u64) -> Result<usize, Error> {
        Ok(BUCKETS_HEADER + config.buckets() as usize + 1)
    }
    #[inline]
    fn load(_: &BucketQuota, words: &'a [AtomicU64]) -> Self {
        BucketState {
            counts: SharedCells(&words[BUCKETS_HEADER..]),
            head: get(words, 2) as usize,
            newest_used: get(words, 3) as usize,
            total: get(words, 4),
            head_start_ms: get(words, 1) as i64,
            newest_ms: get(words, 0) as i64,
        }
    }
    #[inline]
    fn store(&self, words: &'a [AtomicU64]) {
        set(words, 0, self.newest_ms as u64);
        set(words, 1, self.head_start_ms as u64);
        set(words, 2, self.head as u64);
        set(words, 3, self.newest_used as u64);
        set(words, 4, self.total);
    }
    fn clear(_: &BucketQuota, words: &[AtomicU64]) {
        set(words, 0, NEVER as u64);
        set(words, 1, NEVER as u64);
        for i in 2..words.len() {
            set(words, i, 0);
        }
    }
    /// The call that died stored the time first, then where the head bucket starts, then the
    /// head: a time a bucket or more past the head's start is the first alone, which the
    /// repair rolls back to the head's start (the buckets the call emptied had left the
    /// window by its time; its cost, recorded into a bucket the old head calls old, leaves at
    /// the next move). Without it, a call at or before that time would record into the old
    /// head bucket and its cost would leave the window up to a window early.
    fn repair(config: &BucketQuota, _: u64, words: &'a [AtomicU64]) -> bool {
        let slots = (words.len() - BUCKETS_HEADER) as u64;
        let (newest_ms, head_start_ms) = (get(words, 0) as i64, get(words, 1) as i64);
        let placed = head_start_ms <= newest_ms;
        if !valid_time(newest_ms as u64) || !valid_time(head_start_ms as u64) || !placed {
            return false;
        }
        if get(words, 2) >= slots || get(words, 3) >= slots {
            return false;
        }
        let mut state = SharedBuckets::load(config, words);
        let total = |state: &SharedBuckets<'_>| {
            (0..state.counts.len()).fold(0u64, |t, i| t.saturating_add(state.counts.get(i)))
        };
        if head_start_ms == NEVER {
            // Never placed, so empty; a first call that died before placing its head may have
            // stored its time or its cost, which emptying it forgets.
            return newest_ms == NEVER && total(&state) == 0;
        }
        if newest_ms - head_start_ms >= config.bucket_ms() {
            state.newest_ms = head_start_ms;
            set(words, 0, head_start_ms as u64);
        }
        // The total and the newest bucket used are derived: a process that died between a
        // counter and them left them apart, so count them again.
        state.clear_outside_window(config);
        state.total = total(&state);
        if state.total > 0 {
            state.newest_used = state.newest_used_slot(config);
        }
        set(words, 3, state.newest_used as u64);
        set(words, 4, state.total);
        true
    }
}
