//! Bytes per key of keyed stores holding 1,000,000 live u64 keys, from the process's resident
//! set (/proc/self/statm) before and after filling: what the allocator really took, not an
//! estimate. One store per run, so each starts from a clean heap:
//!
//! ```sh
//! cargo run --release -p slidewin --example keyed_memory -- slidewin
//! cargo run --release -p slidewin --example keyed_memory -- governor
//! ```

#[path = "../benches/support/governor_keyed.rs"]
mod governor_keyed;

use governor_keyed::GovernorKeyed;
use slidewin::{Keyed, Quota, SlidingCounter};

const KEYS: u64 = 1_000_000;

/// Resident bytes now (second field of statm, in pages).
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .expect("statm field 2");
    pages * 4096
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "slidewin".into());
    let before = rss_bytes();
    let (rss_after, estimate) = match which.as_str() {
        "slidewin" => slidewin(),
        "governor" => governor(),
        other => panic!("keyed_memory: unknown store {other:?} (slidewin, governor)"),
    };
    let per_key = (rss_after - before) as f64 / KEYS as f64;
    print!(
        "{which}: {KEYS} keys, RSS delta {} bytes = {per_key:.1} bytes/key",
        rss_after - before
    );
    match estimate {
        Some(bytes) => println!(
            ", bytes_estimate {:.1} bytes/key",
            bytes as f64 / KEYS as f64
        ),
        None => println!(),
    }
}

/// Fill a `Keyed<SlidingCounter>`; the RSS while it is alive, and its own estimate.
fn slidewin() -> (usize, Option<usize>) {
    let quota = Quota::new(1_000, 1_000).unwrap();
    let mut keyed = Keyed::<SlidingCounter>::new(quota, KEYS as usize).unwrap();
    for key in 0..KEYS {
        keyed.check_at(&key, (key / 4) as i64, 1).unwrap();
    }
    assert_eq!(keyed.len(), KEYS as usize);
    (rss_bytes(), Some(keyed.bytes_estimate()))
}

/// Fill governor's default keyed limiter; the RSS while it is alive.
fn governor() -> (usize, Option<usize>) {
    let mut limiter = GovernorKeyed::per_second(1_000);
    for key in 0..KEYS {
        assert!(limiter.check_at(key, (key / 4) as i64));
    }
    assert_eq!(limiter.len(), KEYS as usize);
    (rss_bytes(), None)
}
