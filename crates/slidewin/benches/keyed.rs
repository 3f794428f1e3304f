//! Keyed stores on one workload: limit 1000 per 1000 ms, the clock advancing 1 ms every 4
//! calls, 1,000,000 u64 keys used in turn. `cargo bench -p slidewin --bench keyed`
//! (figures in BENCHMARKS.md, "Keyed store").

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
#[path = "support/governor_keyed.rs"]
mod governor_keyed;

use governor_keyed::GovernorKeyed;
use slidewin::{Keyed, Quota, ShardedKeyed, SlidingCounter};
use std::hint::black_box;
use std::time::Instant;

const KEYS: u64 = 1_000_000;
const CALLS_PER_MS: u64 = 4;

fn quota() -> Quota {
    Quota::new(1_000, 1_000).unwrap()
}

/// The key and time of the `call`-th call of the workload.
#[inline]
fn workload(call: u64) -> (u64, i64) {
    (call % KEYS, (call / CALLS_PER_MS) as i64)
}

/// Make one call per key (so every key is held), then time further calls of the workload.
fn bench_calls(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    mut check: impl FnMut(u64, i64) -> bool,
) {
    let mut call = 0;
    while call < KEYS {
        let (key, now_ms) = workload(call);
        check(key, now_ms);
        call += 1;
    }
    group.bench_function(name, |b| {
        b.iter(|| {
            let (key, now_ms) = workload(call);
            call += 1;
            black_box(check(key, now_ms))
        })
    });
}

fn single_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("keyed 1M keys");
    group.throughput(Throughput::Elements(1));

    let mut keyed = Keyed::<SlidingCounter>::new(quota(), KEYS as usize).unwrap();
    bench_calls(
        &mut group,
        "slidewin Keyed<SlidingCounter>",
        |key, now_ms| keyed.check_at(&key, now_ms, 1).unwrap().allowed,
    );
    assert_eq!(keyed.stats().evictions, 0);
    drop(keyed);

    let mut governor = GovernorKeyed::per_second(1_000);
    bench_calls(
        &mut group,
        "governor keyed GCRA (DashMap)",
        |key, now_ms| governor.check_at(key, now_ms),
    );
    assert_eq!(governor.len(), KEYS as usize);
    group.finish();
}

/// The sharded store from 1 and from 2 threads (each thread its own half of the keys);
/// throughput is calls per second over all threads.
fn sharded(c: &mut Criterion) {
    let mut group = c.benchmark_group("sharded keyed 1M keys");
    let keyed = ShardedKeyed::<SlidingCounter>::new(quota(), KEYS as usize, 16).unwrap();
    for call in 0..KEYS {
        let (key, now_ms) = workload(call);
        keyed.check_at(&key, now_ms, 1).unwrap();
    }
    let mut next_call = KEYS;
    for threads in [1_u64, 2] {
        group.throughput(Throughput::Elements(threads));
        group.bench_function(format!("{threads} thread(s)"), |b| {
            b.iter_custom(|iters| {
                let first_call = next_call;
                next_call += iters * threads;
                let start = Instant::now();
                std::thread::scope(|scope| {
                    for thread in 0..threads {
                        let keyed = &keyed;
                        scope.spawn(move || {
                            for i in 0..iters {
                                // Thread t takes keys = t (mod threads), so each key's clock
                                // only moves forward.
                                let call = first_call + i * threads + thread;
                                let (key, now_ms) = workload(call);
                                black_box(keyed.check_at(&key, now_ms, 1).unwrap());
                            }
                        });
                    }
                });
                start.elapsed()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, single_thread, sharded);
criterion_main!(benches);
