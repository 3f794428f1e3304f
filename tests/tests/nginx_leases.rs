//! store = "redis" with leases (nginx/leases.conf) in real nginx against a real redis-server:
//! exact counts and headers from units spent in shared memory, far fewer script calls than
//! requests on a hot key, refusals that cost no call until Redis's retry time, a Redis outage
//! shorter than a lease, WAIT for replicas, and the config's errors.

use std::time::{Duration, Instant};

use slidewin_tests::http::Response;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn nginx_on(redis: &RedisServer, workers: u32) -> Nginx {
    Nginx::start_with_env(
        "leases.conf",
        workers,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

/// The value of the sample `metric` in Prometheus text.
fn sample(metrics: &str, metric: &str) -> u64 {
    let line = metrics
        .lines()
        .find(|l| l.starts_with(metric))
        .unwrap_or_else(|| panic!("{metric} in {metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn statuses(answers: &[Response]) -> Vec<u16> {
    answers.iter().map(|r| r.status).collect()
}

#[test]
fn exact_counts_and_headers_from_a_lease() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let start = Instant::now();
    let answers: Vec<_> = (0..30).map(|_| nginx.get("/limit/exact?user=alice")).collect();
    assert!(start.elapsed() < Duration::from_millis(900), "all in one window");
    let admitted = answers.iter().filter(|r| r.status == 200).count();
    assert_eq!(admitted, 20, "{:?}", statuses(&answers));
    assert!(answers[..20].iter().all(|r| r.status == 200), "the first 20 are admitted: {:?}", statuses(&answers));
    assert!(answers[20..].iter().all(|r| r.status == 429), "then refused");
    let first = &answers[0];
    assert_eq!(first.header("RateLimit-Policy"), Some("\"exact\";q=20;w=1"));
    let refused = &answers[29];
    assert_eq!(refused.header("RateLimit-Policy"), Some("\"exact\";q=20;w=1"));
    let retry: u64 = refused.header("Retry-After").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    let rate_limit = refused.header("RateLimit").unwrap();
    assert!(rate_limit.starts_with("\"exact\";r=0;t="), "{rate_limit}");
    assert_eq!(refused.body, "Too Many Requests\n");
    let metrics = nginx.get("/metrics").body;
    assert_eq!(sample(&metrics, "slidewin_store_errors_total{limiter=\"exact\"}"), 0);
    assert_eq!(
        sample(&metrics, "slidewin_lease_units_total{limiter=\"exact\",kind=\"spent\"}"),
        20
    );
    // Once the window passed, 20 more.
    std::thread::sleep(Duration::from_millis(1_100));
    let again = (0..25)
        .filter(|_| nginx.get("/limit/exact?user=alice").status == 200)
        .count();
    assert_eq!(again, 20);
}
