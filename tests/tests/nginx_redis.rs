//! store = "redis" in real nginx (nginx/redis.conf) against a real redis-server: one limit held
//! across two nginx instances, the failure policy while Redis is down or frozen, recovery
//! without restarting nginx, and the local refusal cache.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::{self, Response};
use slidewin_tests::metrics::sample;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

/// nginx on redis.conf with `workers` workers, using `redis`.
fn nginx_on(redis: &RedisServer, workers: u32) -> Nginx {
    Nginx::start_with_env(
        "redis.conf",
        workers,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

/// `clients` threads per port, all starting together, each sending `each` GETs of `path`;
/// the statuses per port.
fn hammer(ports: &[u16], clients: usize, each: usize, path: &str) -> Vec<Vec<u16>> {
    let barrier = Arc::new(Barrier::new(ports.len() * clients));
    let threads: Vec<Vec<_>> = ports
        .iter()
        .map(|&port| {
            (0..clients)
                .map(|_| {
                    let (barrier, path) = (barrier.clone(), path.to_string());
                    thread::spawn(move || {
                        barrier.wait();
                        (0..each)
                            .map(|_| http::get(port, &path).status)
                            .collect::<Vec<_>>()
                    })
                })
                .collect()
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.into_iter().flat_map(|h| h.join().unwrap()).collect())
        .collect()
}

fn count(statuses: &[u16], status: u16) -> usize {
    statuses.iter().filter(|&&s| s == status).count()
}

/// No worker crashed: nginx logs a dead worker as "exited on signal".
fn assert_no_worker_died(nginx: &Nginx) {
    let log = nginx.error_log();
    assert!(
        !log.contains("exited on") && !log.contains("signal"),
        "{log}"
    );
}

#[test]
fn two_nginx_instances_share_one_limit() {
    let redis = RedisServer::start();
    let (a, b) = (nginx_on(&redis, 2), nginx_on(&redis, 2));
    for (limiter, exact) in [("log", true), ("buckets", false), ("counter", false)] {
        // 2 x 6 clients x 30 requests = 360 for one key whose limit is 100.
        let path = format!("/limit/{limiter}?user=shared");
        let per_port = hammer(&[a.port(), b.port()], 6, 30, &path);
        let admitted: Vec<usize> = per_port.iter().map(|s| count(s, 200)).collect();
        let total: usize = admitted.iter().sum();
        assert_eq!(
            per_port.iter().map(|s| count(s, 429)).sum::<usize>(),
            360 - total,
            "{limiter}: 200 or 429 only"
        );
        if exact {
            assert_eq!(total, 100, "{limiter}: {admitted:?}");
        } else {
            assert!(total <= 100, "{limiter}: {admitted:?}");
        }
        // Shared, in order (the hammer's threads may all land on one instance first on a
        // loaded machine): 60 through A, then B admits only what is left of the 100.
        let path = format!("/limit/{limiter}?user=in-order");
        let through = |nginx: &Nginx| (0..60).filter(|_| nginx.get(&path).status == 200).count();
        assert_eq!(through(&a), 60, "{limiter}: A admits 60 of 100");
        let at_b = through(&b);
        if exact {
            assert_eq!(at_b, 40, "{limiter}: B admits what A left");
        } else {
            assert!(
                at_b <= 40,
                "{limiter}: B admits at most what A left, got {at_b}"
            );
        }
    }
    for nginx in [&a, &b] {
        let metrics = nginx.get("/metrics").body;
        let errors = metrics
            .lines()
            .filter(|l| l.starts_with("slidewin_store_errors_total{") && !l.ends_with(" 0"));
        assert_eq!(
            errors.count(),
            0,
            "store errors would have admitted requests: {metrics}"
        );
        assert_no_worker_died(nginx);
    }
}

#[test]
fn redis_down_frozen_and_back() {
    let mut redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    assert_eq!(nginx.get("/limit/allow?user=f").status, 200);

    // Down: connections refused. Each request answers at once, per its on_store_error.
    redis.stop();
    for _ in 0..40 {
        let started = Instant::now();
        assert_eq!(
            nginx.get("/limit/allow?user=f").status,
            200,
            "on_store_error = allow"
        );
        assert_eq!(
            nginx.get("/limit/deny?user=f").status,
            429,
            "on_store_error = deny"
        );
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"allow\"}"),
        40
    );
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"deny\"}"),
        40
    );
    // One error.log line per interval per worker, not one per request.
    let lines = nginx
        .error_log()
        .lines()
        .filter(|l| l.contains("slidewin allow: store error"))
        .count();
    assert!(
        (1..=2).contains(&lines),
        "{lines} lines:\n{}",
        nginx.error_log()
    );

    // Back on the same port, empty and without the scripts: limiting resumes, nginx untouched.
    redis.restart();
    let statuses: Vec<u16> = (0..101)
        .map(|_| nginx.get("/limit/log?user=g").status)
        .collect();
    assert_eq!(count(&statuses, 200), 100);
    assert_eq!(statuses[100], 429);

    // Frozen: the kernel accepts, nobody answers; a request waits at most the read timeout.
    redis.pause();
    let started = Instant::now();
    let (allow, deny) = (
        nginx.get("/limit/allow?user=h").status,
        nginx.get("/limit/deny?user=h").status,
    );
    let waited = started.elapsed();
    redis.resume();
    assert_eq!((allow, deny), (200, 429));
    assert!(
        waited < Duration::from_millis(2 * (50 + 100) + 300),
        "two requests took {waited:?}"
    );
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"allow\"}"),
        41
    );
    assert_eq!(nginx.get("/limit/log?user=h").status, 200);
    assert_no_worker_died(&nginx);
}

#[test]
fn script_flush_is_recovered_and_counts_are_kept() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 1);
    let remaining = |r: &Response| r.header("RateLimit").map(str::to_string);
    assert_eq!(
        remaining(&nginx.get("/limit/log?user=s")).as_deref(),
        Some("\"log\";r=99;t=60")
    );
    assert_eq!(redis.client().cmd(&["SCRIPT", "FLUSH"]).text(), "OK");
    let after = nginx.get("/limit/log?user=s");
    assert_eq!(after.status, 200);
    assert_eq!(remaining(&after).as_deref(), Some("\"log\";r=98;t=60"));
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"log\"}"),
        0
    );
}

#[test]
fn local_refusal_cache_saves_round_trips() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let statuses: Vec<u16> = (0..25)
        .map(|_| nginx.get("/limit/cached?user=c").status)
        .collect();
    assert_eq!(statuses[..5], [200; 5]);
    assert_eq!(statuses[5..], [429; 20]);
    let refused = nginx.get("/limit/cached?user=c");
    let retry: u64 = refused
        .header("Retry-After")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((59..=60).contains(&retry), "{retry}");
    // Redis decided 5 admissions and the first refusal in each worker that saw one (one EVALSHA
    // each); the rest were answered from the worker's cache.
    let info = redis.client().cmd(&["INFO", "commandstats"]).text();
    let evalsha = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .unwrap();
    let evalsha: u64 = evalsha.split(',').next().unwrap().parse().unwrap();
    let saved = sample(
        &nginx.get("/metrics").body,
        "slidewin_local_refusals_total{limiter=\"cached\"}",
    );
    assert!((19..=20).contains(&saved), "{saved}");
    assert_eq!(saved + evalsha, 26, "{info}");
}

/// The live limit of `window` of limiter "rule", as the admin location of `nginx` reads it.
fn admin_limit(nginx: &Nginx, window: usize) -> u64 {
    let body = nginx.get("/slidewin/limits").body;
    let rule = &body[body.find("\"rule\":").unwrap_or_else(|| panic!("{body}"))..];
    let item = rule.split("\"limit\":").nth(window).unwrap();
    item[..item.find(',').unwrap()].parse().unwrap()
}

#[test]
fn a_rule_of_two_windows_with_live_limits_across_two_instances() {
    let redis = RedisServer::start();
    let (a, b) = (nginx_on(&redis, 2), nginx_on(&redis, 2));
    let ports = [a.port(), b.port()];
    redis.client().cmd(&["CONFIG", "RESETSTAT"]);
    // 2 instances x 6 clients x 20 requests for one key: the 2-minute window (12) refuses first.
    let statuses: Vec<u16> = hammer(&ports, 6, 20, "/rule?user=shared").concat();
    assert_eq!((count(&statuses, 200), count(&statuses, 429)), (12, 228));
    assert_eq!(
        redis.script_decisions(),
        240,
        "one script call per decision"
    );
    let refused = http::get(a.port(), "/rule?user=shared");
    assert_eq!(refused.status, 429);
    assert_eq!(
        refused.header("RateLimit-Policy"),
        Some("\"rule\";q=20;w=60, \"rule-2m\";q=12;w=120")
    );
    assert!(
        refused
            .header("RateLimit")
            .is_some_and(|v| v.starts_with("\"rule-2m\";r=0;t=")),
        "{:?}",
        refused.header("RateLimit")
    );

    // Raised on one instance, the other applies it from its next poll (at most 1 s later).
    let set = http::admin_post(a.port(), "/slidewin/limits?limiter=rule&limit=30&window=2");
    assert_eq!(set.status, 200, "{}", set.body);
    thread::sleep(Duration::from_millis(1_200));
    assert_eq!(admin_limit(&b, 2), 30);
    // The refusals recorded nothing: the 1-minute window holds 12 of its 20, so 8 more pass.
    let statuses: Vec<u16> = hammer(&ports, 6, 20, "/rule?user=shared").concat();
    assert_eq!((count(&statuses, 200), count(&statuses, 429)), (8, 232));
    let refused = http::get(b.port(), "/rule?user=shared");
    assert_eq!(
        refused.header("RateLimit-Policy"),
        Some("\"rule\";q=20;w=60, \"rule-2m\";q=30;w=120")
    );

    // Per-call limits: two keys of the rule at 5 and 50 per minute.
    for (user, limit) in [("plan-a", 5), ("plan-b", 50)] {
        let path = format!("/rule?user={user}&limits={limit},100");
        let statuses: Vec<u16> = hammer(&ports, 4, 20, &path).concat();
        assert_eq!(count(&statuses, 200), limit, "{user}");
        assert_eq!(count(&statuses, 429), 160 - limit, "{user}");
    }

    // The live limits are Redis's: a reload of b (whose config did not change) keeps them.
    slidewin_tests::load::reload(&b);
    thread::sleep(Duration::from_millis(1_200));
    assert_eq!(admin_limit(&b, 2), 30);
    let bad = http::admin_post(a.port(), "/slidewin/limits?limiter=rule&limit=101&window=2");
    assert_eq!(
        (bad.status, bad.body.trim()),
        (
            400,
            "limit must be a positive integer at most max_limit (100), got 101"
        )
    );
    assert_no_worker_died(&a);
    let log = b.error_log();
    assert!(!log.contains("exited on signal"), "{log}");
}
