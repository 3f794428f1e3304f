//! on_store_error = "local" (limiter "fallback" of nginx/redis.conf, deciding per request, and of
//! nginx/leases.conf, with leases: 10 a second in Redis, 4 a second per node in its own shared
//! memory while Redis cannot answer): with Redis down, each of two nginx nodes admits exactly
//! its fallback limit per window; when Redis is back, the nodes decide in Redis again, and the
//! error log says so both ways.

use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn nginx_on(config: &str, redis: &RedisServer) -> Nginx {
    Nginx::start_with_env(
        config,
        2,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

/// `clients` threads sending GETs of `path` to `port` for `run`: the X-T0/X-T1 brackets
/// (now_ms before and after the decision) of the admitted ones, sorted, and the refused count.
fn admissions(port: u16, path: &str, clients: usize, run: Duration) -> (Vec<(i64, i64)>, usize) {
    let until = Instant::now() + run;
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let path = path.to_string();
            thread::spawn(move || {
                let (mut admitted, mut refused) = (Vec::new(), 0);
                while Instant::now() < until {
                    let r = http::get(port, &path);
                    match r.status {
                        200 => {
                            let at = |h| r.header(h).unwrap().parse::<f64>().unwrap() as i64;
                            admitted.push((at("X-T0"), at("X-T1")));
                        }
                        429 => refused += 1,
                        other => panic!("status {other}: {}", r.body),
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                (admitted, refused)
            })
        })
        .collect();
    let (mut admitted, mut refused) = (Vec::new(), 0);
    for t in threads {
        let (a, r) = t.join().unwrap();
        admitted.extend(a);
        refused += r;
    }
    admitted.sort();
    (admitted, refused)
}

#[test]
fn redis_down_each_node_limits_at_its_fallback_then_redis_decides_again() {
    falls_back_and_returns("redis.conf");
}

#[test]
fn with_leases_redis_down_each_node_limits_at_its_fallback_then_redis_decides_again() {
    falls_back_and_returns("leases.conf");
}

fn falls_back_and_returns(config: &str) {
    let mut redis = RedisServer::start();
    let nodes = [nginx_on(config, &redis), nginx_on(config, &redis)];
    assert_eq!(nodes[0].get("/timed/fallback?user=warm").status, 200);
    redis.stop();

    // 5 s of 4 clients per node, far above 4 a second: each node admits 4 at the start and 4
    // more each time they leave the window, a second later.
    let runs: Vec<_> = nodes
        .iter()
        .map(|n| {
            let port = n.port();
            thread::spawn(move || {
                admissions(
                    port,
                    "/timed/fallback?user=k",
                    4,
                    Duration::from_millis(5000),
                )
            })
        })
        .collect();
    for (i, run) in runs.into_iter().enumerate() {
        let (admitted, refused) = run.join().unwrap();
        // Five windows from the first admission hold 4 each; a request sent just before the
        // run's end may open a sixth.
        let first = admitted[0].0;
        let in_five = admitted.iter().filter(|t| t.1 < first + 5000).count();
        assert_eq!(in_five, 20, "node {i}: {admitted:?}");
        assert!(admitted.len() <= 24, "node {i}: {admitted:?}");
        assert!(refused > 200, "node {i}: {refused} refused");
        // The 5th admission decided at least 1000 ms after the 1st (a window holds 4).
        for pair in admitted.windows(5) {
            assert!(
                pair[4].1 - pair[0].0 >= 1000,
                "node {i}: 5 admissions within a second: {pair:?}"
            );
        }
    }

    redis.restart();
    // retry_ms (200) after their last error the workers ask Redis again: 10 a second, shared.
    thread::sleep(Duration::from_millis(300));
    let statuses: Vec<u16> = (0..16)
        .map(|i| nodes[i % 2].get("/timed/fallback?user=back").status)
        .collect();
    assert_eq!(
        statuses.iter().filter(|&&s| s == 200).count(),
        10,
        "{statuses:?}"
    );
    for (i, node) in nodes.iter().enumerate() {
        let log = node.error_log();
        assert!(
            log.contains("slidewin fallback: store error: redis:")
                && log.contains(
                    "deciding locally at limits 4 (fallback) until the store answers again"
                ),
            "node {i}: {log}"
        );
        assert!(
            log.contains("slidewin fallback: the store answers again; fallback ended"),
            "node {i}: {log}"
        );
        let metrics = node.get("/metrics").body;
        let line = metrics
            .lines()
            .find(|l| l.starts_with("slidewin_fallback_decisions_total{limiter=\"fallback\"}"))
            .unwrap_or_else(|| panic!("{metrics}"));
        let decisions: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(decisions > 100, "node {i}: {line}");
        assert!(!log.contains("exited on signal"), "{log}");
    }
}

#[test]
fn a_fallback_config_is_checked() {
    let nginx = Nginx::start("test.conf", 1);
    for (fallback, error) in [
        (
            r#"on_store_error = "local""#,
            r#"on_store_error = "local" and fallback = { limit = N } go together, got on_store_error = "local" and fallback = nil"#,
        ),
        (
            r#"fallback = { limit = 3 }"#,
            r#"on_store_error = "local" and fallback = { limit = N } go together, got on_store_error = "allow" and fallback"#,
        ),
        (
            r#"on_store_error = "local", fallback = { limit = 3, share = 2 }"#,
            "fallback.share is not an option (limit, limits, retry_ms, size)",
        ),
        (
            r#"on_store_error = "local", fallback = { }"#,
            "fallback needs one of limit (a rule of one window) or limits (one per window)",
        ),
        (
            r#"on_store_error = "local", fallback = { limit = 0 }"#,
            "fallback.limits",
        ),
        (
            r#"on_store_error = "local", fallback = { limit = 3, retry_ms = 1.5 }"#,
            "fallback.retry_ms must be a positive integer, got 1.5",
        ),
        (
            r#"store = "local", on_store_error = "local", fallback = { limit = 3 }"#,
            r#"on_store_error = "local" is for stores elsewhere (redis); store "local" decides in this node already"#,
        ),
    ] {
        let store = if fallback.contains("store =") {
            ""
        } else {
            r#"store = "redis", "#
        };
        let body = nginx
            .eval(&format!(
                r#"local sw, err = require("resty.slidewin").new{{ name = "f", limit = 10, window_ms = 1000, {store}{fallback} }}
                ngx.say(err)"#
            ))
            .body;
        assert!(body.contains(error), "{fallback}: {body}");
    }
}
