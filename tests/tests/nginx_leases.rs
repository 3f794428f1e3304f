//! store = "redis" with leases (nginx/leases.conf) in real nginx against a real redis-server:
//! exact counts and headers from units spent in shared memory, far fewer script calls than
//! requests on a hot key, refusals that cost no call until Redis's retry time, a Redis outage
//! shorter than a lease, WAIT for replicas, and the config's errors.

use std::time::{Duration, Instant};

use slidewin_tests::delay::DelayRelay;
use slidewin_tests::http::Response;
use slidewin_tests::load::{admitted_times, busiest_window};
use slidewin_tests::metrics::{promtool_check, sample, sample_f64};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn nginx_on(redis: &RedisServer, workers: u32) -> Nginx {
    Nginx::start_with_env(
        "leases.conf",
        workers,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

fn statuses(answers: &[Response]) -> Vec<u16> {
    answers.iter().map(|r| r.status).collect()
}

#[test]
fn exact_counts_and_headers_from_a_lease() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    // 30 requests within one window (a loaded machine may need another key and go).
    let mut spent = 0;
    let (user, answers) = (0..3)
        .find_map(|attempt| {
            let user = format!("alice{attempt}");
            let (answers, in_time) = within_a_window(&nginx, &user, 30);
            spent += answers.iter().filter(|r| r.status == 200).count();
            in_time.then_some((user, answers))
        })
        .expect("30 requests within 900 ms");
    let admitted = answers.iter().filter(|r| r.status == 200).count();
    let errors = sample(
        &nginx.get("/metrics").body,
        "slidewin_store_errors_total{limiter=\"exact\"}",
    );
    assert_eq!(
        errors,
        0,
        "store errors are admitted: {}",
        nginx.error_log()
    );
    assert_eq!(admitted, 20, "{:?}", statuses(&answers));
    assert!(
        answers[..20].iter().all(|r| r.status == 200),
        "the first 20 are admitted: {:?}",
        statuses(&answers)
    );
    assert!(
        answers[20..].iter().all(|r| r.status == 429),
        "then refused"
    );
    let first = &answers[0];
    assert_eq!(first.header("RateLimit-Policy"), Some("\"exact\";q=20;w=1"));
    let refused = &answers[29];
    assert_eq!(
        refused.header("RateLimit-Policy"),
        Some("\"exact\";q=20;w=1")
    );
    let retry: u64 = refused.header("Retry-After").unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    let rate_limit = refused.header("RateLimit").unwrap();
    assert!(rate_limit.starts_with("\"exact\";r=0;t="), "{rate_limit}");
    assert_eq!(refused.body, "Too Many Requests\n");
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"exact\"}"),
        0
    );
    assert_eq!(
        sample(
            &metrics,
            "slidewin_lease_units_total{limiter=\"exact\",kind=\"spent\"}"
        ),
        spent as u64
    );
    // Once the window passed, 20 more.
    std::thread::sleep(Duration::from_millis(1_100));
    let (again, in_time) = within_a_window(&nginx, &user, 25);
    let again = again.iter().filter(|r| r.status == 200).count();
    assert!(!in_time || again == 20, "{again} admitted");
}

/// `n` requests of `user` to the limiter "exact", and whether they all came within 900 ms.
fn within_a_window(nginx: &Nginx, user: &str, n: usize) -> (Vec<Response>, bool) {
    let start = Instant::now();
    let path = format!("/limit/exact?user={user}");
    let answers: Vec<_> = (0..n).map(|_| nginx.get(&path)).collect();
    (answers, start.elapsed() < Duration::from_millis(900))
}

/// `clients` threads each sending `each` GETs of `path` to `port`: the statuses.
fn hammer(port: u16, clients: usize, each: usize, path: &str) -> Vec<u16> {
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let path = path.to_string();
            std::thread::spawn(move || {
                (0..each)
                    .map(|_| slidewin_tests::http::get(port, &path).status)
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

#[test]
fn a_hot_key_under_its_limit_costs_few_script_calls() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    assert_eq!(nginx.get("/limit/hot?user=tenant").status, 200);
    redis.client().cmd(&["CONFIG", "RESETSTAT"]);
    let statuses = hammer(nginx.port(), 4, 500, "/limit/hot?user=tenant");
    assert!(statuses.iter().all(|&s| s == 200), "all admitted");
    let calls = redis.script_decisions();
    eprintln!("hot key: {calls} script calls for 2000 requests");
    assert!(
        calls * 20 <= 2_000,
        "{calls} script calls for 2000 requests"
    );
    let metrics = nginx.get("/metrics").body;
    let local = sample(
        &metrics,
        "slidewin_lease_local_decisions_total{limiter=\"hot\"}",
    );
    assert!(local >= 1_900, "{local} decided locally\n{metrics}");
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"hot\"}"),
        0
    );
    promtool_check(&metrics);
    let granted = sample(
        &metrics,
        "slidewin_lease_units_total{limiter=\"hot\",kind=\"granted\"}",
    );
    let spent = sample(
        &metrics,
        "slidewin_lease_units_total{limiter=\"hot\",kind=\"spent\"}",
    );
    assert_eq!(spent, 2_001, "every request one unit");
    assert!(granted >= spent, "{granted} granted, {spent} spent");
}

#[test]
fn a_refused_key_costs_no_call_until_redis_says() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let admitted = (0..20)
        .filter(|_| nginx.get("/limit/exact?user=bob").status == 200)
        .count();
    assert_eq!(admitted, 20);
    let refused = nginx.get("/limit/exact?user=bob");
    assert_eq!(refused.status, 429);
    redis.client().cmd(&["CONFIG", "RESETSTAT"]);
    let start = Instant::now();
    for _ in 0..10 {
        assert_eq!(nginx.get("/limit/exact?user=bob").status, 429);
    }
    assert!(start.elapsed() < Duration::from_millis(500));
    assert_eq!(
        redis.script_decisions(),
        0,
        "refusals answered by the table"
    );
    let metrics = nginx.get("/metrics").body;
    assert!(
        sample(
            &metrics,
            "slidewin_lease_refusals_cached_total{limiter=\"exact\"}"
        ) >= 10
    );
    // Once the window passed, Redis is asked again and admits.
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(nginx.get("/limit/exact?user=bob").status, 200);
    assert!(redis.script_decisions() >= 1);
}

#[test]
fn redis_killed_for_less_than_a_lease_costs_no_store_error() {
    let mut redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    for _ in 0..20 {
        assert_eq!(nginx.get("/limit/outlast?user=carol").status, 200);
    }
    redis.stop();
    let start = Instant::now();
    let mut during = 0;
    while start.elapsed() < Duration::from_millis(300) {
        assert_eq!(nginx.get("/limit/outlast?user=carol").status, 200);
        during += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    redis.restart();
    for _ in 0..20 {
        assert_eq!(nginx.get("/limit/outlast?user=carol").status, 200);
    }
    assert!(during >= 20, "{during} requests while Redis was down");
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(&metrics, "slidewin_store_errors_total{limiter=\"outlast\"}"),
        0,
        "{metrics}"
    );
}

#[test]
fn too_few_replicas_leave_the_lease_unused() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 1);
    let r = nginx.get("/limit/replicated?user=dave");
    assert_eq!(r.status, 429, "on_store_error = deny");
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(
            &metrics,
            "slidewin_store_errors_total{limiter=\"replicated\"}"
        ),
        1
    );
    let log = nginx.error_log();
    assert!(
        log.contains("redis: WAIT 1 10 answered 0 replica(s): the lease is not used"),
        "{log}"
    );
}

#[test]
fn two_windows_are_spent_together() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let admitted = |user: &str| {
        (0..14)
            .filter(|_| nginx.get(&format!("/limit/rule?user={user}")).status == 200)
            .count()
    };
    // 10 a second, 15 in 10 s: 10 now (within a second: a loaded machine may need another
    // key and go), then 5 more after a second.
    let (user, now) = (0..3)
        .find_map(|attempt| {
            let (user, start) = (format!("erin{attempt}"), Instant::now());
            let now = admitted(&user);
            (start.elapsed() < Duration::from_millis(900)).then_some((user, now))
        })
        .expect("14 requests within 900 ms");
    assert_eq!(now, 10);
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(admitted(&user), 5);
    let stats: serde_json::Value = serde_json::from_str(&nginx.get("/stats.json").body).unwrap();
    let rule = &stats["limiters"]["rule"];
    let lease = rule["lease"].as_object().expect("a lease member");
    let fields: Vec<&str> = lease.keys().map(String::as_str).collect();
    let expected = [
        "calls",
        "expired",
        "granted",
        "local",
        "refusals_cached",
        "returned",
        "spent",
        "validity_ms",
    ];
    assert_eq!(fields, expected, "{stats}");
    assert_eq!(
        lease["spent"], rule["allowed"],
        "every admission spent a unit: {stats}"
    );
}

#[test]
fn lease_options_are_checked_by_name() {
    let nginx = Nginx::start("test.conf", 1);
    let new = |conf: &str| {
        let lua = format!(
            "local sw, err = require('resty.slidewin').new{{ name = 'l', store = 'redis', {conf} }} \
             return tostring(err)"
        );
        nginx.eval(&lua).body
    };
    let log = "algorithm = 'log', limit = 10, window_ms = 1000";
    let cases = [
        (format!("{log}, lease = 5"), "lease must be a table ({ validity_ms = N, ... }), got 5"),
        (
            format!("{log}, store = 'shm', lease = {{ validity_ms = 100 }}"),
            "lease is for store \"redis\", got store \"shm\"",
        ),
        (
            format!("{log}, lease = {{ validity = 100 }}"),
            "lease.validity is not an option (validity_ms, max_validity_ms, margin_ms, max_units, keys, replicas, wait_timeout_ms)",
        ),
        (
            format!("{log}, lease = {{ max_units = 3 }}"),
            "lease.validity_ms is required (how long a lease is spent, ms)",
        ),
        (
            format!("{log}, lease = {{ validity_ms = 0 }}"),
            "lease.validity_ms must be a positive integer, got 0",
        ),
        (
            format!("{log}, lease = {{ validity_ms = 100, margin_ms = 100 }}"),
            "lease.margin_ms must be below validity_ms (default max(2, validity_ms / 10)), got 100",
        ),
        (
            format!("{log}, lease = {{ validity_ms = 100, wait_timeout_ms = 5 }}"),
            "lease.wait_timeout_ms goes with lease.replicas, got no replicas",
        ),
        (
            "algorithm = 'counter', limit = 10, window_ms = 1000, lease = { validity_ms = 100 }"
                .to_string(),
            "lease needs windows of algorithm \"log\" or \"buckets\"; window \"l\" is \"counter\" \
             (an estimate, decided per request)",
        ),
    ];
    for (conf, expected) in cases {
        assert_eq!(new(&conf), expected, "{conf}");
    }
    assert_eq!(
        new(&format!("{log}, lease = {{ validity_ms = 100 }}")),
        "nil"
    );
}

#[test]
fn a_lease_that_ended_with_units_unspent_is_settled_by_the_sweep() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let units = |kind: &str| {
        let metrics = nginx.get("/metrics").body;
        sample(
            &metrics,
            &format!("slidewin_lease_units_total{{limiter=\"exact\",kind=\"{kind}\"}}"),
        )
    };
    // The first request is a lease of its cost, the second a larger one: units left over
    // (unless a loaded machine spaced them so that the key looked cold: another key).
    let (user, first) = (0..3)
        .find_map(|attempt| {
            let (user, first) = (format!("frank{attempt}"), Instant::now());
            for _ in 0..2 {
                assert_eq!(nginx.get(&format!("/limit/exact?user={user}")).status, 200);
            }
            (units("granted") > units("spent")).then_some((user, first))
        })
        .expect("a lease with units left over");
    let hash = format!("slidewin:{{exact:{user}}}:leases");
    let outstanding = || redis.client().cmd(&["HLEN", &hash]).int();
    // V = 200 ms, sweeps every 100 ms: settled with no request of the key, well before Redis
    // would drop the grant itself (V + W = 1.2 s after it).
    while outstanding() > 0 && first.elapsed() < Duration::from_millis(1_000) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(outstanding(), 0, "settled by the sweep");
    assert!(units("returned") >= 1);
    // Its units are back: 18 more fit in the window (when still in it).
    let path = format!("/limit/exact?user={user}");
    let more = (0..25).filter(|_| nginx.get(&path).status == 200).count();
    if first.elapsed() < Duration::from_millis(950) {
        assert_eq!(more, 18);
    }
}

#[test]
fn cold_keys_cost_no_more_calls_than_requests() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    redis.client().cmd(&["CONFIG", "RESETSTAT"]);
    // 50 keys, each seen about once per V (200 ms), 4 times.
    for _ in 0..4 {
        for key in 0..50 {
            assert_eq!(
                nginx.get(&format!("/limit/exact?user=cold{key}")).status,
                200
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let calls = redis.script_decisions();
    // A call answered after V - margin (a loaded machine) is a store error whose grant the
    // sweep settles: one call more each.
    let metrics = nginx.get("/metrics").body;
    let late = sample(&metrics, "slidewin_store_errors_total{limiter=\"exact\"}");
    assert!(
        (200..=200 + late).contains(&calls),
        "{calls} calls for 200 requests ({late} late): one each, nothing left to settle"
    );
}

#[test]
fn many_clients_at_once_never_pass_the_limit() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    for attempt in 0..3 {
        let (start, path) = (Instant::now(), format!("/limit/exact?user=crowd{attempt}"));
        let statuses = hammer(nginx.port(), 8, 10, &path);
        let admitted = statuses.iter().filter(|&&s| s == 200).count();
        let metrics = nginx.get("/metrics").body;
        let errors = sample(&metrics, "slidewin_store_errors_total{limiter=\"exact\"}");
        assert_eq!(
            errors,
            0,
            "store errors are admitted: {}",
            nginx.error_log()
        );
        if start.elapsed() < Duration::from_millis(900) {
            // All within one window: never more than its limit, and every unit spent.
            assert_eq!(admitted, 20, "{statuses:?}");
            return;
        }
    }
    panic!("80 requests within 900 ms");
}

#[test]
fn a_reload_keeps_the_lease_table_and_its_units_come_back() {
    let redis = RedisServer::start();
    let nginx = nginx_on(&redis, 2);
    let units = |kind: &str| {
        let metrics = nginx.get("/metrics").body;
        let name = format!("slidewin_lease_units_total{{limiter=\"exact\",kind=\"{kind}\"}}");
        sample(&metrics, &name)
    };
    // 20 a second: 2 now (the second a lease with units left), a reload, then the other 18.
    // The units the lease held come back only if the new workers find the table (the old
    // ones leave without settling): else Redis counts them until the window passes them.
    for attempt in 0..3 {
        let (start, path) = (Instant::now(), format!("/limit/exact?user=grace{attempt}"));
        let admitted = |n: usize| (0..n).filter(|_| nginx.get(&path).status == 200).count();
        assert_eq!(admitted(2), 2);
        let held = units("granted") - units("spent") - units("returned");
        slidewin_tests::load::reload(&nginx);
        std::thread::sleep(Duration::from_millis(400));
        let after = admitted(25);
        if held > 0 && start.elapsed() < Duration::from_millis(900) {
            assert_eq!(after, 18, "{held} units held at the reload");
            return;
        }
    }
    panic!("a lease with units left and 27 requests within 900 ms");
}

/// A hot key's leases through a relay that turns slow: its round trip (240 ms) goes past
/// validity_ms - margin_ms (200 ms less its margin) and `late_key`'s answers run on `limiter`
/// for 3 s, the relay slow after 500 ms. No store error, and the limit holds at the server's
/// decision times. Returns /metrics and error.log at the end, and Redis.
fn late_leases(limiter: &str) -> (String, String, RedisServer, Vec<u64>) {
    let redis = RedisServer::start();
    let relay = DelayRelay::start(redis.port(), Duration::ZERO);
    let nginx = Nginx::start_with_env(
        "leases.conf",
        2,
        &[("SLIDEWIN_REDIS_PORT", relay.port().to_string())],
    );
    let spent = format!("slidewin_lease_units_total{{limiter=\"{limiter}\",kind=\"spent\"}}");
    let mut spent_at = Vec::new();
    let answers: Vec<Response> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..6)
            .map(|_| {
                s.spawn(|| {
                    let start = Instant::now();
                    let mut out = Vec::new();
                    while start.elapsed() < Duration::from_millis(3_000) {
                        out.push(nginx.get(&format!("/timed/{limiter}?user=late")));
                    }
                    out
                })
            })
            .collect();
        // Leases taken at loopback speed, then every call is late.
        std::thread::sleep(Duration::from_millis(500));
        relay.set_one_way(Duration::from_millis(120));
        // Lease units spent 1.5 s and 2.9 s in.
        std::thread::sleep(Duration::from_millis(1_000));
        spent_at.push(sample(&nginx.get("/metrics").body, &spent));
        std::thread::sleep(Duration::from_millis(1_400));
        spent_at.push(sample(&nginx.get("/metrics").body, &spent));
        clients
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(answers.iter().all(|r| r.status == 200 || r.status == 429));
    let admitted = admitted_times(&answers);
    assert!(admitted.len() >= 40, "{} admitted", admitted.len());
    let (certain, _) = busiest_window(admitted, 1_000);
    assert!(certain <= 20, "{certain} admitted in one window");
    let metrics = nginx.get("/metrics").body;
    let errors = sample(
        &metrics,
        &format!("slidewin_store_errors_total{{limiter=\"{limiter}\"}}"),
    );
    assert_eq!(errors, 0, "{metrics}");
    (metrics, nginx.error_log(), redis, spent_at)
}

/// Leases that come too late raise the validity the next calls ask for (2 x 240 + 20 ms, at
/// most 4 x 200), said once; the late grants go back, a per-request check decides their
/// requests, and the leases of the raised validity are spent again.
#[test]
fn a_lease_that_comes_too_late_raises_the_validity_of_the_next() {
    let (metrics, log, _redis, spent_at) = late_leases("exact");
    let validity = sample_f64(
        &metrics,
        "slidewin_lease_validity_seconds{limiter=\"exact\"}",
    );
    assert!((0.5..=0.8).contains(&validity), "{metrics}");
    let said = "slidewin exact: a lease came after validity_ms - margin_ms (200 ms less the \
                margin): lease calls now ask for validity_ms ";
    assert!(log.contains(said), "{log}");
    assert!(!log.contains("per-request checks decide"), "{log}");
    assert!(
        spent_at[1] > spent_at[0],
        "spent again at the raised validity: {spent_at:?}\n{metrics}\n{log}"
    );
    let returned = "slidewin_lease_units_total{limiter=\"exact\",kind=\"returned\"}";
    assert!(sample(&metrics, returned) > 0, "{metrics}");
}

/// At lease.max_validity_ms, a late lease goes back and per-request checks decide for 10 s.
#[test]
fn a_lease_too_late_at_the_ceiling_is_returned_and_checks_decide() {
    let (metrics, log, redis, _) = late_leases("exact-fixed");
    let said = "slidewin exact-fixed: a lease came after validity_ms - margin_ms (200 ms less \
                the margin, at lease.max_validity_ms): per-request checks decide for 10 s after \
                each";
    assert!(log.contains(said), "{log}");
    let validity = "slidewin_lease_validity_seconds{limiter=\"exact-fixed\"}";
    assert_eq!(sample_f64(&metrics, validity), 0.2);
    // The late grants go back: none stays outstanding once the sweep has run.
    let hash = "slidewin:{exact-fixed:late}:leases";
    let deadline = Instant::now() + Duration::from_secs(3);
    while redis.client().cmd(&["HLEN", hash]).int() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(redis.client().cmd(&["HLEN", hash]).int(), 0, "returned");
    let returned = "slidewin_lease_units_total{limiter=\"exact-fixed\",kind=\"returned\"}";
    assert!(sample(&metrics, returned) > 0, "{metrics}");
}
