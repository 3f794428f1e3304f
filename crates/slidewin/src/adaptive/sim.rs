//! A FIFO upstream of `servers` slots in front of the controller, event by event on a fake
//! clock: requests arrive evenly (open loop), wait in one queue, take a service time from a
//! [`Service`] model, and are counted per interval the way the nginx layer counts them
//! (a latency histogram of integer milliseconds, refusals, admissions at the limit).

use alloc::collections::{BinaryHeap, VecDeque};
use alloc::vec::Vec;
use core::cmp::Reverse;

use super::{bucket_of, Adaptive, AdaptiveConfig, Sample, BUCKETS};

/// How long one request keeps a slot, as a distribution of mean `mean_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Service {
    /// Every request the mean.
    Fixed,
    /// Uniform within +-`spread` of the mean (0.5: from half to one and a half).
    Uniform(f64),
    /// Exponential.
    Exponential,
    /// Lognormal with this sigma (of the log).
    Lognormal(f64),
    /// One request in ten five times slower than the others.
    Bimodal,
}

impl Service {
    /// Every model the scenarios run.
    pub const ALL: [Service; 6] = [
        Service::Uniform(0.5),
        Service::Exponential,
        Service::Lognormal(0.5),
        Service::Lognormal(1.0),
        Service::Bimodal,
        Service::Fixed,
    ];

    fn draw(self, mean_ms: f64, rng: &mut Rng) -> f64 {
        match self {
            Service::Fixed => mean_ms,
            Service::Uniform(spread) => mean_ms * (1.0 + spread * (2.0 * rng.unit() - 1.0)),
            Service::Exponential => -mean_ms * libm::log(1.0 - rng.unit()),
            Service::Lognormal(sigma) => {
                let median = mean_ms * libm::exp(-sigma * sigma / 2.0);
                median * libm::exp(sigma * rng.normal())
            }
            Service::Bimodal => {
                let fast = mean_ms / 1.4; // 0.9 x fast + 0.1 x 5 fast = the mean
                if rng.unit() < 0.1 {
                    5.0 * fast
                } else {
                    fast
                }
            }
        }
    }

    /// The `q` quantile of the latency with no queue (ms, exact).
    pub fn no_load_quantile(self, mean_ms: f64, q: f64, seed: u64) -> f64 {
        let mut rng = Rng::new(seed);
        let mut all: Vec<f64> = (0..100_000).map(|_| self.draw(mean_ms, &mut rng)).collect();
        all.sort_unstable_by(f64::total_cmp);
        all[((q * all.len() as f64) as usize).min(all.len() - 1)]
    }
}

/// xorshift64*, seeded per run.
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed` (any value; nearby seeds give unrelated streams).
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Self((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u, v) = (1.0 - self.unit(), self.unit());
        libm::sqrt(-2.0 * libm::log(u)) * libm::cos(2.0 * core::f64::consts::PI * v)
    }
}

/// Whole milliseconds, as nginx logs a time (at least 1).
fn ms(t: f64) -> u64 {
    libm::round(t).max(1.0) as u64
}

/// One interval as the clients saw it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Interval {
    pub offered: u64,
    pub refused: u64,
    pub ok: u64,
    /// Lost or pushed back (timeouts, 502s, 503s).
    pub bad: u64,
    /// The limit the interval ran with.
    pub limit: u64,
}

/// Requests that wait longer than this are lost (the client gave up).
const TIMEOUT_MS: f64 = 2_000.0;

pub struct Sim {
    pub servers: usize,
    pub mean_ms: f64,
    pub service: Service,
    /// The upstream answers 503 at once when every slot is busy (no queue).
    pub fails_fast: bool,
    /// Every n-th answer is a 502 whatever the load (0: none).
    pub fail_every: u64,
    answers: u64,
    pub ctrl: Adaptive,
    rng: Rng,
    busy: usize,
    queue: VecDeque<f64>,
    /// (done at, admitted at) of requests being served, soonest first (as integer µs).
    serving: BinaryHeap<Reverse<(u64, u64)>>,
    now: f64,
    next_arrival: f64,
    interval_end: f64,
    inflight: u64,
    sample: Sample,
    counts: [u64; BUCKETS],
    offered: u64,
    limit_in_force: u64,
    pub intervals: Vec<Interval>,
    /// Every good answer's time and latency (ms), for quantiles over many intervals.
    pub latencies: Vec<(f64, f64)>,
}

impl Sim {
    pub fn new(
        config: AdaptiveConfig,
        servers: usize,
        mean_ms: f64,
        service: Service,
        seed: u64,
    ) -> Self {
        let ctrl = Adaptive::new(config).expect("a valid config");
        Self {
            servers,
            mean_ms,
            service,
            fails_fast: false,
            fail_every: 0,
            answers: 0,
            limit_in_force: ctrl.limit(),
            interval_end: config.interval_ms as f64,
            ctrl,
            rng: Rng::new(seed),
            busy: 0,
            queue: VecDeque::new(),
            serving: BinaryHeap::new(),
            now: 0.0,
            next_arrival: 0.0,
            inflight: 0,
            sample: Sample::default(),
            counts: [0; BUCKETS],
            offered: 0,
            intervals: Vec::new(),
            latencies: Vec::new(),
        }
    }

    /// Requests per second the upstream serves.
    pub fn capacity(&self) -> f64 {
        self.servers as f64 * 1e3 / self.mean_ms
    }

    /// Runs `ms` more milliseconds with `rate` requests per second arriving evenly.
    pub fn run(&mut self, rate: f64, ms: f64) {
        let gap = 1e3 / rate;
        let end = self.now + ms;
        self.next_arrival = self.next_arrival.max(self.now);
        loop {
            let done = self.serving.peek().map(|Reverse((t, _))| *t as f64 / 1e3);
            let t = [done, Some(self.next_arrival), Some(self.interval_end)]
                .into_iter()
                .flatten()
                .fold(f64::INFINITY, f64::min);
            if t >= end {
                self.now = end;
                return;
            }
            self.now = t;
            if done == Some(t) {
                let Reverse((_, admitted)) = self.serving.pop().expect("peeked");
                self.busy -= 1;
                self.answer(admitted as f64 / 1e3);
                self.start_queued();
            } else if t == self.next_arrival {
                self.next_arrival += gap;
                self.arrive();
            } else {
                self.end_interval();
            }
        }
    }

    fn arrive(&mut self) {
        self.offered += 1;
        if self.inflight >= self.limit_in_force {
            self.sample.refused += 1;
            return;
        }
        self.inflight += 1;
        self.sample.admitted += 1;
        if self.inflight >= self.limit_in_force {
            self.sample.at_limit += 1;
        }
        if self.fails_fast && self.busy >= self.servers {
            self.inflight -= 1;
            self.sample.backpressure += 1;
            return;
        }
        self.queue.push_back(self.now);
        self.start_queued();
    }

    fn start_queued(&mut self) {
        while self.busy < self.servers {
            let Some(admitted) = self.queue.pop_front() else {
                return;
            };
            let done = self.now + self.service.draw(self.mean_ms, &mut self.rng);
            self.busy += 1;
            let us = |t: f64| libm::round(t * 1e3) as u64;
            self.serving.push(Reverse((us(done), us(admitted))));
        }
    }

    fn answer(&mut self, admitted: f64) {
        self.inflight -= 1;
        self.answers += 1;
        let latency = self.now - admitted;
        if latency > TIMEOUT_MS || self.fail_every > 0 && self.answers % self.fail_every == 0 {
            self.sample.loss += 1;
        } else {
            self.sample.ok += 1;
            self.counts[bucket_of(ms(latency))] += 1;
            self.latencies.push((self.now, latency));
        }
    }

    fn end_interval(&mut self) {
        self.sample.set_latencies(&self.counts);
        self.sample.elapsed_ms = self.ctrl.config().interval_ms;
        let s = self.sample;
        let limit = self.limit_in_force;
        self.limit_in_force = self.ctrl.update(&s);
        self.intervals.push(Interval {
            offered: self.offered,
            refused: s.refused,
            ok: s.ok,
            bad: s.loss + s.backpressure,
            limit,
        });
        self.sample = Sample::default();
        self.counts = [0; BUCKETS];
        self.offered = 0;
        self.interval_end += self.ctrl.config().interval_ms as f64;
    }

    /// The `q` quantile of the good answers' latencies from second `from` on (ms, exact).
    pub fn latency_quantile(&self, from: f64, q: f64) -> f64 {
        let mut after: Vec<f64> = self
            .latencies
            .iter()
            .filter(|&&(t, _)| t >= from * 1e3)
            .map(|&(_, latency)| latency)
            .collect();
        after.sort_unstable_by(f64::total_cmp);
        after[((q * after.len() as f64) as usize).min(after.len() - 1)]
    }

    /// The intervals from second `from` to second `to`.
    pub fn seconds(&self, from: f64, to: f64) -> &[Interval] {
        let per_s = 1e3 / self.ctrl.config().interval_ms as f64;
        let at = |s: f64| ((s * per_s) as usize).min(self.intervals.len());
        &self.intervals[at(from)..at(to)]
    }
}
