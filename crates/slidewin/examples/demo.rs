//! The three limiters on the boundary burst: 100 per 1000 ms, bursts of 100 requests around the
//! edges of fixed windows. A fixed-window counter would admit 200 within 2 ms.
//!
//! `cargo run -p slidewin --example demo`

use slidewin::{BucketWindow, Decision, Limiter, SlidingCounter, SlidingLog};

/// Offer `n` requests of cost 1 at `t_ms`; the number admitted and the last decision.
fn burst(limiter: &mut impl Limiter, t_ms: i64, n: u32) -> (u32, Decision) {
    let mut admitted = 0;
    let mut last = limiter.peek_at(t_ms, 0).unwrap();
    for _ in 0..n {
        last = limiter.check_at(t_ms, 1).unwrap();
        admitted += u32::from(last.allowed);
    }
    (admitted, last)
}

fn show(name: &str, mut limiter: impl Limiter) {
    print!("{name:<28}");
    for t_ms in [999, 1_001, 1_500, 1_998, 1_999] {
        let (admitted, last) = burst(&mut limiter, t_ms, 100);
        let retry = last
            .retry_after_ms
            .map_or("never".into(), |ms| format!("{ms}ms"));
        print!(" | {admitted:>3} ({retry:>5})");
    }
    println!();
}

fn main() {
    println!(
        "100 requests at each time, limit 100 per 1000 ms: admitted (retry-after of the last)"
    );
    println!(
        "{:<28} | t=999       | t=1001      | t=1500      | t=1998      | t=1999",
        ""
    );
    show("SlidingLog (exact)", SlidingLog::new(100, 1_000).unwrap());
    show(
        "BucketWindow (100 ms)",
        BucketWindow::new(100, 1_000, 100).unwrap(),
    );
    show(
        "SlidingCounter (estimate)",
        SlidingCounter::new(100, 1_000).unwrap(),
    );
    println!("The log and buckets never hold more than 100 in any 1000 ms; the counter's estimate");
    println!("admits 50 + 49 more at t=1500 and t=1998: 199 in (998, 1998], near its worst case.");
}
