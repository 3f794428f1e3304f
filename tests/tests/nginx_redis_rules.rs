//! The rule {10 per 1000 ms, 50 per 10,000 ms} on store `redis` (nginx/redis.conf) shared by
//! two nginx instances, on one redis-server and on a 3-master Redis Cluster: the sliding bounds
//! over every window (times from the server, around each decision), saturated windows holding
//! exactly their limits, refusals that consume nothing, one script call per decision.

use std::thread;

use slidewin_tests::http::Response;
use slidewin_tests::load::{admitted_times, assert_each_window_refused, busiest_window, hammer};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::{RedisCluster, RedisServer};

/// How long the clients load the key: the 10 s window fills in its first 5 s, refuses while
/// the 1 s window would admit, and slides past its first admissions.
const LOAD_MS: u64 = 12_000;

/// Two nginx instances with 2 workers each, on Redis at `env`.
fn two_instances(env: &[(&str, String)]) -> [Nginx; 2] {
    [(); 2].map(|_| Nginx::start_with_env("redis.conf", 2, env))
}

/// Every response for key "hot" of limiter `limiter`, from 4 clients on each instance.
fn load(instances: &[Nginx], limiter: &str) -> Vec<Response> {
    let path = format!("/timed/{limiter}?user=hot");
    thread::scope(|s| {
        let per_instance: Vec<_> = instances
            .iter()
            .map(|nginx| s.spawn(|| hammer(nginx, &path, 4, LOAD_MS)))
            .collect();
        per_instance
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

const LIMITERS: [&str; 2] = ["rule-log", "rule-buckets"];

/// Loads "rule-log" and "rule-buckets" at once (16 clients) and checks the bounds; the
/// decisions made for each (as in LIMITERS), for the script calls Redis counted.
fn bounds_hold_across(instances: &[Nginx]) -> [u64; 2] {
    let (log, buckets) = thread::scope(|s| {
        let log = s.spawn(|| load(instances, LIMITERS[0]));
        let buckets = s.spawn(|| load(instances, LIMITERS[1]));
        (log.join().unwrap(), buckets.join().unwrap())
    });
    for (name, responses) in [("log", &log), ("buckets", &buckets)] {
        assert!(
            responses
                .iter()
                .all(|r| r.status == 429 || (r.status == 200 && r.header("RateLimit").is_some())),
            "{name}: Redis decided every request (a store error's 200 has no RateLimit)"
        );
        let times = admitted_times(responses);
        let admitted = times.len();
        let (second, _) = busiest_window(times.clone(), 1_000);
        let (ten, _) = busiest_window(times, 10_000);
        assert!(second <= 10, "{name}: {second} admitted in one second");
        assert!(ten <= 50, "{name}: {ten} admitted in 10 s");
        assert!(admitted > 50, "{name}: the 10 s window slid: {admitted}");
        if name == "log" {
            assert_eq!(second, 10, "a saturated second holds exactly 10");
            // Had refusals by the 1 s window cost the 10 s window anything, it would fill
            // with fewer than 50 admissions.
            assert_eq!(ten, 50, "a saturated 10 s window holds exactly 50");
        }
    }
    // Refusals describe the window that refused; RateLimit-Policy names both windows.
    let policy = "\"rule-log\";q=10;w=1, \"rule-log-10s\";q=50;w=10";
    assert_each_window_refused(&log, policy, &["rule-log", "rule-log-10s"]);
    for nginx in instances {
        let log = nginx.error_log();
        assert!(!log.contains("exited on"), "a worker died: {log}");
    }
    [log.len() as u64, buckets.len() as u64]
}

#[test]
fn a_rule_holds_its_bounds_across_two_instances_on_one_redis() {
    let redis = RedisServer::start();
    let instances = two_instances(&[("SLIDEWIN_REDIS_PORT", redis.port().to_string())]);
    redis.client().cmd(&["CONFIG", "RESETSTAT"]);
    let decisions = bounds_hold_across(&instances);
    assert_eq!(
        redis.script_decisions(),
        decisions.iter().sum::<u64>(),
        "one script call per decision"
    );
}

#[test]
fn a_rule_holds_its_bounds_across_two_instances_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let instances = two_instances(&[("SLIDEWIN_REDIS_CLUSTER", cluster.seeds())]);
    let masters: Vec<&RedisServer> = (0..3).map(|i| cluster.node(i)).collect();
    for master in &masters {
        master.client().cmd(&["CONFIG", "RESETSTAT"]);
    }
    let decisions = bounds_hold_across(&instances);
    // A rule's window keys share one hash slot: each decision is one call on its master.
    let mut expected = [0; 3];
    for (limiter, n) in LIMITERS.iter().zip(decisions) {
        expected[cluster.master_of(&format!("slidewin:{{{limiter}:hot}}"))] += n;
    }
    let calls: Vec<u64> = masters.iter().map(|m| m.script_decisions()).collect();
    assert_eq!(
        calls, expected,
        "one script call per decision, on the master of the rule's slot"
    );
}
