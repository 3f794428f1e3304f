//! A rule's keys in this process ([`Keyed`]), with its live limits in words that may be shared
//! ([`LiveLimits`]: a region made before the processes fork keeps one set of limits for all).

use alloc::vec::Vec;
use core::hash::BuildHasher;
use core::sync::atomic::AtomicU64;

use super::Store;
use crate::keyed::{KeyHasher, Keyed};
use crate::reservation::Amend;
use crate::rule::{Limits, Rule, RuleLimiter};
use crate::shared::{LiveLimits, ZoneStats};
use crate::{Call, Decision, Error};

/// A [`Store`] over a [`Keyed`] rule of byte-string keys and its [`LiveLimits`].
pub struct LocalRule<R, S = KeyHasher> {
    keyed: Keyed<RuleLimiter, Vec<u8>, S>,
    live: LiveLimits<R>,
    /// Refusals of dry runs ([`Call::DryRun`]), which the keyed rule counts as refusals.
    would_reject: u64,
}

impl<R: AsRef<[AtomicU64]>, S: BuildHasher> LocalRule<R, S> {
    /// The store of `keyed`'s keys, decided under the live limits `live` (attached for the
    /// same rule).
    pub fn new(keyed: Keyed<RuleLimiter, Vec<u8>, S>, live: LiveLimits<R>) -> Self {
        Self {
            keyed,
            live,
            would_reject: 0,
        }
    }
}

impl<R: AsRef<[AtomicU64]>, S: BuildHasher> Store for LocalRule<R, S> {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        let rule = self.keyed.config();
        let limits = match limits {
            Some(limits) => rule.check_limits(limits)?,
            None => self.live.get(rule),
        };
        let decision =
            self.keyed
                .decide_bytes_by(key, now_ms, call.commits(), |rule, state, commit| {
                    rule.decide_with(state, now_ms, cost, commit, &limits)
                })?;
        if call == Call::DryRun && !decision.allowed {
            self.would_reject += 1;
        }
        Ok(decision)
    }
    fn amend(
        &mut self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        self.keyed.amend_bytes_at(key, now_ms, stamp_ms, amend)
    }
    fn reset(&mut self, key: &[u8]) {
        self.keyed.reset_bytes(key);
    }
    fn stats(&self) -> ZoneStats {
        let stats = self.keyed.stats();
        ZoneStats {
            keys: stats.keys as u64,
            capacity: self.keyed.max_keys() as u64,
            evictions: stats.evictions,
            reclaimed: stats.reclaimed,
            repairs: 0,
            allowed: stats.allowed,
            rejected: stats.rejected.saturating_sub(self.would_reject),
            would_reject: self.would_reject,
            full_refusals: 0,
        }
    }
    fn rule(&self) -> &Rule {
        self.keyed.config()
    }
    fn limits(&self) -> Limits {
        self.live.get(self.keyed.config())
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        self.live.set(self.keyed.config(), window, limit)
    }
    fn version(&self) -> u64 {
        self.live.version()
    }
}
