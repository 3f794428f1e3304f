//! Leases across a fleet (nginx/leases.conf, limiters "fleet-*"): three nginx nodes of two
//! workers each share one Redis; every admission is timed on the server (X-T0/X-T1 around the
//! decision) and replayed against exact sliding windows. No window ever holds more than its
//! limit: with Redis frozen 50 ms every second, and with lease calls that time out while Redis
//! still runs them. At twice the limit the fleet still admits nearly all of it, and Redis sees
//! a handful of calls per hundred requests.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::{self, Response};
use slidewin_tests::load::{admitted_times, busiest_window};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::openloop::{metric, Load, Outcome};
use slidewin_tests::redis::RedisServer;

/// `n` nginx nodes of two workers on one Redis.
fn fleet(redis: &RedisServer, n: usize) -> Vec<Nginx> {
    (0..n)
        .map(|_| {
            Nginx::start_with_env(
                "leases.conf",
                2,
                &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
            )
        })
        .collect()
}

/// `clients` threads, each sending GET `path` back to back to the nodes in turn for `for_ms`.
fn spread(nodes: &[Nginx], path: &str, clients: usize, for_ms: u64) -> Vec<Response> {
    let ports: Vec<u16> = nodes.iter().map(Nginx::port).collect();
    let deadline = Instant::now() + Duration::from_millis(for_ms);
    thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let ports = &ports;
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut i = c;
                    while Instant::now() < deadline {
                        out.push(http::get(ports[i % ports.len()], path));
                        i += 1;
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// Freezes `redis` (SIGSTOP) for `frozen` every `every` until dropped.
struct Freezer {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Freezer {
    fn start(redis: &RedisServer, frozen: Duration, every: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let pid = redis.pid();
        let flag = stop.clone();
        let thread = thread::spawn(move || {
            let signal = |s: &str| {
                std::process::Command::new("kill")
                    .args([s, &pid.to_string()])
                    .status()
                    .unwrap();
            };
            while !flag.load(Ordering::Relaxed) {
                thread::sleep(every - frozen);
                signal("-STOP");
                thread::sleep(frozen);
                signal("-CONT");
            }
        });
        Freezer {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Freezer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// 16 clients over the fleet for 15 s on one key of `limiter` (rule 100 per 1000 ms and 500
/// per 10000 ms): no window over its limit, every answer 200 or 429, the 10 s window filled.
fn assert_never_over(nodes: &[Nginx], limiter: &str, key: &str) {
    let responses = spread(nodes, &format!("/timed/{limiter}?user={key}"), 16, 15_000);
    let statuses = |s| responses.iter().filter(|r| r.status == s).count();
    assert_eq!(
        statuses(200) + statuses(429),
        responses.len(),
        "{limiter}: 200 or 429 only: {:?}",
        responses
            .iter()
            .find(|r| r.status != 200 && r.status != 429)
    );
    let admitted = admitted_times(&responses);
    for (window_ms, limit) in [(1_000, 100), (10_000, 500)] {
        let (certain, _) = busiest_window(admitted.clone(), window_ms);
        assert!(
            certain <= limit,
            "{limiter}: {certain} admitted within {window_ms} ms (limit {limit})"
        );
    }
    assert!(
        admitted.len() >= 500,
        "{limiter}: {} admitted in 15 s",
        admitted.len()
    );
}

fn store_errors(node: &Nginx, limiter: &str) -> f64 {
    let text = node.get("/metrics").body;
    metric(
        &text,
        &format!("slidewin_store_errors_total{{limiter=\"{limiter}\"}}"),
    )
    .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn three_nodes_never_go_over_a_rule_of_two_windows() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    for limiter in ["fleet-log", "fleet-buckets"] {
        assert_never_over(&nodes, limiter, "steady");
    }
}

#[test]
fn three_nodes_never_go_over_while_redis_freezes_50_ms_a_second() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    let _freezer = Freezer::start(
        &redis,
        Duration::from_millis(50),
        Duration::from_millis(1000),
    );
    for limiter in ["fleet-log", "fleet-buckets"] {
        assert_never_over(&nodes, limiter, "frozen");
    }
}

#[test]
fn three_nodes_never_go_over_when_lease_calls_time_out() {
    // fleet-timeout waits 10 ms for an answer (and refuses without one: on_store_error "deny");
    // Redis freezes 30 ms every 250 ms, then runs the calls it was sent: grants the nodes never
    // saw, which must not be spent.
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    let _freezer = Freezer::start(
        &redis,
        Duration::from_millis(30),
        Duration::from_millis(250),
    );
    assert_never_over(&nodes, "fleet-timeout", "late");
    let errors: f64 = nodes.iter().map(|n| store_errors(n, "fleet-timeout")).sum();
    assert!(errors > 0.0, "the freezes made some lease calls time out");
}

/// Three open-loop loads, one per node, at `rate` each for `seconds`; the admitted count per
/// second (summed over the nodes) and the requests sent.
fn open_loop(nodes: &[Nginx], path: &str, rate: f64, seconds: u64) -> (Vec<u64>, u64) {
    let runs: Vec<_> = nodes
        .iter()
        .map(|n| {
            let load = Load {
                port: n.port(),
                path: path.to_string(),
                rate,
                seconds,
                clients: 32,
                ..Load::default()
            };
            thread::spawn(move || load.run())
        })
        .collect();
    let mut per_second = vec![0; seconds as usize];
    let mut sent = 0;
    for run in runs {
        let run = run.join().unwrap();
        for (i, s) in run.seconds.iter().enumerate() {
            per_second[i] += s.admitted();
            sent += s.offered() - s.count(Outcome::Unsent);
            assert_eq!(
                s.count(Outcome::Failed) + s.count(Outcome::TimedOut),
                0,
                "{s:?}"
            );
        }
    }
    (per_second, sent)
}

#[test]
fn a_hot_key_under_its_limit_costs_a_few_calls_per_hundred_requests() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    let before = redis.script_decisions();
    // hot: 20,000 per 1000 ms; 3 nodes at 1,000 a second each, all admitted.
    let (per_second, sent) = open_loop(&nodes, "/limit/hot?user=hot", 1000.0, 5);
    let admitted: u64 = per_second.iter().sum();
    assert_eq!(admitted, sent, "all admitted: {per_second:?}");
    let calls = redis.script_decisions() - before;
    assert!(
        calls * 100 <= 5 * sent,
        "{calls} script calls for {sent} requests"
    );
}

#[test]
fn a_saturated_key_refuses_without_calls_and_admits_nearly_its_limit() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    let before = redis.script_decisions();
    // fleet-second: 100 per 1000 ms, V = 100 ms; offered 200 a second over the three nodes.
    let (per_second, sent) = open_loop(&nodes, "/limit/fleet-second?user=busy", 200.0 / 3.0, 8);
    let calls = redis.script_decisions() - before;
    let admitted: u64 = per_second.iter().sum();
    let refused = sent - admitted;
    for (second, &n) in per_second.iter().enumerate().skip(1) {
        assert!(
            (95..=100).contains(&n),
            "second {second}: {n} admitted (limit 100): {per_second:?}"
        );
    }
    assert!(
        calls <= admitted + 3 * 8 * 10,
        "{calls} calls for {admitted} admitted and {refused} refused"
    );
}

#[test]
fn cold_keys_cost_no_more_calls_than_requests() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    let before = redis.script_decisions();
    let mut requests = 0;
    for round in 0..3 {
        for k in 0..600 {
            let node = &nodes[(k + round) % 3];
            assert_eq!(
                node.get(&format!("/limit/fleet-log?user=cold{k}")).status,
                200
            );
            requests += 1;
        }
    }
    let calls = redis.script_decisions() - before;
    assert!(calls <= requests, "{calls} calls for {requests} requests");
}

#[test]
fn a_minute_window_at_twice_its_rate_admits_nearly_all_of_it() {
    let redis = RedisServer::start();
    let nodes = fleet(&redis, 3);
    // fleet-minute: 600 per 60 s, V = 1 s; offered 20 a second over the three nodes for 61 s.
    let (per_second, _) = open_loop(&nodes, "/limit/fleet-minute?user=busy", 20.0 / 3.0, 61);
    let first_minute: u64 = per_second[..60].iter().sum();
    assert!(
        (594..=600).contains(&first_minute),
        "{first_minute} of 600 admitted in the first minute: {per_second:?}"
    );
}
