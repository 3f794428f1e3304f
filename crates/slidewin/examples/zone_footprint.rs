//! The shared `Zone` and governor's keyed limiter at growing key counts, one thread: ns per
//! call (best of three 10^7-call runs, wall clock) beside the bytes each store's keys take, so
//! the cost of a call can be read against what the CPU caches hold. The workload is the keyed
//! bench's (limit 1000 per 1000 ms, the clock moving 1 ms every 4 calls, keys in turn; the Zone
//! sized for 1.5x the keys, 16-byte keys). Figures in BENCHMARKS.md.
//!
//! ```sh
//! cargo run --release -p slidewin --example zone_footprint
//! ```

#[path = "../benches/support/governor_keyed.rs"]
mod governor_keyed;

use governor_keyed::GovernorKeyed;
use slidewin::rule::{Rule, RuleWindow};
use slidewin::shared::{Owner, Zone};
use slidewin::Quota;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

/// governor's keyed state, measured by the keyed_memory example (RSS per key at 10^6 keys).
const GOVERNOR_BYTES_PER_KEY: f64 = 35.9;

struct OneProcess;
impl Owner for OneProcess {
    fn id(&self) -> u64 {
        1
    }
    fn is_alive(&self, _: u64) -> bool {
        true
    }
}

/// One call per key, then the best ns per call of three runs.
fn ns_per_call(keys: u64, mut check: impl FnMut(u64, i64) -> bool) -> f64 {
    let mut call = 0u64;
    let mut next = |check: &mut dyn FnMut(u64, i64) -> bool| {
        call += 1;
        black_box(check(call % keys, (call / 4) as i64));
    };
    for _ in 0..keys {
        next(&mut check);
    }
    let runs = (0..3).map(|_| {
        let calls = 10_000_000;
        let start = Instant::now();
        for _ in 0..calls {
            next(&mut check);
        }
        start.elapsed().as_nanos() as f64 / calls as f64
    });
    runs.fold(f64::MAX, f64::min)
}

fn main() {
    let rule = Rule::one(RuleWindow::counter(Quota::new(1_000, 1_000).unwrap()));
    let per_key = Zone::<&[AtomicU64], OneProcess>::bytes_per_key(&rule, 16).unwrap();
    println!("keys       Zone ns (MB)        governor ns (MB)    Zone/governor");
    for keys in [10_000u64, 100_000, 250_000, 500_000, 1_000_000] {
        let bytes = 3 * keys as usize / 2 * per_key;
        let region: Vec<AtomicU64> = (0..bytes / 8).map(|_| AtomicU64::new(0)).collect();
        let (zone, _) = Zone::attach(&region[..], rule.clone(), 16, OneProcess, [1, 2]).unwrap();
        let zone_ns = ns_per_call(keys, |key, now_ms| {
            zone.check_at(&key.to_le_bytes(), now_ms, 1)
                .unwrap()
                .allowed
        });
        drop(zone);
        drop(region);
        let mut governor = GovernorKeyed::per_second(1_000);
        let governor_ns = ns_per_call(keys, |key, now_ms| governor.check_at(key, now_ms));
        assert_eq!(governor.len(), keys as usize, "governor holds every key");
        println!(
            "{keys:>9}  {zone_ns:6.1} ({:5.1})      {governor_ns:6.1} ({:5.1})      {:.2}",
            bytes as f64 / 1e6,
            keys as f64 * GOVERNOR_BYTES_PER_KEY / 1e6,
            zone_ns / governor_ns
        );
    }
}
