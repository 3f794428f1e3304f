//! The core limiters on one key at steady state: limit 1000 per 1000 ms, the clock advancing
//! 1 ms every 4 calls, so 3 of 4 calls are refused. `cargo bench -p slidewin --bench limiters`.
//!
//! Each limiter is timed twice: `wall/…` is criterion's usual wall-clock time; `cpu/…` counts
//! only the thread's CPU time, so the figures hold on a machine shared with other work (time
//! spent descheduled is not counted; caches and cores are still shared).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use slidewin::{BucketWindow, Decision, Limiter, LogState, SlidingCounter, SlidingLog};

/// CPU time this thread has used (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_time() -> Duration {
    cpu_time::ThreadTime::now().as_duration()
}

/// Bench `limiter` (with a window of `window_ms`) on `calls_per_ms` calls of cost 1 per
/// millisecond, after two windows of warm-up so the window is full.
fn steady(
    c: &mut Criterion,
    name: &str,
    mut limiter: impl Limiter,
    window_ms: u64,
    calls_per_ms: u64,
) {
    bench_calls(c, name, window_ms, calls_per_ms, move |now| {
        limiter.check_at(now, 1)
    });
}

/// Bench `decide` called with the workload's clock (see [`steady`]).
fn bench_calls(
    c: &mut Criterion,
    name: &str,
    window_ms: u64,
    calls_per_ms: u64,
    mut decide: impl FnMut(i64) -> Result<Decision, slidewin::Error>,
) {
    let (mut now, mut left_this_ms) = (0, calls_per_ms);
    let mut call = move || {
        if left_this_ms == 0 {
            (now, left_this_ms) = (now + 1, calls_per_ms);
        }
        left_this_ms -= 1;
        decide(now)
    };
    let warm_up = 2 * window_ms * calls_per_ms;
    let admitted = (0..warm_up).filter(|_| call().unwrap().allowed).count();
    println!("{name}: warm-up admitted {admitted} of {warm_up} calls");
    // `black_box(&result)`: every field is computed and stored where `decide` put it. Moving the
    // decision out of its `Result` instead would copy it with 16-byte loads over 8-byte stores,
    // a store-forwarding stall that costs more than the limiter (callers read single fields).
    c.bench_function(&format!("wall/{name}"), |b| {
        b.iter(|| black_box(&call()).is_ok())
    });
    c.bench_function(&format!("cpu/{name}"), |b| {
        b.iter_custom(|iters| {
            let start = thread_cpu_time();
            for _ in 0..iters {
                black_box(&call());
            }
            thread_cpu_time() - start
        })
    });
}

fn limiters(c: &mut Criterion) {
    // The harness alone: the same clock and a decision made without looking at any state.
    bench_calls(c, "baseline (no limiter)", 1_000, 4, |now| {
        let allowed = black_box(now) % 4 == 0;
        Ok(Decision {
            allowed,
            limit: 1_000,
            remaining: 0,
            retry_after_ms: Some(1),
            reset_after_ms: 1_000,
            window: 0,
        })
    });
    steady(
        c,
        "log 1000/1s, 4 calls/ms",
        SlidingLog::new(1_000, 1_000).unwrap(),
        1_000,
        4,
    );
    steady(
        c,
        "log 100000/10s, 4 calls/ms",
        SlidingLog::new(100_000, 10_000).unwrap(),
        10_000,
        4,
    );
    steady(
        c,
        "log 100000/10s, 40 calls/ms",
        SlidingLog::new(100_000, 10_000).unwrap(),
        10_000,
        40,
    );
    let buckets = BucketWindow::new(1_000, 1_000, 10).unwrap();
    steady(c, "buckets 1000/1s by 10ms, 4 calls/ms", buckets, 1_000, 4);
    steady(
        c,
        "counter 1000/1s, 4 calls/ms",
        SlidingCounter::new(1_000, 1_000).unwrap(),
        1_000,
        4,
    );
}

/// Bytes one key of the log costs with a full window of 100 entries (one per ms).
fn log_bytes_per_key(_: &mut Criterion) {
    let mut log = SlidingLog::new(100, 1_000).unwrap();
    for t in 0..100 {
        assert!(log.check_at(t, 1).unwrap().allowed);
    }
    assert_eq!(log.state().len(), 100);
    let heap = SlidingLog::heap_bytes(log.state());
    let inline = std::mem::size_of::<LogState>();
    println!(
        "log, 100 entries: {} bytes per key ({inline} inline + {heap} heap)",
        inline + heap
    );
}

criterion_group!(benches, log_bytes_per_key, limiters);
criterion_main!(benches);
