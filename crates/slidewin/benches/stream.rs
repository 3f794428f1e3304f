//! Stream aggregates over 10^6 random samples with k = 1000, next to what they replace: the
//! naive O(k) rescan and the classic monotonic deque for max/min, a plain (drifting) running
//! sum for the mean, and the bare EWMA recursion. Each iteration pushes every sample and reads the value after each push.
//! Times are the benchmark thread's CPU time, so other work on the shared machine counts less
//! than in wall time. `make bench-stream`; figures in BENCHMARKS.md ("Stream aggregates").

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::{Measurement, ValueFormatter, WallTime};
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use slidewin::stream::*;

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`), printed like wall time.
struct ThreadCpuTime;

static WALL_TIME: WallTime = WallTime;

fn thread_cpu_time() -> Duration {
    cpu_time::ThreadTime::now().as_duration()
}

impl Measurement for ThreadCpuTime {
    type Intermediate = Duration;
    type Value = Duration;

    fn start(&self) -> Duration {
        thread_cpu_time()
    }
    fn end(&self, start: Duration) -> Duration {
        thread_cpu_time() - start
    }
    fn add(&self, a: &Duration, b: &Duration) -> Duration {
        *a + *b
    }
    fn zero(&self) -> Duration {
        Duration::ZERO
    }
    fn to_f64(&self, value: &Duration) -> f64 {
        value.as_nanos() as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        WALL_TIME.formatter()
    }
}

const SAMPLES: usize = 1_000_000;
const K: usize = 1_000;

/// Uniform samples in [-1000, 1000) from splitmix64, the same on every run.
fn samples() -> Vec<f64> {
    let mut state = 0x5eed_u64;
    (0..SAMPLES)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 * 2_000.0 - 1_000.0
        })
        .collect()
}

/// Push every sample into `aggregate`, reading the value after each.
fn stream(mut aggregate: impl Aggregate, xs: &[f64]) {
    for &x in xs {
        aggregate.push(x).unwrap();
        black_box(aggregate.value());
    }
}

fn group<'a>(c: &'a mut Criterion<ThreadCpuTime>, name: &str) -> BenchmarkGroup<'a, ThreadCpuTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(SAMPLES as u64));
    group
}

fn extremes(c: &mut Criterion<ThreadCpuTime>) {
    let xs = samples();
    let window = Window::Count(K);
    for (name, largest) in [("stream/max", true), ("stream/min", false)] {
        let mut group = group(c, name);
        group.sample_size(10);
        if largest {
            group.bench_function("SlidingMax", |b| {
                b.iter(|| stream(SlidingMax::new(window).unwrap(), &xs))
            });
            group.bench_function("sliding_max (batch)", |b| {
                b.iter(|| sliding_max(&xs, K).unwrap())
            });
        } else {
            group.bench_function("SlidingMin", |b| {
                b.iter(|| stream(SlidingMin::new(window).unwrap(), &xs))
            });
            group.bench_function("sliding_min (batch)", |b| {
                b.iter(|| sliding_min(&xs, K).unwrap())
            });
        }
        group.bench_function("monotonic deque", |b| {
            b.iter(|| monotonic_deque(&xs, largest))
        });
        let pick = if largest { f64::max } else { f64::min };
        group.bench_function("naive O(k) rescan", |b| {
            b.iter(|| {
                for i in 0..xs.len() {
                    let window = &xs[(i + 1).saturating_sub(K)..=i];
                    black_box(window.iter().copied().reduce(pick));
                }
            })
        });
        group.finish();
    }
}

/// The textbook monotonic deque (what `Extreme` replaced): its pop loop's branch follows the
/// data, so random samples mispredict about once per sample.
fn monotonic_deque(xs: &[f64], largest: bool) {
    let mut deque: VecDeque<(usize, f64)> = VecDeque::with_capacity(K);
    for (i, &x) in xs.iter().enumerate() {
        while deque
            .back()
            .is_some_and(|&(_, c)| if largest { c < x } else { c > x })
        {
            deque.pop_back();
        }
        deque.push_back((i, x));
        if deque.front().is_some_and(|&(j, _)| j + K <= i) {
            deque.pop_front();
        }
        black_box(deque.front().map(|&(_, c)| c));
    }
}

/// The mean as peers keep it: `sum += new - old`, which drifts.
fn plain_running_mean(xs: &[f64]) {
    let mut window = VecDeque::with_capacity(K + 1);
    let mut sum = 0.0;
    for &x in xs {
        window.push_back(x);
        sum += x;
        if window.len() > K {
            sum -= window.pop_front().unwrap();
        }
        black_box(sum / window.len() as f64);
    }
}

fn mean(c: &mut Criterion<ThreadCpuTime>) {
    let xs = samples();
    let mut group = group(c, "stream/mean");
    group.bench_function("SlidingMean (compensated)", |b| {
        b.iter(|| stream(SlidingMean::new(Window::Count(K)).unwrap(), &xs))
    });
    group.bench_function("plain running sum", |b| b.iter(|| plain_running_mean(&xs)));
    group.bench_function("sliding_mean (batch)", |b| {
        b.iter(|| sliding_mean(&xs, K).unwrap())
    });
    group.finish();
}

fn smoothing(c: &mut Criterion<ThreadCpuTime>) {
    let xs = samples();
    let mut group = group(c, "stream/ewma");
    group.bench_function("Ewma", |b| b.iter(|| stream(Ewma::new(0.01).unwrap(), &xs)));
    group.bench_function("ewma (batch)", |b| b.iter(|| ewma(&xs, 0.01).unwrap()));
    group.bench_function("bare recursion", |b| {
        b.iter(|| {
            let mut mean = xs[0];
            for &x in &xs {
                mean = 0.99 * mean + 0.01 * x;
                black_box(mean);
            }
        })
    });
    group.bench_function("TimeEwma (push_at every ms)", |b| {
        b.iter(|| {
            let mut ewma = TimeEwma::new(1_000).unwrap();
            for (t, &x) in xs.iter().enumerate() {
                ewma.push_at(t as i64, x).unwrap();
                black_box(ewma.value());
            }
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = extremes, mean, smoothing
}
criterion_main!(benches);
