//! Rules made, changed and removed while the processes run: [`Directory`].

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use super::lock::{self, Owner};
use super::zone::Zone;
use crate::rule::{Rule, RuleWindow, MAX_WINDOWS};
use crate::window_spec::WINDOW_WORDS;
use crate::{Error, Value};

/// Bytes of a page, the unit a rule's memory comes in.
pub const PAGE_BYTES: usize = 4096;
const PAGE_WORDS: usize = PAGE_BYTES / 8;
/// How long a removed rule's pages stay unused.
pub const GRACE_MS: i64 = 1_000;
/// The longest rule name.
pub const MAX_NAME_BYTES: usize = 64;

const MAGIC: u64 = u64::from_le_bytes(*b"slidedr1");
const HEADER_WORDS: usize = 16;
const H_MAGIC: usize = 0;
const H_SEED: usize = 1; // two words
const H_ENTRIES: usize = 3;
const H_LOCK: usize = 4;
const H_GENERATION: usize = 5;

// An entry: generation (0: none), when it was removed, its pages, the rule.
const E_GENERATION: usize = 0;
const E_RETIRED_MS: usize = 1;
const E_FIRST_PAGE: usize = 2;
const E_PAGES: usize = 3;
const E_MAX_KEY_BYTES: usize = 4;
const E_WINDOWS: usize = 5;
const E_NAME_LEN: usize = 6;
const E_NAME: usize = 7;
const E_RULE: usize = E_NAME + MAX_NAME_BYTES / 8;
const ENTRY_WORDS: usize = E_RULE + MAX_WINDOWS * WINDOW_WORDS;

/// A rule the directory holds: its place in the table and in the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The rule, as it was put.
    pub rule: Rule,
    /// Its keys' longest stored length.
    pub max_key_bytes: usize,
    /// Bytes of its pages.
    pub bytes: usize,
    entry: usize,
    generation: u64,
    first_page: usize,
}

/// Counts of a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirectoryStats {
    /// Rules held.
    pub rules: u64,
    /// Pages in use (or held for [`GRACE_MS`] after their rule was removed).
    pub pages_used: u64,
    /// Pages in all.
    pub pages: u64,
}

/// A part of a region: the words of one rule's pages, for its [`Zone`].
#[derive(Debug, Clone)]
pub struct Part<R> {
    region: R,
    start: usize,
    len: usize,
}

impl<R: AsRef<[AtomicU64]>> AsRef<[AtomicU64]> for Part<R> {
    fn as_ref(&self) -> &[AtomicU64] {
        &self.region.as_ref()[self.start..self.start + self.len]
    }
}

/// Rules made, changed and removed while the processes run, in one region of a fixed size: a
/// gateway adds a rule from any worker, and every worker finds it by name.
///
/// The region holds a header, a table of `max_rules` entries (each a rule's name, windows,
/// key length and where its pages are) and pages of [`PAGE_BYTES`]. A rule's keys live in a
/// [`Zone`] over its own run of pages; removing a rule frees them for later rules (after
/// [`GRACE_MS`], so a process still deciding on the old rule never writes into its successor).
/// A rule that does not fit is an error that names the bytes it needs. Changes take the
/// table's lock word, which names its owner like a set's lock, so a process killed while it
/// changes the table leaves it to the next one. Putting a rule again with other limits only
/// keeps its keys' windows and makes the new limits its live ones.
///
/// ```
/// use core::sync::atomic::AtomicU64;
/// use slidewin::rule::{Rule, RuleWindow};
/// use slidewin::shared::{Directory, Owner};
/// use slidewin::Quota;
///
/// #[derive(Clone)]
/// struct OneProcess;
/// impl Owner for OneProcess {
///     fn id(&self) -> u64 { 1 }
///     fn is_alive(&self, _: u64) -> bool { true }
/// }
///
/// let words: Vec<AtomicU64> = (0..(1 << 17)).map(|_| AtomicU64::new(0)).collect();
/// let rules = Directory::attach(&words[..], 16, OneProcess, [1, 2])?;
/// let rule = Rule::one(RuleWindow::log(Quota::new(2, 1_000)?));
/// let found = rules.put(b"api", &rule, 64, 64 << 10, 0)?;
/// let zone = rules.zone(&found, OneProcess)?;
/// assert!(zone.check_at(b"alice", 0, 1)?.allowed);
/// assert_eq!(rules.find(b"api").map(|f| f.rule), Some(rule));
/// rules.remove(b"api", 10);
/// assert!(rules.find(b"api").is_none());
/// assert!(!rules.is_current(&found));
/// # Ok::<(), slidewin::Error>(())
/// ```
pub struct Directory<R, O: Owner> {
    region: R,
    entries: usize,
    pages: usize,
    owner: O,
    seed: [u64; 2],
}

/// The table, locked.
struct Locked<'d>(&'d AtomicU64);

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        lock::unlock(self.0);
    }
}

impl<R: AsRef<[AtomicU64]> + Clone, O: Owner> Directory<R, O> {
    /// The directory in `region` with room for `max_rules` rules: laid out afresh (with the
    /// secret `seed`) unless it already holds a directory of that many, which is kept.
    pub fn attach(region: R, max_rules: usize, owner: O, seed: [u64; 2]) -> Result<Self, Error> {
        let words = region.as_ref();
        if max_rules == 0 || max_rules > 65_536 {
            let got = Value::UInt(max_rules as u64);
            return Err(Error::invalid("max_rules", "from 1 to 65536", got));
        }
        let table = HEADER_WORDS + max_rules * ENTRY_WORDS;
        let pages = words.len().saturating_sub(table) / PAGE_WORDS;
        if pages == 0 {
            return Err(Error::RegionTooSmall {
                needed: ((table + PAGE_WORDS) * 8) as u64,
                got: (words.len() * 8) as u64,
            });
        }
        let kept = words[H_MAGIC].load(Ordering::Acquire) == MAGIC
            && words[H_ENTRIES].load(Ordering::Relaxed) == max_rules as u64;
        if !kept {
            words[H_MAGIC].store(0, Ordering::Relaxed);
            for word in &words[1..table] {
                word.store(0, Ordering::Relaxed);
            }
            words[H_SEED].store(seed[0], Ordering::Relaxed);
            words[H_SEED + 1].store(seed[1], Ordering::Relaxed);
            words[H_ENTRIES].store(max_rules as u64, Ordering::Relaxed);
            words[H_MAGIC].store(MAGIC, Ordering::Release);
        }
        let seed = [0, 1].map(|i| words[H_SEED + i].load(Ordering::Relaxed));
        Ok(Self {
            region,
            entries: max_rules,
            pages,
            owner,
            seed,
        })
    }

    /// The rule called `name`: the one held if it has the same windows, key length and size
    /// (its windows kept), else a new one in free pages (replacing the old, which is
    /// removed). `now_ms` dates the removal. Error: a bad name, a size that holds no set of
    /// keys, no free entry, or no free run of pages that large (naming the bytes it needs).
    pub fn put(
        &self,
        name: &[u8],
        rule: &Rule,
        max_key_bytes: usize,
        bytes: usize,
        now_ms: i64,
    ) -> Result<Found, Error> {
        check_name(name)?;
        let pages = bytes.div_ceil(PAGE_BYTES).max(1);
        Zone::<Part<R>, O>::capacity_for(rule, max_key_bytes, pages * PAGE_BYTES)?;
        let _locked = self.lock();
        if let Some(found) = self.find_locked(name) {
            if same_layout(&found.rule, rule)
                && found.max_key_bytes == max_key_bytes
                && found.bytes == pages * PAGE_BYTES
            {
                // Only limits changed: the zone takes them as its live limits, keeping its keys.
                self.write_entry(
                    found.entry,
                    name,
                    rule,
                    max_key_bytes,
                    found.first_page,
                    pages,
                );
                let found = Found {
                    rule: rule.clone(),
                    ..found
                };
                self.zone(&found, &self.owner)?;
                return Ok(found);
            }
            self.retire(found.entry, now_ms);
        }
        let entry = (0..self.entries)
            .find(|&e| self.get(e, E_GENERATION) == 0 && !self.held(e, now_ms))
            .ok_or(Error::invalid(
                "max_rules",
                "larger: every entry holds a rule, or one removed less than a second ago",
                Value::UInt(self.entries as u64),
            ))?;
        let first_page = self.free_run(pages, now_ms)?;
        // A new layout: the pages must not read as the zone they held before.
        self.words()[self.page_word(first_page)].store(0, Ordering::Relaxed);
        self.write_entry(entry, name, rule, max_key_bytes, first_page, pages);
        let generation = self.words()[H_GENERATION].fetch_add(1, Ordering::Relaxed) + 1;
        self.set(entry, E_RETIRED_MS, 0);
        self.words()[self.entry_word(entry) + E_GENERATION].store(generation, Ordering::Release);
        let found = Found {
            rule: rule.clone(),
            max_key_bytes,
            bytes: pages * PAGE_BYTES,
            entry,
            generation,
            first_page,
        };
        // Lay the zone out now, so every process attaches to it as it is.
        self.zone(&found, &self.owner)?;
        Ok(found)
    }

    /// Removes the rule called `name` (its pages are free after [`GRACE_MS`]); false when
    /// there is none.
    pub fn remove(&self, name: &[u8], now_ms: i64) -> bool {
        let _locked = self.lock();
        match self.find_locked(name) {
            Some(found) => {
                self.retire(found.entry, now_ms);
                true
            }
            None => false,
        }
    }

    /// The rule called `name`, if the directory holds it.
    pub fn find(&self, name: &[u8]) -> Option<Found> {
        let _locked = self.lock();
        self.find_locked(name)
    }

    /// Whether `found` is still the rule of its name (one atomic read: check it before each
    /// use of a zone kept from [`Directory::zone`]).
    pub fn is_current(&self, found: &Found) -> bool {
        self.get(found.entry, E_GENERATION) == found.generation
    }

    /// The keyed zone of `found`, over its pages.
    pub fn zone<P: Owner>(&self, found: &Found, owner: P) -> Result<Zone<Part<R>, P>, Error> {
        let part = Part {
            region: self.region.clone(),
            start: self.page_word(found.first_page),
            len: found.bytes / 8,
        };
        let rule = found.rule.clone();
        Zone::attach(part, rule, found.max_key_bytes, owner, self.seed).map(|(zone, _)| zone)
    }

    /// The names of the rules held.
    pub fn names(&self) -> Vec<Vec<u8>> {
        let _locked = self.lock();
        (0..self.entries)
            .filter(|&e| self.get(e, E_GENERATION) != 0)
            .map(|e| self.name(e))
            .collect()
    }

    /// Rules and pages in use.
    pub fn stats(&self, now_ms: i64) -> DirectoryStats {
        let _locked = self.lock();
        let used =
            (0..self.entries).filter(|&e| self.get(e, E_GENERATION) != 0 || self.held(e, now_ms));
        let pages_used = used.map(|e| self.get(e, E_PAGES)).sum();
        DirectoryStats {
            rules: (0..self.entries)
                .filter(|&e| self.get(e, E_GENERATION) != 0)
                .count() as u64,
            pages_used,
            pages: self.pages as u64,
        }
    }

    fn words(&self) -> &[AtomicU64] {
        self.region.as_ref()
    }

    fn lock(&self) -> Locked<'_> {
        let word = &self.words()[H_LOCK];
        // A table left half written by a dead owner: every entry it wrote is valid up to its
        // generation, written last, so there is nothing to repair.
        lock::lock(word, &self.owner);
        Locked(word)
    }

    fn entry_word(&self, entry: usize) -> usize {
        HEADER_WORDS + entry * ENTRY_WORDS
    }

    fn page_word(&self, page: usize) -> usize {
        HEADER_WORDS + self.entries * ENTRY_WORDS + page * PAGE_WORDS
    }

    fn get(&self, entry: usize, field: usize) -> u64 {
        self.words()[self.entry_word(entry) + field].load(Ordering::Acquire)
    }

    fn set(&self, entry: usize, field: usize, value: u64) {
        self.words()[self.entry_word(entry) + field].store(value, Ordering::Relaxed);
    }

    /// Whether a removed entry still holds its pages.
    fn held(&self, entry: usize, now_ms: i64) -> bool {
        let retired = self.get(entry, E_RETIRED_MS) as i64;
        retired != 0 && now_ms.saturating_sub(retired) < GRACE_MS
    }

    fn retire(&self, entry: usize, now_ms: i64) {
        self.set(entry, E_RETIRED_MS, now_ms.max(1) as u64);
        self.set(entry, E_GENERATION, 0);
    }

    fn name(&self, entry: usize) -> Vec<u8> {
        let len = self.get(entry, E_NAME_LEN) as usize;
        let mut name = Vec::with_capacity(len);
        for i in 0..len.div_ceil(8) {
            name.extend_from_slice(&self.get(entry, E_NAME + i).to_le_bytes());
        }
        name.truncate(len);
        name
    }

    fn find_locked(&self, name: &[u8]) -> Option<Found> {
        let entry =
            (0..self.entries).find(|&e| self.get(e, E_GENERATION) != 0 && self.name(e) == name)?;
        let windows = (0..self.get(entry, E_WINDOWS) as usize).map(|w| {
            let at = E_RULE + w * WINDOW_WORDS;
            RuleWindow::from_words(core::array::from_fn(|i| self.get(entry, at + i))).ok()
        });
        // Written by `put` from a valid rule: read back, it is one.
        let rule = Rule::new(windows.collect::<Option<Vec<_>>>()?).ok()?;
        Some(Found {
            rule,
            max_key_bytes: self.get(entry, E_MAX_KEY_BYTES) as usize,
            bytes: self.get(entry, E_PAGES) as usize * PAGE_BYTES,
            entry,
            generation: self.get(entry, E_GENERATION),
            first_page: self.get(entry, E_FIRST_PAGE) as usize,
        })
    }

    /// The first run of `pages` free pages.
    fn free_run(&self, pages: usize, now_ms: i64) -> Result<usize, Error> {
        let mut used: Vec<(usize, usize)> = (0..self.entries)
            .filter(|&e| self.get(e, E_GENERATION) != 0 || self.held(e, now_ms))
            .map(|e| {
                let first = self.get(e, E_FIRST_PAGE) as usize;
                (first, first + self.get(e, E_PAGES) as usize)
            })
            .collect();
        used.sort_unstable();
        let (mut from, mut largest) = (0, 0);
        for (start, end) in used.into_iter().chain([(self.pages, self.pages)]) {
            if start >= from + pages {
                return Ok(from);
            }
            largest = largest.max(start.saturating_sub(from));
            from = from.max(end);
        }
        Err(Error::NoRoom {
            needed: (pages * PAGE_BYTES) as u64,
            largest_free: (largest * PAGE_BYTES) as u64,
            size: (self.pages * PAGE_BYTES) as u64,
        })
    }

    fn write_entry(
        &self,
        entry: usize,
        name: &[u8],
        rule: &Rule,
        max_key_bytes: usize,
        first_page: usize,
        pages: usize,
    ) {
        self.set(entry, E_FIRST_PAGE, first_page as u64);
        self.set(entry, E_PAGES, pages as u64);
        self.set(entry, E_MAX_KEY_BYTES, max_key_bytes as u64);
        self.set(entry, E_WINDOWS, rule.windows().len() as u64);
        self.set(entry, E_NAME_LEN, name.len() as u64);
        for (i, chunk) in name.chunks(8).enumerate() {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.set(entry, E_NAME + i, u64::from_le_bytes(word));
        }
        for (w, window) in rule.windows().iter().enumerate() {
            for (i, word) in window.words().into_iter().enumerate() {
                self.set(entry, E_RULE + w * WINDOW_WORDS + i, word);
            }
        }
    }
}

/// Whether two rules cut a zone alike: the same windows but for their configured limits.
fn same_layout(a: &Rule, b: &Rule) -> bool {
    let shape = |w: &RuleWindow| {
        let mut words = w.words();
        words[1] = 0;
        words
    };
    a.windows().len() == b.windows().len()
        && a.windows()
            .iter()
            .zip(b.windows())
            .all(|(x, y)| shape(x) == shape(y))
}

fn check_name(name: &[u8]) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        let got = Value::UInt(name.len() as u64);
        return Err(Error::invalid("name", "from 1 to 64 bytes long", got));
    }
    Ok(())
}
