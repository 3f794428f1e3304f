//! The bench of scripts/bench-adaptive.sh, briefly: its upstream (nginx/bench-upstream.conf)
//! serves c / S requests per second and follows its admin location at once, and a static
//! limit in front of it (nginx/bench-adaptive.conf) admits exactly its limit under overload.

use std::sync::Arc;
use std::time::Duration;

use slidewin_tests::http;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::openloop::{Load, Outcome, Run};

fn upstream() -> Nginx {
    Nginx::start("bench-upstream.conf", 1)
}

fn admin(upstream: &Nginx, query: &str) -> String {
    let r = upstream.get(&format!("/admin?{query}"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// Requests the upstream finished per second from the end of second `from` to that of `to`
/// (its `served` count, probed once a second).
fn served_per_second(run: &Run, from: usize, to: usize) -> f64 {
    let served = |s: usize| run.seconds[s].probe.expect("served was read");
    (served(to) - served(from)) / (to - from) as f64
}

#[test]
fn upstream_serves_c_over_s_and_follows_its_admin() {
    let upstream = upstream();
    // c = 4, S = 50 ms: 80 requests/s. Offered 160/s; at second 3, c = 8: 160/s.
    admin(&upstream, "c=4&s_ms=50&jitter=0");
    let port = upstream.port();
    let run = Load {
        port,
        path: "/work".into(),
        rate: 160.0,
        seconds: 6,
        timeout: Duration::from_secs(10),
        clients: 400,
        probe: Some(Arc::new(move || {
            let state = http::get(port, "/admin").body;
            let served = state.split("\"served\":").nth(1)?;
            served
                .trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })),
        actions: vec![(3, port, "/admin?c=8".into())],
    }
    .run();
    let before = served_per_second(&run, 0, 2);
    assert!(
        (72.0..=88.0).contains(&before),
        "c=4: {before} served/s, want 80 +-10%"
    );
    // The queue built in the first 3 s keeps the 8 slots busy.
    let after = served_per_second(&run, 3, 5);
    assert!(
        (144.0..=176.0).contains(&after),
        "c=8: {after} served/s, want 160 +-10%"
    );
    let state = admin(&upstream, "c=2");
    assert!(
        state.starts_with(r#"{"c":2,"s_ms":50,"jitter":0,"#),
        "{state}"
    );
}

#[test]
fn upstream_admin_names_a_bad_value() {
    let upstream = upstream();
    for (query, message) in [
        ("c=0", "c must be a positive integer, got 0"),
        ("c=1.5", "c must be a positive integer, got 1.5"),
        ("s_ms=-3", "s_ms must be a positive number, got -3"),
        ("jitter=2", "jitter must be a number in [0, 1], got 2"),
    ] {
        let r = upstream.get(&format!("/admin?{query}"));
        assert_eq!((r.status, r.body.trim()), (400, message), "{query}");
    }
}

#[test]
fn static_limit_admits_its_limit_under_overload() {
    let upstream = upstream();
    admin(&upstream, "c=8&s_ms=20&jitter=0"); // 400 requests/s
    let front = Nginx::start_with_env(
        "bench-adaptive.conf",
        2,
        &[
            ("SLIDEWIN_UPSTREAM_PORT", upstream.port().to_string()),
            ("SLIDEWIN_BENCH_CAPACITY", "400".into()),
        ],
    );
    let metrics = front.get("/metrics").body;
    assert!(
        metrics.contains("slidewin_bench_limit{limiter=\"static-0.5x\"} 200\n"),
        "{metrics}"
    );
    // 400/s offered to a limit of 200 per second: exactly 200 of each second's 400 (the log
    // is exact, and uniform arrivals fill each window from its start), and all of them good
    // (half the capacity: no queue).
    let run = Load {
        port: front.port(),
        path: "/static/static-0.5x".into(),
        rate: 400.0,
        seconds: 3,
        timeout: Duration::from_secs(2),
        ..Load::default()
    }
    .run();
    let all = run.merged(0, 3);
    assert_eq!(all.offered(), 1200);
    let admitted = all.admitted();
    assert!(
        (590..=610).contains(&admitted),
        "admitted {admitted} of 1200, want 600"
    );
    assert_eq!(all.count(Outcome::Good), admitted);
    assert_eq!(all.count(Outcome::Refused), 1200 - admitted);
}
