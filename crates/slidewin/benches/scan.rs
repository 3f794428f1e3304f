//! The operator's view: one top-N scan (`Zone::scan_at`, what /slidewin/top and
//! the /metrics window families read) against one decision (`Zone::check_at`, what
//! store:incoming runs) on the store shm's default region (10m, keys of up to 64 bytes), a
//! log rule of 5 per 10 s, 53 live keys (3 at 10x their limit, 50 at half).
//! `cargo bench -p slidewin --bench scan` (figures in BENCHMARKS.md, "Operator's view").

use criterion::{criterion_group, criterion_main, Criterion};
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Owner, Zone};
use slidewin::Quota;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;

const REGION_BYTES: usize = 10 << 20;

/// One process, one thread: the lock owner.
struct OneProcess;
impl Owner for OneProcess {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

fn scan(c: &mut Criterion) {
    let region: Vec<AtomicU64> = (0..REGION_BYTES / 8).map(|_| AtomicU64::new(0)).collect();
    let rule = Rule::one(RuleWindow::log(Quota::new(5, 10_000).unwrap()));
    let (zone, _) = Zone::attach(&region[..], rule, 64, OneProcess, [3, 4]).unwrap();
    let now_ms = 1_000_000;
    for hot in 0..3 {
        for _ in 0..50 {
            zone.check_at(format!("hot-{hot}").as_bytes(), now_ms, 1)
                .unwrap();
        }
    }
    for calm in 0..50 {
        for _ in 0..2 {
            zone.check_at(format!("calm-{calm}").as_bytes(), now_ms, 1)
                .unwrap();
        }
    }
    let mut group = c.benchmark_group("operator view, 10m region");
    group.bench_function("scan_at top 10", |b| {
        b.iter(|| black_box(zone.scan_at(now_ms, 10).unwrap()))
    });
    group.bench_function("check_at (one store:incoming)", |b| {
        b.iter(|| black_box(zone.check_at(b"calm-0", now_ms, 1).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, scan);
criterion_main!(benches);
