//! A fixed number of calls of the limiters bench's workload (limit 1000 per 1000 ms unless
//! told, the clock advancing 1 ms every 4 calls), for counting instructions, which load on the
//! machine does not change:
//!
//! ```sh
//! cargo build --release -p slidewin --example limiter_calls
//! for n in 1000000 2000000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/limiter_calls log $n 2>&1 | grep 'Collected'
//! done
//! ```
//!
//! The difference of the two counts over 10^6 is the instructions a call costs (warm-up and
//! start-up cancel out). Cases: `log`, `log-large` (100,000 per 10 s), `buckets` (10 ms
//! buckets), `counter`, and rules: `rule-one` (the log as a rule of one window), `rule-two`
//! (the log and 10,000 per 10 s, both logs).

use std::hint::black_box;

use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
use slidewin::{BucketWindow, Limiter, Quota, SlidingCounter, SlidingLog};

/// A rule of log windows, (limit, window_ms) each.
fn rule(windows: &[(u64, i64)]) -> RuleLimiter {
    let windows = windows
        .iter()
        .map(|&(limit, window_ms)| RuleWindow::log(Quota::new(limit, window_ms).unwrap()));
    RuleLimiter::from_config(Rule::new(windows).unwrap())
}

/// Runs `calls` calls after two windows of warm-up, reading each decision in place.
fn run(mut limiter: impl Limiter, window_ms: i64, calls: u64) {
    let mut now = 0;
    let mut call = |i: u64| {
        if i % 4 == 0 {
            now += 1;
        }
        black_box(&limiter.check_at(black_box(now), 1));
    };
    (0..8 * window_ms as u64).for_each(&mut call);
    (0..calls).for_each(call);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let calls = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    match case.as_str() {
        "log" => run(SlidingLog::new(1_000, 1_000).unwrap(), 1_000, calls),
        "log-large" => run(SlidingLog::new(100_000, 10_000).unwrap(), 10_000, calls),
        "buckets" => run(BucketWindow::new(1_000, 1_000, 10).unwrap(), 1_000, calls),
        "counter" => run(SlidingCounter::new(1_000, 1_000).unwrap(), 1_000, calls),
        "rule-one" => run(rule(&[(1_000, 1_000)]), 1_000, calls),
        "rule-two" => run(rule(&[(1_000, 1_000), (10_000, 10_000)]), 10_000, calls),
        _ => {
            eprintln!(
                "usage: limiter_calls log|log-large|buckets|counter|rule-one|rule-two [calls], \
                 got {case:?}"
            );
            std::process::exit(2);
        }
    }
}
