//! A byte bound for byte-string keys: [`Keyed::with_max_key_bytes`].
//!
//! `max_keys` bounds how many keys a store holds; with byte-string keys from the network
//! (user names, paths, headers) each key's length is the attacker's to choose. A store made
//! with `with_max_key_bytes(n)` keeps a key of more than `n` bytes as a 16-byte digest of it,
//! taken with the store's own seeded hasher, so no key costs more than `max(n, 16)` bytes of key
//! text (plus the `Vec`'s 24 bytes and the allocator's rounding):
//!
//! ```
//! use slidewin::{Keyed, Quota, SlidingCounter};
//! let mut store = Keyed::<SlidingCounter, Vec<u8>>::new(Quota::new(1, 1_000)?, 100)?
//!     .with_max_key_bytes(64)?;
//! let long = vec![b'x'; 1_000_000];
//! assert!(store.check_bytes_at(&long, 0, 1)?.allowed);
//! assert!(!store.check_bytes_at(&long, 1, 1)?.allowed); // still one key, kept as 16 bytes
//! assert_eq!(store.key_bytes(), 16);
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! Two long keys share a window only if their 128-bit digests collide; the digest is keyed by
//! the store's secret seed, so keys cannot be chosen to collide without knowing it.

use alloc::vec::Vec;
use core::hash::BuildHasher;

use super::Keyed;
use crate::reservation::Amend;
use crate::{Decision, Error, Limiter, Value};

/// Bytes of the digest a long key is kept as.
pub const DIGEST_BYTES: usize = 16;

impl<L: Limiter, S: BuildHasher> Keyed<L, Vec<u8>, S> {
    /// This store, keeping keys longer than `max_key_bytes` (at least 1) as a 16-byte digest
    /// in the `*_bytes_at` methods.
    pub fn with_max_key_bytes(mut self, max_key_bytes: usize) -> Result<Self, Error> {
        if max_key_bytes == 0 {
            return Err(Error::invalid(
                "max_key_bytes",
                "a positive integer",
                Value::UInt(0),
            ));
        }
        self.max_key_bytes = max_key_bytes;
        Ok(self)
    }

    /// The bound set by [`Keyed::with_max_key_bytes`] (`usize::MAX` when unset).
    pub fn max_key_bytes(&self) -> usize {
        self.max_key_bytes
    }

    /// [`Keyed::check_at`] with the key bound applied.
    pub fn check_bytes_at(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
    ) -> Result<Decision, Error> {
        let mut digest = [0; DIGEST_BYTES];
        let key = self.bounded(key, &mut digest);
        self.check_at(key, now_ms, cost)
    }

    /// [`Keyed::peek_at`] with the key bound applied.
    pub fn peek_bytes_at(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<Decision, Error> {
        let mut digest = [0; DIGEST_BYTES];
        let key = self.bounded(key, &mut digest);
        self.peek_at(key, now_ms, cost)
    }

    /// A check (`commit`) or a peek of `key` (the bound applied) whose decision `decide` makes
    /// over the key's state and `commit`: a [`crate::rule::Rule`] under a caller's limits.
    pub fn decide_bytes_by(
        &mut self,
        key: &[u8],
        now_ms: i64,
        commit: bool,
        decide: impl Fn(&L::Config, &mut L::State, bool) -> Result<Decision, Error>,
    ) -> Result<Decision, Error> {
        let mut digest = [0; DIGEST_BYTES];
        let key = self.bounded(key, &mut digest);
        let hash = self.hasher.hash_one(key);
        self.decide_hashed(hash, key, now_ms, commit, decide)
    }

    /// [`Keyed::uncommit_at`] with the key bound applied.
    pub fn uncommit_bytes_at(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.amend_bytes_at(key, now_ms, None, Amend::GiveBack(cost))
    }

    /// [`Limiter::amend`] of a key with the key bound applied: what was recorded at
    /// `stamp_ms` (`None`: the newest) changed at `now_ms`.
    pub fn amend_bytes_at(
        &mut self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        let mut digest = [0; DIGEST_BYTES];
        let key = self.bounded(key, &mut digest);
        self.amend_hashed(self.hasher.hash_one(key), key, (now_ms, stamp_ms), amend)
    }

    /// [`Keyed::reset`] with the key bound applied.
    pub fn reset_bytes(&mut self, key: &[u8]) {
        let mut digest = [0; DIGEST_BYTES];
        let key = self.bounded(key, &mut digest);
        self.reset(key)
    }

    /// Bytes of key text the held keys own (their heap allocations, at least).
    pub fn key_bytes(&self) -> usize {
        self.slots.keys().map(Vec::capacity).sum()
    }

    /// `key`, or its digest (written into `digest`) when it is longer than the bound.
    fn bounded<'a>(&self, key: &'a [u8], digest: &'a mut [u8; DIGEST_BYTES]) -> &'a [u8] {
        if key.len() <= self.max_key_bytes {
            return key;
        }
        let low = self.hasher.hash_one((0_u8, key));
        let high = self.hasher.hash_one((1_u8, key));
        digest[..8].copy_from_slice(&low.to_le_bytes());
        digest[8..].copy_from_slice(&high.to_le_bytes());
        digest
    }
}
