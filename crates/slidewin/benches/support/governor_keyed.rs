//! governor's default keyed limiter (GCRA over a DashMap) on a clock the workload moves, shared
//! by the keyed bench and the keyed_memory example so both measure the same thing.

use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::RateLimiter;
use std::num::NonZeroU32;
use std::time::Duration;

type Limiter = RateLimiter<
    u64,
    DefaultKeyedStateStore<u64>,
    FakeRelativeClock,
    NoOpMiddleware<<FakeRelativeClock as Clock>::Instant>,
>;

/// `limit` per second per key, with the fake clock it reads.
pub struct GovernorKeyed {
    limiter: Limiter,
    clock: FakeRelativeClock,
    clock_ms: i64,
}

impl GovernorKeyed {
    pub fn per_second(limit: u32) -> Self {
        let clock = FakeRelativeClock::default();
        let quota = governor::Quota::per_second(NonZeroU32::new(limit).expect("limit > 0"));
        let limiter = Limiter::new(quota, DefaultKeyedStateStore::default(), clock.clone());
        Self {
            limiter,
            clock,
            clock_ms: 0,
        }
    }

    /// Move the clock to `now_ms` (never back) and check `key`.
    pub fn check_at(&mut self, key: u64, now_ms: i64) -> bool {
        if now_ms > self.clock_ms {
            self.clock
                .advance(Duration::from_millis((now_ms - self.clock_ms) as u64));
            self.clock_ms = now_ms;
        }
        self.limiter.check_key(&key).is_ok()
    }

    pub fn len(&self) -> usize {
        self.limiter.len()
    }
}
