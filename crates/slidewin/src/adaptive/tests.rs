//! The controller in front of the simulated upstream (`sim.rs`): every service model at loads
//! under and over capacity, from the documented config and from ten times the knee.

use alloc::string::ToString;
use alloc::vec::Vec;

use super::sim::{Interval, Service, Sim};
use super::*;

/// The issue's upstream: 12 slots, 80 ms a request on average: 150 requests/s.
const SLOTS: usize = 12;
const MEAN_MS: f64 = 80.0;
/// Runs of each scenario, each with a seed of its own (set `SLIDEWIN_SIM_RUNS` for more).
const RUNS: u64 = 2;

/// The documented config: initial 16, min 2, max 1000, interval 500 ms.
fn readme(initial_limit: u64) -> AdaptiveConfig {
    AdaptiveConfig {
        initial_limit,
        min_limit: 2,
        max_limit: 1_000,
        interval_ms: 500,
        latency_target_ms: None,
    }
}

/// The documented start and one far above the knee.
const STARTS: [u64; 2] = [16, 10 * SLOTS as u64];

/// The seeds of a scenario's runs: `RUNS` of them (or `SLIDEWIN_SIM_RUNS`), other for every
/// scenario (`what` names it).
fn seeds(what: &str) -> Vec<u64> {
    extern crate std;
    let runs = std::env::var("SLIDEWIN_SIM_RUNS")
        .ok()
        .and_then(|n| n.parse().ok());
    let scenario = what.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (0..runs.unwrap_or(RUNS))
        .map(|run| scenario ^ run)
        .collect()
}

fn sim(initial_limit: u64, service: Service, seed: u64) -> Sim {
    Sim::new(readme(initial_limit), SLOTS, MEAN_MS, service, seed)
}

fn sum(intervals: &[Interval], f: fn(&Interval) -> u64) -> u64 {
    intervals.iter().map(f).sum()
}

/// The bounds a scenario's runs missed, reported all at once (a run that misses one bound
/// says which, with its seed to replay it).
#[derive(Default)]
struct Misses(Vec<alloc::string::String>);

impl Misses {
    fn check(&mut self, held: bool, what: impl FnOnce() -> alloc::string::String) {
        if !held {
            self.0.push(what());
        }
    }

    fn none(self) {
        assert!(
            self.0.is_empty(),
            "{} missed:\n{}",
            self.0.len(),
            self.0.join("\n")
        );
    }
}

fn goodput_share(sim: &Sim, from: f64, to: f64) -> f64 {
    let ok = sum(sim.seconds(from, to), |i| i.ok) as f64;
    ok / (to - from) / sim.capacity()
}

#[test]
fn below_capacity_every_service_model_is_left_alone() {
    let mut misses = Misses::default();
    for service in Service::ALL {
        for load in [0.5, 0.8, 0.95] {
            for start in STARTS {
                for seed in seeds(&alloc::format!("below {service:?} {load} {start}")) {
                    let mut sim = sim(start, service, seed);
                    sim.run(load * sim.capacity(), 600e3);
                    let all = sim.seconds(0.0, 600.0);
                    let refused = sum(all, |i| i.refused) as f64 / sum(all, |i| i.offered) as f64;
                    let lowest = all.iter().map(|i| i.limit).min().unwrap();
                    let case = alloc::format!("{service:?} at {load}x from {start}, seed {seed:x}");
                    misses.check(refused <= 0.005, || {
                        alloc::format!("{case}: refused {refused}")
                    });
                    let fell = || alloc::format!("{case}: the limit fell to {lowest}");
                    misses.check(lowest >= SLOTS as u64, fell);
                }
            }
        }
    }
    misses.none();
}

#[test]
fn the_issues_upstream_at_0_8x_refuses_nothing() {
    // 12 slots x 80 ms x U[0.5, 1.5], 120 requests/s: the run that shed 9-66% before.
    for seed in seeds("the issue's upstream") {
        let mut sim = sim(16, Service::Uniform(0.5), seed);
        sim.run(120.0, 600e3);
        let all = sim.seconds(0.0, 600.0);
        assert_eq!(sum(all, |i| i.refused), 0, "seed {seed:x}");
        assert!(all.iter().all(|i| i.limit == 16), "seed {seed:x}");
    }
}

#[test]
fn overload_2x_and_5x_keeps_goodput_and_p99_near_no_load() {
    let mut misses = Misses::default();
    for service in Service::ALL {
        let no_load_p99 = service.no_load_quantile(MEAN_MS, 0.99, 7);
        for load in [2.0, 5.0] {
            for start in STARTS {
                for seed in seeds(&alloc::format!("over {service:?} {load} {start}")) {
                    let mut sim = sim(start, service, seed);
                    sim.run(load * sim.capacity(), 60e3);
                    let case = alloc::format!("{service:?} at {load}x from {start}, seed {seed:x}");
                    let goodput = goodput_share(&sim, 10.0, 60.0);
                    misses.check(goodput >= 0.9, || {
                        alloc::format!("{case}: goodput {goodput}")
                    });
                    let p99 = sim.latency_quantile(10.0, 0.99);
                    let slow = || alloc::format!("{case}: p99 {p99} vs {no_load_p99}");
                    misses.check(p99 <= 2.0 * no_load_p99, slow);
                }
            }
        }
    }
    misses.none();
}

#[test]
fn a_cold_start_at_5x_from_ten_times_the_knee_measures_the_no_load_time_within_5_s() {
    let mut misses = Misses::default();
    for service in Service::ALL {
        let true_p50 = service.no_load_quantile(MEAN_MS, 0.5, 7);
        let no_load_p99 = service.no_load_quantile(MEAN_MS, 0.99, 7);
        for seed in seeds(&alloc::format!("cold {service:?}")) {
            let mut sim = sim(10 * SLOTS as u64, service, seed);
            let case = alloc::format!("{service:?}, seed {seed:x}");
            sim.run(5.0 * sim.capacity(), 5e3);
            // How far the baseline is from the true median (1: no baseline yet).
            let off = |sim: &Sim| {
                let base = sim.ctrl.base_ms().unwrap_or(0.0);
                (base - true_p50).abs() / true_p50
            };
            // The median of the few hundred answers a probe sees by then is within 10% of the
            // true one, but for the two models whose medians scatter most (exponential and
            // lognormal sigma 1: +-7% one standard error at 300 answers); by 60 s, within half
            // as much again (the next probe may be minutes away).
            let within = match service {
                Service::Exponential | Service::Lognormal(1.0) => 0.25,
                _ => 0.1,
            };
            let early = off(&sim);
            misses.check(early <= within, || {
                alloc::format!("{case}: base off by {early} at 5 s")
            });
            sim.run(5.0 * sim.capacity(), 55e3);
            let later = off(&sim);
            misses.check(later <= 1.5 * within, || {
                alloc::format!("{case}: base off by {later} at 60 s")
            });
            let p99 = sim.latency_quantile(5.0, 0.99);
            let slow = || alloc::format!("{case}: p99 {p99} vs {no_load_p99}");
            misses.check(p99 <= 2.0 * no_load_p99, slow);
        }
    }
    misses.none();
}

/// Seconds from `from` until the limit first meets `reached`.
fn seconds_until(sim: &Sim, from: f64, reached: impl Fn(u64) -> bool) -> f64 {
    let after = sim.seconds(from, f64::INFINITY);
    let n = after
        .iter()
        .position(|i| reached(i.limit))
        .unwrap_or(after.len());
    n as f64 * sim.ctrl.config().interval_ms as f64 / 1e3
}

#[test]
fn capacity_halved_or_doubled_is_followed_within_2_s() {
    let mut misses = Misses::default();
    for service in [Service::Uniform(0.5), Service::Exponential, Service::Fixed] {
        let no_load_p99 = service.no_load_quantile(MEAN_MS, 0.99, 7);
        for (slots, change) in [(SLOTS / 2, "halved"), (2 * SLOTS, "doubled")] {
            for seed in seeds(&alloc::format!("{service:?} {change}")) {
                let mut sim = sim(16, service, seed);
                let rate = 3.0 * sim.capacity();
                sim.run(rate, 30e3);
                sim.servers = slots;
                sim.run(rate, 30e3);
                let case = alloc::format!("{service:?} {change}, seed {seed:x}");
                let knee = slots as f64;
                let followed = |l: u64| match change {
                    "halved" => l as f64 <= 1.5 * knee,
                    _ => l as f64 >= 0.8 * knee,
                };
                let took = seconds_until(&sim, 30.0, followed);
                misses.check(took <= 2.0, || {
                    alloc::format!("{case}: followed after {took} s")
                });
                let goodput = goodput_share(&sim, 32.0, 60.0);
                misses.check(goodput >= 0.9, || {
                    alloc::format!("{case}: goodput {goodput}")
                });
                let p99 = sim.latency_quantile(32.0, 0.99);
                misses.check(p99 <= 2.0 * no_load_p99, || {
                    alloc::format!("{case}: p99 {p99}")
                });
            }
        }
    }
    misses.none();
}

#[test]
fn sustained_3x_for_30_minutes_does_not_drift() {
    let mut misses = Misses::default();
    for service in [Service::Uniform(0.5), Service::Lognormal(0.5)] {
        for seed in seeds(&alloc::format!("3x {service:?}")) {
            let mut sim = sim(16, service, seed);
            sim.run(3.0 * sim.capacity(), 1_800e3);
            let means: Vec<f64> = (2..60)
                .map(|half_minute| {
                    let from = half_minute as f64 * 30.0;
                    let window = sim.seconds(from, from + 30.0);
                    sum(window, |i| i.limit) as f64 / window.len() as f64
                })
                .collect();
            let first = means[0];
            for (i, m) in means.iter().enumerate() {
                let drift = (m - first).abs() / first;
                let case =
                    || alloc::format!("{service:?} seed {seed:x}: window {i}: {m} vs {first}");
                misses.check(drift <= 0.15, case);
            }
        }
    }
    misses.none();
}

#[test]
fn an_upstream_that_fails_fast_is_limited_by_its_503s_not_its_flat_latency() {
    let mut sim = sim(16, Service::Fixed, 1);
    sim.fails_fast = true;
    sim.run(2.0 * sim.capacity(), 60e3);
    let steady = sim.seconds(20.0, 60.0);
    let (bad, ok) = (sum(steady, |i| i.bad), sum(steady, |i| i.ok));
    assert!(goodput_share(&sim, 20.0, 60.0) >= 0.85);
    assert!((bad as f64) < 0.1 * ok as f64, "503s {bad} for {ok} ok");
    let most = steady.iter().map(|i| i.limit).max().unwrap();
    assert!(most as f64 <= 1.5 * SLOTS as f64, "limit reached {most}");
}

#[test]
fn errors_that_do_not_follow_the_load_do_not_pin_the_limit_at_its_floor() {
    let mut sim = sim(30, Service::Uniform(0.5), 1);
    sim.fail_every = 20; // 5% 502s at any load
    sim.run(0.5 * sim.capacity(), 60e3);
    let steady = sim.seconds(20.0, 60.0);
    let refused = sum(steady, |i| i.refused) as f64 / sum(steady, |i| i.offered) as f64;
    assert!(refused < 0.01, "refused {refused}");
    assert!(steady.iter().all(|i| i.limit >= 20), "{steady:?}");
}

#[test]
fn a_slower_upstream_is_a_new_base_not_a_limit_at_its_floor() {
    let mut sim = sim(16, Service::Uniform(0.5), 1);
    sim.run(2.0 * sim.capacity(), 30e3);
    sim.mean_ms = 2.0 * MEAN_MS; // capacity halves, and so does every latency's floor
    sim.run(2.0 * sim.capacity(), 40e3);
    assert!(goodput_share(&sim, 50.0, 70.0) >= 0.9);
    let after = sim.seconds(50.0, 70.0);
    assert!(
        after.iter().all(|i| i.limit >= SLOTS as u64 * 3 / 4),
        "{after:?}"
    );
    let base = sim.ctrl.base_ms().unwrap();
    let true_p50 = Service::Uniform(0.5).no_load_quantile(2.0 * MEAN_MS, 0.5, 7);
    assert!(
        (base - true_p50).abs() <= 0.1 * true_p50,
        "{base} vs {true_p50}"
    );
}

#[test]
fn the_state_survives_words_and_torn_words_stay_in_range() {
    let mut sim = sim(16, Service::Uniform(0.5), 1);
    for secs in [2.0, 3.0, 20.0] {
        sim.run(2.0 * sim.capacity(), secs * 1e3); // mid-probe, then steering
        let words = sim.ctrl.to_words();
        let back = Adaptive::from_words(*sim.ctrl.config(), &words).unwrap();
        assert_eq!(back, sim.ctrl);
    }
    let mut torn = sim.ctrl.to_words();
    torn[0] = f64::NAN.to_bits();
    torn[1] = u64::MAX;
    let odd = Adaptive::from_words(*sim.ctrl.config(), &torn).unwrap();
    assert_eq!(odd.limit(), 2, "a NaN limit reads as the floor");
    let fresh = Adaptive::from_words(*sim.ctrl.config(), &[0; STATE_WORDS]).unwrap();
    assert_eq!(fresh.limit(), 16);
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
