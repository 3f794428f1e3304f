//! The figures of BENCHMARKS.md "Leases": store = "redis" deciding per request next to the same
//! limiter with leases and next to store "shm" (nginx/redis.conf, limiters "bench-wide-*":
//! buckets of 1,000,000 per 10 s, so every request is admitted), side by side in one run.
//!
//! - `cpu`: wrk on one hot key and on 10,000 keys (scripts/wrk-random-user.lua): req/s, nginx
//!   workers' and redis-server's CPU per request, script calls per 1,000 requests.
//! - `latency`: Redis behind a relay that adds 0.25 ms each way (a 0.5 ms round trip; this
//!   machine's kernel has no netem): p50/p99 of the time each decision takes inside nginx
//!   (/decide-us/), Redis round trips included: the latency the limiter adds to a request.
//!
//! `scripts/bench-leases.sh [cpu|latency] [rounds]`
//! (= `cargo run --release -p slidewin-tests --bin slidewin-lease-bench -- [part] [rounds]`).

use std::time::Duration;

use slidewin_tests::bench::{measured_with, median, workers_of, wrk_with};
use slidewin_tests::delay::DelayRelay;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::openloop::quantile;
use slidewin_tests::redis::RedisServer;

/// The limiters compared, as named in nginx/redis.conf, and how the tables call them.
const LIMITERS: [(&str, &str); 3] = [
    ("bench-wide-shm", "store shm"),
    ("bench-wide", "redis, per request"),
    ("bench-wide-lease", "redis, leases (V = 100 ms)"),
];

fn nginx_on(redis_port: u16) -> Nginx {
    Nginx::start_with_env(
        "redis.conf",
        2,
        &[("SLIDEWIN_REDIS_PORT", redis_port.to_string())],
    )
}

/// Per round and limiter, on one hot key then on 10,000 keys: wrk's req/s, nginx workers' µs
/// CPU per request, redis-server's, and script calls per 1,000 requests; medians of `rounds`.
fn cpu(redis: &RedisServer, rounds: usize) {
    let nginx = nginx_on(redis.port());
    let workers = workers_of(&nginx);
    println!("| keys | limiter | req/s | nginx workers µs CPU/req | redis-server µs CPU/req | script calls / 1,000 req |");
    println!("|---|---|---|---|---|---|");
    for (keys, random_users) in [("one hot key", false), ("10,000 keys", true)] {
        let mut rows = vec![Vec::new(); LIMITERS.len()];
        for _ in 0..rounds {
            // Each round runs every limiter once, in turn, so drift hits them alike.
            for (i, (name, _)) in LIMITERS.iter().enumerate() {
                let path = if random_users {
                    format!("/limit/{name}")
                } else {
                    format!("/limit/{name}?user=hot")
                };
                wrk_with(nginx.port(), &path, 1, random_users); // warm: leases, pools
                let calls_before = redis.script_decisions();
                let (run, nginx_cpu, redis_cpu) =
                    measured_with(nginx.port(), &path, random_users, &workers, &[redis.pid()]);
                let calls = (redis.script_decisions() - calls_before) as f64;
                rows[i].push([
                    run.rate,
                    nginx_cpu,
                    redis_cpu,
                    1000.0 * calls / run.requests,
                ]);
            }
        }
        for (row, (_, label)) in rows.iter().zip(LIMITERS) {
            let m = |k: usize| median(row.iter().map(|r| r[k]).collect());
            println!(
                "| {keys} | {label} | {:.0} | {:.1} | {:.1} | {:.1} |",
                m(0),
                m(1),
                m(2),
                m(3)
            );
        }
    }
    assert!(!nginx.error_log().contains("exited on"), "a worker died");
}

/// The µs each of `n` decisions on `path` took inside nginx (/decide-us/ answers it), sent by
/// 4 clients each pausing 1 ms between requests.
fn decisions_us(port: u16, path: &str, n: usize) -> Vec<f64> {
    let each = n / 4;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let path = path.to_string();
            std::thread::spawn(move || {
                (0..each)
                    .map(|_| {
                        std::thread::sleep(Duration::from_millis(1));
                        let r = slidewin_tests::http::get(port, &path);
                        assert_eq!(r.status, 200, "{path}: {}", r.body);
                        r.body.trim().parse::<f64>().unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// The latency each limiter adds inside nginx (its decision, Redis round trips included) with
/// Redis behind a relay adding 0.25 ms each way: p50 and p99 of 2,000 decisions a round.
fn latency(redis: &RedisServer, rounds: usize) {
    let relay = DelayRelay::start(redis.port(), Duration::from_micros(250));
    let nginx = nginx_on(relay.port());
    println!("| limiter | p50 added (ms) | p99 added (ms) |");
    println!("|---|---|---|");
    let mut rows = vec![Vec::new(); LIMITERS.len()];
    for _ in 0..rounds {
        for (i, (name, _)) in LIMITERS.iter().enumerate() {
            let path = format!("/decide-us/{name}?user=hot");
            decisions_us(nginx.port(), &path, 200); // warm: pools, leases
            let us = decisions_us(nginx.port(), &path, 2000);
            rows[i].push((quantile(&us, 0.5).unwrap(), quantile(&us, 0.99).unwrap()));
        }
    }
    for (row, (_, label)) in rows.iter().zip(LIMITERS) {
        println!(
            "| {label} | {:.3} | {:.3} |",
            median(row.iter().map(|r| r.0 / 1000.0).collect()),
            median(row.iter().map(|r| r.1 / 1000.0).collect()),
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let part = args.first().map(String::as_str).unwrap_or("all");
    let rounds = args
        .get(1)
        .map_or(3, |r| r.parse().expect("rounds: a number"));
    let redis = RedisServer::start();
    println!(
        "load average before: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    if part == "all" || part == "cpu" {
        cpu(&redis, rounds);
    }
    if part == "all" || part == "latency" {
        latency(&redis, rounds);
    }
}
