//! Writes the core's answers on shared input vectors as JSON (stdout), so the JS tests compare
//! the WebAssembly package against the Rust core without hand-copied numbers.
//!
//! `cargo run -p slidewin-wasm --example fixtures > js/test/fixtures.json` (done by `make test-js`).

use serde_json::{json, Value};
use slidewin::stream::{self, Aggregate, Window};
use slidewin::{BucketWindow, Decision, Error, Limiter, SlidingCounter, SlidingLog};

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

/// Samples with a trend, noise and a large offset (where naive running sums drift), at
/// irregular times that sometimes repeat.
fn samples(n: usize) -> (Vec<f64>, Vec<i64>) {
    let mut rng = Lcg(11);
    let mut t_ms = 1_700_000_000_000;
    (0..n)
        .map(|i| {
            t_ms += [0, 7, 40, 250, 1_300][rng.below(5) as usize];
            let noise = rng.below(1_000_000) as f64 / 1e4;
            (1e6 + (i as f64 * 0.37).sin() * 50.0 + noise, t_ms)
        })
        .unzip()
}

/// The value after each push (null where undefined), then after replacing the last sample.
/// `extra` is the class's second parameter (a quantile's `q`, Bollinger's `width`, an `Ema`'s
/// seed), when it has one.
fn stream_case(
    (class, extra): (&str, Value),
    window: &str,
    param: f64,
    mut aggregate: Box<dyn Aggregate>,
    (xs, times): (&[f64], &[i64]),
) -> Value {
    let timed = window == "time" || matches!(class, "Rate" | "TimeEwma");
    let values: Vec<Option<f64>> = xs
        .iter()
        .zip(times)
        .map(|(&x, &t)| {
            if timed {
                aggregate.push_at(t, x)
            } else {
                aggregate.push(x)
            }
            .map(|()| aggregate.value())
        })
        .collect::<Result<_, Error>>()
        .expect("the samples are valid");
    aggregate.replace_last(-3.25).expect("there is a sample");
    json!({
        "class": class, "extra": extra, "window": window, "param": param, "timed": timed,
        "values": values, "afterReplaceLast": aggregate.value(),
    })
}

fn aggregates(xs: &[f64], times: &[i64]) -> Vec<Value> {
    let input = (xs, times);
    let mut cases = Vec::new();
    for (window, param) in [("count", 50.0), ("count", 1.0), ("time", 5_000.0)] {
        let w = if window == "count" {
            Window::Count(param as usize)
        } else {
            Window::Time(param as i64)
        };
        let sliding: [(&str, Box<dyn Aggregate>); 9] = [
            ("SlidingSum", Box::new(stream::SlidingSum::new(w).unwrap())),
            (
                "SlidingMean",
                Box::new(stream::SlidingMean::new(w).unwrap()),
            ),
            ("SlidingMax", Box::new(stream::SlidingMax::new(w).unwrap())),
            ("SlidingMin", Box::new(stream::SlidingMin::new(w).unwrap())),
            (
                "SlidingVariance",
                Box::new(stream::SlidingVariance::new(w).unwrap()),
            ),
            (
                "SlidingStdDev",
                Box::new(stream::SlidingStdDev::new(w).unwrap()),
            ),
            (
                "SlidingPopulationVariance",
                Box::new(stream::SlidingPopulationVariance::new(w).unwrap()),
            ),
            (
                "SlidingPopulationStdDev",
                Box::new(stream::SlidingPopulationStdDev::new(w).unwrap()),
            ),
            ("SlidingWma", Box::new(stream::SlidingWma::new(w).unwrap())),
        ];
        for (class, aggregate) in sliding {
            cases.push(stream_case(
                (class, Value::Null),
                window,
                param,
                aggregate,
                input,
            ));
        }
        for q in [0.5, 0.95, 0.99] {
            let quantile = Box::new(stream::SlidingQuantile::with_q(w, q).unwrap());
            cases.push(stream_case(
                ("SlidingQuantile", json!(q)),
                window,
                param,
                quantile,
                input,
            ));
        }
        let bands = Box::new(stream::Bollinger::new(w, 2.0).unwrap());
        cases.push(stream_case(
            ("Bollinger", json!(2.0)),
            window,
            param,
            bands,
            input,
        ));
    }
    for seed in [stream::Seed::Sma, stream::Seed::First] {
        let name = if seed == stream::Seed::Sma {
            "sma"
        } else {
            "first"
        };
        let ema = Box::new(stream::Ema::new(20, seed).unwrap());
        cases.push(stream_case(("Ema", json!(name)), "", 20.0, ema, input));
    }
    let rate = Box::new(stream::Rate::new(Window::Time(10_000)).unwrap());
    cases.push(stream_case(
        ("Rate", Value::Null),
        "",
        10_000.0,
        rate,
        input,
    ));
    for alpha in [0.1, 1.0] {
        cases.push(stream_case(
            ("Ewma", Value::Null),
            "",
            alpha,
            Box::new(stream::Ewma::new(alpha).unwrap()),
            input,
        ));
    }
    let time_ewma = Box::new(stream::TimeEwma::new(2_000).unwrap());
    cases.push(stream_case(
        ("TimeEwma", Value::Null),
        "",
        2_000.0,
        time_ewma,
        input,
    ));
    cases
}

fn batch(xs: &[f64]) -> Vec<Value> {
    let k = 20;
    let case = |function: &str, param: f64, values: Result<Vec<f64>, Error>| json!({ "function": function, "param": param, "values": values.unwrap() });
    vec![
        case("slidingSum", k as f64, stream::sliding_sum(xs, k)),
        case("slidingMean", k as f64, stream::sliding_mean(xs, k)),
        case("slidingMax", k as f64, stream::sliding_max(xs, k)),
        case("slidingMin", k as f64, stream::sliding_min(xs, k)),
        case("ewma", 0.2, stream::ewma(xs, 0.2)),
    ]
}

fn main() {
    let (xs, times) = samples(3_000);
    let fixtures = json!({
        "limiters": limiters(),
        "stream": { "xs": xs, "times": times, "cases": aggregates(&xs, &times) },
        "batch": batch(&xs),
    });
    println!("{fixtures}");
}
