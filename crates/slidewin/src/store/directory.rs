//! One rule of a [`Directory`] of runtime rules, followed by name: put again with other
//! windows, the store moves to the new rule at its next call; removed, it answers
//! [`Error::RuleRemoved`].

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::AtomicU64;

use super::Store;
use crate::reservation::Amend;
use crate::rule::{Limits, Rule};
use crate::shared::{Directory, Found, KeyWindow, Owner, Part, Walk, Zone, ZoneStats};
use crate::{Call, Decision, Error};

/// A [`Store`] over the rule a directory holds by one name.
pub struct DirectoryRule<R, O: Owner> {
    rules: Arc<Directory<R, O>>,
    name: Vec<u8>,
    found: Found,
    zone: Zone<Part<R>, O>,
    /// Added to the zone's limits version: versions go on from the replaced rule's, so no
    /// version stands for two rules.
    earlier_versions: u64,
    /// The owner each zone of the rule locks its sets as.
    owner: O,
}

impl<R: AsRef<[AtomicU64]> + Clone, O: Owner + Clone> DirectoryRule<R, O> {
    /// The store of `found`, the rule `rules` holds as `name`, locking as `owner`.
    pub fn new(
        rules: Arc<Directory<R, O>>,
        name: Vec<u8>,
        found: Found,
        owner: O,
    ) -> Result<Self, Error> {
        let zone = rules.zone(&found, owner.clone())?;
        Ok(Self {
            rules,
            name,
            found,
            zone,
            earlier_versions: 0,
            owner,
        })
    }

    /// The rule's zone now (one atomic read when nothing changed).
    fn current(&mut self) -> Result<&mut Zone<Part<R>, O>, Error> {
        if !self.rules.is_current(&self.found) {
            let found = self.rules.find(&self.name).ok_or(Error::RuleRemoved)?;
            let zone = self.rules.zone(&found, self.owner.clone())?;
            // Wrapping: only the sum is a version, and it is the last one plus one.
            self.earlier_versions = self
                .version()
                .wrapping_add(1)
                .wrapping_sub(zone.limits_version());
            self.zone = zone;
            self.found = found;
        }
        Ok(&mut self.zone)
    }
}

impl<R: AsRef<[AtomicU64]> + Clone, O: Owner + Clone> Store for DirectoryRule<R, O> {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        call: Call,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        self.current()?.decide(key, now_ms, cost, call, limits)
    }
    fn amend(
        &mut self,
        key: &[u8],
        now_ms: i64,
        stamp_ms: Option<i64>,
        amend: Amend,
    ) -> Result<(), Error> {
        Store::amend(self.current()?, key, now_ms, stamp_ms, amend)
    }
    fn reset(&mut self, key: &[u8]) {
        if let Ok(zone) = self.current() {
            Store::reset(zone, key);
        }
    }
    fn stats(&self) -> ZoneStats {
        Store::stats(&self.zone)
    }
    fn rule(&self) -> &Rule {
        self.zone.rule()
    }
    fn limits(&self) -> Limits {
        Store::limits(&self.zone)
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        Store::set_limit(self.current()?, window, limit)
    }
    fn follow(&mut self) -> Result<(), Error> {
        self.current().map(|_| ())
    }
    fn version(&self) -> u64 {
        self.earlier_versions
            .wrapping_add(Store::version(&self.zone))
    }
    fn walk_step(&self, walk: &mut Walk, now_ms: i64, sets: usize) -> Option<Result<bool, Error>> {
        Store::walk_step(&self.zone, walk, now_ms, sets)
    }
    fn counts_refusals(&self) -> bool {
        true
    }
    fn key_window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<KeyWindow, Error> {
        Store::key_window(self.current()?, key, now_ms, cost)
    }
}
