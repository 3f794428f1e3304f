//! The controller in front of a simulated upstream (a FIFO queue before `servers` servers of a
//! service time, a millisecond at a time, on a fake clock): the scenarios.

use alloc::collections::VecDeque;
use alloc::string::ToString;
use alloc::vec::Vec;

use super::*;

const S_MS: u64 = 40;
const SERVERS: usize = 40;
/// Requests per second the upstream serves: SERVERS / S_MS.
const CAPACITY: f64 = SERVERS as f64 * 1e3 / S_MS as f64;
const TIMEOUT_MS: u64 = 1_000;

/// How the upstream answers what is over its capacity.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    /// Queued, FIFO.
    Queue,
    /// 503 at once when every server is busy (no queue): latency never rises.
    Refuse,
}

/// One second (interval) as the clients saw it.
#[derive(Debug, Clone, Copy, Default)]
struct Second {
    offered: u64,
    refused: u64,
    ok: u64,
    bad: u64,
    p50: f64,
    p99: f64,
    limit: u64,
}

struct Sim {
    servers: Vec<Option<(u64, u64)>>, // (admitted at, done at)
    queue: VecDeque<u64>,
    service_ms: u64,
    jitter: f64,
    overflow: Overflow,
    /// Every n-th answer is a 502 whatever the load (0: none).
    fail_every: u64,
    answers: u64,
    rng: u64,
    inflight: u64,
    ctrl: Adaptive,
    t: u64,
    seconds: Vec<Second>,
    // The interval's tallies.
    sample: Sample,
    latencies: Vec<u64>,
    offered: u64,
}

impl Sim {
    fn new(initial_limit: u64) -> Self {
        let config = AdaptiveConfig {
            initial_limit,
            ..AdaptiveConfig::default()
        };
        Self {
            servers: alloc::vec![None; SERVERS],
            queue: VecDeque::new(),
            service_ms: S_MS,
            jitter: 0.0,
            overflow: Overflow::Queue,
            fail_every: 0,
            answers: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
            inflight: 0,
            ctrl: Adaptive::new(config).unwrap(),
            t: 0,
            seconds: Vec::new(),
            sample: Sample::default(),
            latencies: Vec::new(),
            offered: 0,
        }
    }

    fn servers(&mut self, n: usize) {
        self.servers.resize(n, None); // a server dropped mid-request: that request is lost
    }

    fn service(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let u = (self.rng >> 11) as f64 / (1u64 << 53) as f64;
        let s = self.service_ms as f64 * (1.0 + self.jitter * (2.0 * u - 1.0));
        libm::round(s).max(1.0) as u64
    }

    fn answer(&mut self, admitted: u64, bad: bool) {
        self.inflight -= 1;
        self.answers += 1;
        let latency = self.t - admitted;
        let failed = self.fail_every > 0 && self.answers % self.fail_every == 0;
        if bad || failed || latency > TIMEOUT_MS {
            self.sample.loss += 1;
        } else {
            self.sample.ok += 1;
            self.latencies.push(latency);
        }
    }

    fn start_queued(&mut self) {
        for i in 0..self.servers.len() {
            if self.servers[i].is_none() {
                let Some(admitted) = self.queue.pop_front() else {
                    return;
                };
                let done = self.t + self.service();
                self.servers[i] = Some((admitted, done));
            }
        }
    }

    /// Runs `ms` more milliseconds with `rate` requests per second arriving evenly.
    fn run(&mut self, rate: f64, ms: u64) {
        for _ in 0..ms {
            let t = self.t;
            for i in 0..self.servers.len() {
                if let Some((admitted, done)) = self.servers[i] {
                    if done <= t {
                        self.servers[i] = None;
                        self.answer(admitted, false);
                    }
                }
            }
            self.start_queued();
            let due = |t: u64| libm::floor(rate * t as f64 / 1e3) as u64;
            for _ in due(t)..due(t + 1) {
                self.offered += 1;
                if self.inflight >= self.ctrl.limit() {
                    self.sample.refused += 1;
                    continue;
                }
                self.inflight += 1;
                self.sample.max_inflight = self.sample.max_inflight.max(self.inflight);
                let busy = self.servers.iter().all(Option::is_some);
                if self.overflow == Overflow::Refuse && busy {
                    self.sample.backpressure += 1;
                    self.inflight -= 1;
                } else {
                    self.queue.push_back(t);
                }
            }
            self.start_queued();
            self.t += 1;
            if self.t % 1_000 == 0 {
                self.end_interval();
            }
        }
    }

    fn end_interval(&mut self) {
        self.latencies.sort_unstable();
        let q = |q: f64| match self.latencies.len() {
            0 => 0.0,
            n => self.latencies[((q * n as f64) as usize).min(n - 1)] as f64,
        };
        self.sample.p50_ms = q(0.5);
        self.sample.p95_ms = q(0.95);
        self.sample.p99_ms = q(0.99);
        self.sample.elapsed_ms = 1_000;
        let s = self.sample;
        let limit = self.ctrl.update(&s);
        self.seconds.push(Second {
            offered: self.offered,
            refused: s.refused,
            ok: s.ok,
            bad: s.loss + s.backpressure,
            p50: s.p50_ms,
            p99: s.p99_ms,
            limit,
        });
        self.sample = Sample::default();
        self.latencies.clear();
        self.offered = 0;
    }

    fn window(&self, from_s: usize, to_s: usize) -> &[Second] {
        &self.seconds[from_s..to_s]
    }
}

fn mean(seconds: &[Second], f: impl Fn(&Second) -> f64) -> f64 {
    seconds.iter().map(f).sum::<f64>() / seconds.len() as f64
}

/// Refused requests over offered ones.
fn refused_share(seconds: &[Second]) -> f64 {
    let sum = |f: fn(&Second) -> u64| seconds.iter().map(f).sum::<u64>() as f64;
    sum(|s| s.refused) / sum(|s| s.offered)
}

#[test]
fn overload_2x_and_5x_keeps_goodput_and_latency_near_no_load() {
    for k in [2.0, 5.0] {
        let mut sim = Sim::new(10);
        sim.run(k * CAPACITY, 60_000);
        let steady = sim.window(10, 60);
        let goodput = mean(steady, |s| s.ok as f64);
        assert!(goodput >= 0.9 * CAPACITY, "{k}x: goodput {goodput}");
        let worst_p99 = steady.iter().map(|s| s.p99).fold(0.0, f64::max);
        assert!(worst_p99 <= 2.0 * S_MS as f64, "{k}x: p99 {worst_p99}");
        assert!(steady.iter().all(|s| s.bad == 0), "{k}x: no timeouts");
    }
}

#[test]
fn capacity_halved_is_followed_within_five_intervals_with_latency_under_twice_base() {
    let mut sim = Sim::new(10);
    sim.run(2.0 * CAPACITY, 30_000);
    sim.servers(SERVERS / 2);
    sim.run(2.0 * CAPACITY, 30_000);
    let knee = (SERVERS / 2) as f64;
    for s in sim.window(34, 60) {
        let off = (s.limit as f64 - knee).abs() / knee;
        assert!(off <= 0.2, "limit {} vs knee {knee}: {s:?}", s.limit);
    }
    for s in sim.window(31, 60) {
        assert!(s.p50 <= 2.0 * S_MS as f64, "{s:?}");
    }
}

#[test]
fn capacity_doubled_is_used_within_twenty_seconds() {
    let mut sim = Sim::new(10);
    sim.run(3.0 * CAPACITY, 30_000);
    sim.servers(2 * SERVERS);
    sim.run(3.0 * CAPACITY, 30_000);
    let after = sim.window(50, 60);
    let goodput = mean(after, |s| s.ok as f64);
    assert!(goodput >= 0.9 * 2.0 * CAPACITY, "goodput {goodput}");
}

#[test]
fn sustained_3x_overload_for_three_minutes_does_not_creep() {
    let mut sim = Sim::new(10);
    sim.run(3.0 * CAPACITY, 210_000);
    let early = mean(sim.window(30, 60), |s| s.limit as f64);
    let late = mean(sim.window(180, 210), |s| s.limit as f64);
    assert!(
        (late - early).abs() / early <= 0.15,
        "limit {early} -> {late}"
    );
    let worst = sim.window(30, 210).iter().map(|s| s.limit).max().unwrap();
    assert!(
        worst as f64 <= 1.3 * SERVERS as f64,
        "limit reached {worst}"
    );
}

#[test]
fn jittery_service_at_0_8x_is_almost_never_refused() {
    let mut sim = Sim::new(10);
    sim.jitter = 0.5;
    sim.run(0.8 * CAPACITY, 120_000);
    let refused = refused_share(sim.window(20, 120));
    assert!(refused < 0.001, "refused {refused}");
}

#[test]
fn an_upstream_that_fails_fast_is_limited_by_its_503s_not_its_flat_latency() {
    let mut sim = Sim::new(10);
    sim.overflow = Overflow::Refuse;
    sim.run(2.0 * CAPACITY, 60_000);
    let steady = sim.window(20, 60);
    let goodput = mean(steady, |s| s.ok as f64);
    let bad: u64 = steady.iter().map(|s| s.bad).sum();
    let ok: u64 = steady.iter().map(|s| s.ok).sum();
    assert!(goodput >= 0.85 * CAPACITY, "goodput {goodput}");
    assert!((bad as f64) < 0.1 * ok as f64, "503s {bad} for {ok} ok");
    let most = steady.iter().map(|s| s.limit).max().unwrap();
    assert!(most as f64 <= 1.5 * SERVERS as f64, "limit reached {most}");
}

#[test]
fn errors_that_do_not_follow_the_load_do_not_pin_the_limit_at_its_floor() {
    let mut sim = Sim::new(30);
    sim.fail_every = 20; // 5% 502s at any load
    sim.run(0.5 * CAPACITY, 60_000);
    let steady = sim.window(20, 60);
    let refused = refused_share(steady);
    assert!(refused < 0.01, "refused {refused}");
    assert!(steady.iter().all(|s| s.limit >= 20), "{steady:?}");
}

#[test]
fn a_slower_upstream_is_a_new_base_not_a_limit_at_its_floor() {
    let mut sim = Sim::new(10);
    sim.run(2.0 * CAPACITY, 30_000);
    sim.service_ms = 2 * S_MS; // capacity halves, and so does every latency's floor
    sim.run(2.0 * CAPACITY, 40_000);
    let after = sim.window(50, 70);
    let goodput = mean(after, |s| s.ok as f64);
    assert!(goodput >= 0.9 * CAPACITY / 2.0, "goodput {goodput}");
    assert!(
        after.iter().all(|s| s.limit >= SERVERS as u64 * 3 / 4),
        "{after:?}"
    );
}

#[test]
fn the_state_survives_words_and_torn_words_stay_in_range() {
    let mut sim = Sim::new(10);
    sim.run(2.0 * CAPACITY, 20_000);
    let words = sim.ctrl.to_words();
    let back = Adaptive::from_words(*sim.ctrl.config(), &words).unwrap();
    assert_eq!(back, sim.ctrl);
    let mut torn = words;
    torn[0] = f64::NAN.to_bits();
    torn[1] = u64::MAX;
    let odd = Adaptive::from_words(*sim.ctrl.config(), &torn).unwrap();
    assert_eq!(odd.limit(), 1, "a NaN limit reads as the floor");
    let fresh = Adaptive::from_words(*sim.ctrl.config(), &[0; STATE_WORDS]).unwrap();
    assert_eq!(fresh.limit(), 10);
}

#[test]
fn bad_configs_name_their_field() {
    let bad = |c: AdaptiveConfig| Adaptive::new(c).unwrap_err().to_string();
    let d = AdaptiveConfig::default();
    assert_eq!(
        bad(AdaptiveConfig { min_limit: 0, ..d }),
        "min_limit must be a positive integer, got 0"
    );
    assert_eq!(
        bad(AdaptiveConfig {
            initial_limit: 20_000,
            ..d
        }),
        "initial_limit must be between min_limit and max_limit, got 20000"
    );
    assert_eq!(
        bad(AdaptiveConfig {
            interval_ms: 5,
            ..d
        }),
        "interval_ms must be an integer from 10 to 2^40, got 5"
    );
    assert_eq!(
        bad(AdaptiveConfig {
            latency_target_ms: Some(-1.0),
            ..d
        }),
        "latency_target_ms must be a positive number, got -1"
    );
}
