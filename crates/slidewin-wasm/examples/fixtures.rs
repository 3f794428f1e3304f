//! Writes the core's answers on shared input vectors as JSON (stdout), so the JS tests compare
//! the WebAssembly package against the Rust core without hand-copied numbers.
//!
//! `cargo run -p slidewin-wasm --example fixtures > js/test/fixtures.json` (done by `make test-js`).

use serde_json::{json, Value};
use slidewin::{BucketWindow, Decision, Limiter, SlidingCounter, SlidingLog};

/// A small deterministic generator (64-bit LCG), so every run writes the same vectors.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Calls `(now_ms, cost)`: bursts and pauses, costs 0..=4, times never decreasing.
fn limiter_trace(calls: usize) -> Vec<(i64, u64)> {
    let mut rng = Lcg(7);
    let mut now_ms = 1_700_000_000_000;
    (0..calls)
        .map(|_| {
            now_ms += [0, 1, 3, 20, 150][rng.below(5) as usize];
            (now_ms, rng.below(5))
        })
        .collect()
}

fn decision_json(d: Decision) -> Value {
    json!({
        "allowed": d.allowed,
        "limit": d.limit,
        "remaining": d.remaining,
        "retryAfterMs": d.retry_after_ms,
        "resetAfterMs": d.reset_after_ms,
    })
}

fn replay(mut limiter: impl Limiter, trace: &[(i64, u64)]) -> Vec<Value> {
    let decide = |(now_ms, cost): &(i64, u64)| limiter.check_at(*now_ms, *cost).map(decision_json);
    trace
        .iter()
        .map(decide)
        .collect::<Result<_, _>>()
        .expect("the trace is valid")
}

fn limiters() -> Value {
    let trace = limiter_trace(2_000);
    let case = |name: &str, args: Value, decisions: Vec<Value>| json!({ "class": name, "args": args, "decisions": decisions });
    json!({
        "trace": trace,
        "cases": [
            case("SlidingLog", json!([20, 1_000]), replay(SlidingLog::new(20, 1_000).unwrap(), &trace)),
            case("BucketWindow", json!([20, 1_000, 100]), replay(BucketWindow::new(20, 1_000, 100).unwrap(), &trace)),
            case("SlidingCounter", json!([20, 1_000]), replay(SlidingCounter::new(20, 1_000).unwrap(), &trace)),
        ],
    })
}

fn main() {
    println!("{}", json!({ "limiters": limiters() }));
}
