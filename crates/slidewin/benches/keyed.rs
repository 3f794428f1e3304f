//! Keyed stores on one workload: limit 1000 per 1000 ms, the clock advancing 1 ms every 4
//! calls, 1,000,000 u64 keys. `cargo bench -p slidewin --bench keyed` (figures in
//! BENCHMARKS.md, "Keyed store").
//!
//! Single-thread figures are the thread's CPU time per call (CLOCK_THREAD_CPUTIME_ID), so
//! that on a shared, loaded machine they count our work and not the waits for a core; the
//! sharded store is also timed by the wall clock, as calls per second over its threads.

use cpu_time::ThreadTime;
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
#[path = "support/governor_keyed.rs"]
mod governor_keyed;

use governor_keyed::GovernorKeyed;
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Inflight, InflightConfig, Owner, Zone};
use slidewin::{Keyed, Quota, ShardedKeyed, SlidingCounter};
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

const KEYS: u64 = 1_000_000;
const CALLS_PER_MS: u64 = 4;

fn quota() -> Quota {
    Quota::new(1_000, 1_000).unwrap()
}

/// One process, one thread: the lock owner of the shared store's bench.
struct OneProcess;
impl Owner for OneProcess {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

/// CPU time this thread has run (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu() -> Duration {
    ThreadTime::now().as_duration()
}

/// Which key the `call`-th call uses.
type KeyOf = fn(u64) -> u64;

/// The key of the `call`-th call, keys in turn.
fn key_in_turn(call: u64) -> u64 {
    call % KEYS
}

/// The key of the `call`-th call, keys scattered (7919 is prime to 10^6, so each 10^6 calls
/// still use every key once): keys are not met in the order they were added.
fn key_scattered(call: u64) -> u64 {
    call * 7_919 % KEYS
}

/// The time of the `call`-th call.
fn time_ms(call: u64) -> i64 {
    (call / CALLS_PER_MS) as i64
}

/// Make one call per key (so every key is held), then time further calls of the workload,
/// keys in turn and then scattered.
fn bench_calls(
    group: &mut BenchmarkGroup<'_, WallTime>,
    store: &str,
    mut check: impl FnMut(u64, i64) -> bool,
) {
    let mut call = 0;
    while call < KEYS {
        check(key_in_turn(call), time_ms(call));
        call += 1;
    }
    let orders: [(&str, KeyOf); 2] = [("in turn", key_in_turn), ("scattered", key_scattered)];
    for (order, key_of) in orders {
        group.bench_function(format!("{store}, keys {order}"), |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu();
                for _ in 0..iters {
                    call += 1;
                    black_box(check(key_of(call), time_ms(call)));
                }
                thread_cpu() - start
            })
        });
    }
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

    // The shared-memory store on a heap region sized for 1.5 M keys (8-way sets, so some
    // evict before the region is full), keys as their 8 bytes.
    let bytes = 3 * KEYS as usize / 2
        * Zone::<&[AtomicU64], OneProcess>::bytes_per_key(
            &Rule::one(RuleWindow::counter(quota())),
            16,
        )
        .unwrap();
    let region: Vec<AtomicU64> = (0..bytes / 8).map(|_| AtomicU64::new(0)).collect();
    let (zone, _) = Zone::attach(
        &region[..],
        Rule::one(RuleWindow::counter(quota())),
        16,
        OneProcess,
        [1, 2],
    )
    .unwrap();
    bench_calls(
        &mut group,
        "slidewin shared::Zone<SlidingCounter>",
        |key, now_ms| {
            zone.check_at(&key.to_le_bytes(), now_ms, 1)
                .unwrap()
                .allowed
        },
    );
    drop(region);

    let mut governor = GovernorKeyed::per_second(1_000);
    bench_calls(
        &mut group,
        "governor keyed GCRA (DashMap)",
        |key, now_ms| governor.check_at(key, now_ms),
    );
    assert_eq!(governor.len(), KEYS as usize);
    group.finish();
}

/// Make `iters` calls on each of `threads` threads, thread t taking the keys = t (mod threads)
/// so that each key's clock only moves forward. Returns the wall time and the CPU time summed
/// over the threads.
fn run_threads(
    keyed: &ShardedKeyed<SlidingCounter>,
    first_call: u64,
    iters: u64,
    threads: u64,
) -> (Duration, Duration) {
    let start = Instant::now();
    let cpu = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|thread| {
                scope.spawn(move || {
                    let start = thread_cpu();
                    for i in 0..iters {
                        let call = first_call + i * threads + thread;
                        black_box(
                            keyed
                                .check_at(&key_in_turn(call), time_ms(call), 1)
                                .unwrap(),
                        );
                    }
                    thread_cpu() - start
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    (start.elapsed(), cpu)
}

/// The sharded store (16 shards) from 1 and from 2 threads; throughput is calls per second
/// over all threads, by the wall clock and per CPU second.
fn sharded(c: &mut Criterion) {
    let mut group = c.benchmark_group("sharded keyed 1M keys");
    let keyed = ShardedKeyed::<SlidingCounter>::new(quota(), KEYS as usize, 16).unwrap();
    for call in 0..KEYS {
        keyed
            .check_at(&key_in_turn(call), time_ms(call), 1)
            .unwrap();
    }
    let mut next_call = KEYS;
    for threads in [1_u64, 2] {
        group.throughput(Throughput::Elements(threads));
        for by_cpu in [false, true] {
            let clock = if by_cpu { "CPU" } else { "wall" };
            group.bench_function(format!("{threads} thread(s), {clock} time"), |b| {
                b.iter_custom(|iters| {
                    let first_call = next_call;
                    next_call += iters * threads;
                    let (wall, cpu) = run_threads(&keyed, first_call, iters, threads);
                    if by_cpu {
                        cpu
                    } else {
                        wall
                    }
                })
            });
        }
    }
    group.finish();
}

/// A concurrency limit's `enter_at` + `leave_at` (target: at most 0.5 us for the pair), on
/// one hot key and over 10,000 keys, each key at most 100 in flight, in a heap region.
fn concurrency(c: &mut Criterion) {
    let mut group = c.benchmark_group("concurrency enter + leave");
    group.throughput(Throughput::Elements(1));
    let config = InflightConfig::new(100, 100, 60_000).unwrap();
    let bytes = Inflight::<&[AtomicU64], OneProcess>::bytes_for(&config, 16, 15_000).unwrap();
    let region: Vec<AtomicU64> = (0..bytes / 8).map(|_| AtomicU64::new(0)).collect();
    let (slots, _) = Inflight::attach(&region[..], config, 16, OneProcess, [1, 2]).unwrap();
    for (name, keys) in [("one key", 1u64), ("10,000 keys", 10_000)] {
        let mut call = 0u64;
        group.bench_function(format!("shared::Inflight, {name}"), |b| {
            b.iter_custom(|iters| {
                let start = thread_cpu();
                for _ in 0..iters {
                    call += 1;
                    let key = (call * 7_919 % keys).to_le_bytes();
                    let entry = slots.enter_at(&key, time_ms(call)).unwrap();
                    assert!(entry.admitted);
                    black_box(slots.leave_at(&key, entry.token).unwrap());
                }
                thread_cpu() - start
            })
        });
    }
    group.finish();
}

criterion_group!(benches, single_thread, sharded, concurrency);
criterion_main!(benches);
