//! A keyed region's header: the magic, the layout's fingerprint and the secret seed, laid out
//! by one process at a time, then the words a payload keeps for every process (its settings
//! and counters), read and written through [`Header`] by [`super::Zone`], [`super::Inflight`]
//! and [`super::Leases`] alike.

use core::sync::atomic::{AtomicU64, Ordering};

use super::fault;

// Header words every region begins with: the magic, the layout's fingerprint, the seed.
pub(crate) const H_MAGIC: usize = 0;
pub(crate) const H_FINGERPRINT: usize = 1;
pub(crate) const H_SEED: usize = 2; // two words

/// Whether [`super::Zone::attach`] found the region ready for this layout or laid it out afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// The region was empty or made for another layout: laid out anew, every key forgotten.
    Fresh,
    /// The region already held this layout: its keys and windows are kept.
    Reused,
}

/// A fresh secret seed for a new region's hashes, from the process's random source.
#[cfg(feature = "std")]
pub fn random_seed() -> [u64; 2] {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new();
    [random.hash_one(1_u8), random.hash_one(2_u8)]
}

/// FNV-1a over `words`: a fixed function, so every process computes the same value.
pub(crate) fn fingerprint(words: impl IntoIterator<Item = u64>) -> u64 {
    words.into_iter().fold(0xcbf2_9ce4_8422_2325, |h: u64, w| {
        (h ^ w).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The magic word while one caller lays a region out: this bit and the caller's owner id.
const LAYING_OUT: u64 = 1 << 63;

/// The header of a region: laid out afresh for `magic` and `fingerprint` (every word of the
/// region zeroed, `seed` stored) unless it holds them already; how, and the region's seed.
/// Callers attaching at once are safe: one claims the layout in the magic word and the others
/// wait for it (taking the claim over when its owner died), so none zeroes a region another
/// has started to use.
pub(crate) fn attach(
    words: &[AtomicU64],
    (magic, fingerprint): (u64, u64),
    seed: [u64; 2],
    owner: &impl super::lock::Owner,
) -> (Attached, [u64; 2]) {
    let attached = loop {
        let seen = words[H_MAGIC].load(Ordering::Acquire);
        if seen == magic && words[H_FINGERPRINT].load(Ordering::Relaxed) == fingerprint {
            break Attached::Reused;
        }
        if seen & LAYING_OUT != 0 && owner.is_alive(seen & !LAYING_OUT) {
            owner.pause();
            continue;
        }
        let claim = LAYING_OUT | owner.id();
        let claimed =
            words[H_MAGIC].compare_exchange(seen, claim, Ordering::Acquire, Ordering::Relaxed);
        if claimed.is_err() {
            continue;
        }
        for word in &words[1..] {
            word.store(0, Ordering::Relaxed);
        }
        words[H_FINGERPRINT].store(fingerprint, Ordering::Relaxed);
        words[H_SEED].store(seed[0], Ordering::Relaxed);
        words[H_SEED + 1].store(seed[1], Ordering::Relaxed);
        words[H_MAGIC].store(magic, Ordering::Release);
        break Attached::Fresh;
    };
    (attached, self::seed(words))
}

/// The seed of a region laid out for `magic` and `fingerprint`; else the fingerprint it
/// holds, nothing written.
pub(crate) fn open(words: &[AtomicU64], (magic, fingerprint): (u64, u64)) -> Result<[u64; 2], u64> {
    let seen = words[H_FINGERPRINT].load(Ordering::Relaxed);
    let laid_out = words[H_MAGIC].load(Ordering::Acquire) == magic && seen == fingerprint;
    laid_out.then(|| seed(words)).ok_or(seen)
}

fn seed(words: &[AtomicU64]) -> [u64; 2] {
    [0, 1].map(|i| words[H_SEED + i].load(Ordering::Relaxed))
}

/// A region's header words, shared by every process: each read or written alone (no lock),
/// so each is exact and several are a moment's view.
#[derive(Clone, Copy)]
pub(crate) struct Header<'r> {
    pub(crate) words: &'r [AtomicU64],
}

impl Header<'_> {
    /// Word `field`.
    pub(crate) fn get(&self, field: usize) -> u64 {
        self.words[field].load(Ordering::Relaxed)
    }

    /// Words `fields`.
    pub(crate) fn values<const N: usize>(&self, fields: [usize; N]) -> [u64; N] {
        fields.map(|field| self.get(field))
    }

    /// Sets word `field`.
    pub(crate) fn set(&self, field: usize, value: u64) {
        self.words[field].store(value, Ordering::Relaxed);
    }

    /// Adds `n` to counter `field`: what it held before.
    pub(crate) fn count(&self, field: usize, n: u64) -> u64 {
        let before = self.words[field].fetch_add(n, Ordering::Relaxed);
        fault::point();
        before
    }

    /// Raises word `field` to `value` (kept when already higher).
    pub(crate) fn raise(&self, field: usize, value: u64) {
        self.words[field].fetch_max(value, Ordering::Relaxed);
    }

    /// Whether this caller takes the turn due at the time word `field` holds: one caller of
    /// all once that time passed by `now_ms`, which sets the next turn `period_ms` later.
    pub(crate) fn take_turn(&self, field: usize, now_ms: i64, period_ms: i64) -> bool {
        let due = self.get(field);
        let next = now_ms.saturating_add(period_ms.max(1)) as u64;
        due as i64 <= now_ms
            && self.words[field]
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}
