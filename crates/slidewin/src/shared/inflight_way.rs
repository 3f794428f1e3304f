//! A key's way in a concurrency table ([`super::Inflight`]): its count of slots held, when its
//! owners were last asked whether they live, and its slot records (owner, lease deadline),
//! the held ones first.

use super::table::Set;

// Words of a way's payload: the count, the last owners' check, then the records.
const W_COUNT: usize = 0;
const W_CHECKED: usize = 1;
const W_RECORDS: usize = 2;
// Words of a record: its owner (0: none) and its lease deadline.
pub(super) const R_OWNER: usize = 0;
pub(super) const R_DEADLINE: usize = 1;
const RECORD_WORDS: usize = 2;

/// The first word of record `i` of the payload at word `at` of a set.
pub(super) fn record_at(at: usize, i: usize) -> usize {
    at + W_RECORDS + i * RECORD_WORDS
}

/// Words of a way's payload with room for `max_limit` records.
pub(super) fn payload_words(max_limit: u64) -> usize {
    W_RECORDS + RECORD_WORDS * max_limit as usize
}

/// The payload of one way of a locked set.
pub(super) struct Slots<'s, 'z> {
    set: &'s Set<'z>,
    at: usize,
}

impl<'s, 'z> Slots<'s, 'z> {
    /// The payload at word `at` of `set`.
    pub(super) fn new(set: &'s Set<'z>, at: usize) -> Self {
        Self { set, at }
    }

    /// Slots held.
    pub(super) fn count(&self) -> u64 {
        self.set.get(self.at + W_COUNT)
    }

    fn set_count(&self, count: u64) {
        self.set.set(self.at + W_COUNT, count);
    }

    /// The first word of record `i` within the set.
    pub(super) fn record(&self, i: usize) -> usize {
        record_at(self.at, i)
    }

    /// A new key's: nothing held, its first sweep asking about owners (checked long ago).
    pub(super) fn clear(&self, checked_ms: i64) {
        self.set_count(0);
        self.set.set(self.at + W_CHECKED, checked_ms as u64);
    }

    /// Takes a slot for `owner` until `deadline`. The record first, the count last: a process
    /// that dies in between leaves a record past the count, which the repair counts again.
    pub(super) fn take(&self, owner: u64, deadline: i64) -> u64 {
        let count = self.count();
        let record = self.record(count as usize);
        self.set.set(record + R_DEADLINE, deadline as u64);
        self.set.set(record + R_OWNER, owner);
        self.set_count(count + 1);
        count + 1
    }

    /// The record `owner` took with lease `deadline`, the latest first.
    pub(super) fn held_by(&self, owner: u64, deadline: i64) -> Option<usize> {
        (0..self.count() as usize).rev().find(|&i| {
            let record = self.record(i);
            self.set.get(record + R_OWNER) == owner
                && self.set.get(record + R_DEADLINE) == deadline as u64
        })
    }

    /// Removes record `i`: the last record takes its place.
    pub(super) fn remove(&self, i: usize) {
        let last = self.count() as usize - 1;
        let (from, to) = (self.record(last), self.record(i));
        self.set
            .set(to + R_DEADLINE, self.set.get(from + R_DEADLINE));
        self.set.set(to + R_OWNER, self.set.get(from + R_OWNER));
        self.set.set(from + R_OWNER, 0);
        self.set_count(last as u64);
    }

    /// Whether owners are to be asked about at `now_ms` (always when `asked_for`, else once
    /// `every_ms` passed since the last check); the check is noted.
    pub(super) fn check_owners(&self, now_ms: i64, asked_for: bool, every_ms: i64) -> bool {
        let checked_ms = self.set.get(self.at + W_CHECKED) as i64;
        let check = asked_for || now_ms.saturating_sub(checked_ms) >= every_ms;
        if check {
            self.set.set(self.at + W_CHECKED, now_ms as u64);
        }
        check
    }

    /// Record `i`'s owner and lease deadline.
    pub(super) fn holder(&self, i: usize) -> (u64, i64) {
        let record = self.record(i);
        let owner = self.set.get(record + R_OWNER);
        (owner, self.set.get(record + R_DEADLINE) as i64)
    }

    /// After a takeover from a dead owner: the records of a way that `held` a key gathered at
    /// its front and counted (a record written past its count is counted; one copied twice by
    /// a remove cut short counts twice until it leaves or expires), else every record emptied
    /// (no key, so no record: a new key finds its way empty). The count.
    pub(super) fn repair(&self, held: bool, max_limit: u64) -> u64 {
        if !held {
            for i in 0..max_limit as usize {
                self.set.set(self.record(i) + R_OWNER, 0);
            }
            return 0;
        }
        let mut count = 0;
        for i in 0..max_limit as usize {
            let from = self.record(i);
            let owner = self.set.get(from + R_OWNER);
            if owner == 0 {
                continue;
            }
            let to = self.record(count);
            if to != from {
                self.set
                    .set(to + R_DEADLINE, self.set.get(from + R_DEADLINE));
                self.set.set(to + R_OWNER, owner);
                self.set.set(from + R_OWNER, 0);
            }
            count += 1;
        }
        self.set_count(count as u64);
        count as u64
    }
}
