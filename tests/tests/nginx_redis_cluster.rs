//! store = "redis" in real nginx (nginx/redis.conf) against a real local Redis Cluster and a
//! Redis Sentinel setup: keys spread over three masters, a slot migrated during traffic (ASK,
//! MOVED), a master killed and its replica promoted, a Sentinel failover; nginx never restarts.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::{self, Response};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::{RedisCluster, RedisSentinel};

fn nginx_on_cluster(cluster: &RedisCluster, workers: u32) -> Nginx {
    Nginx::start_with_env(
        "redis.conf",
        workers,
        &[("SLIDEWIN_REDIS_CLUSTER", cluster.seeds())],
    )
}

fn nginx_on_sentinel(redis: &RedisSentinel) -> Nginx {
    let sentinels = format!("127.0.0.1:{}", redis.port());
    let master = RedisSentinel::MASTER_NAME.to_string();
    Nginx::start_with_env(
        "redis.conf",
        2,
        &[
            ("SLIDEWIN_REDIS_SENTINELS", sentinels),
            ("SLIDEWIN_REDIS_MASTER", master),
        ],
    )
}

fn store_errors(nginx: &Nginx) -> u64 {
    nginx
        .get("/metrics")
        .body
        .lines()
        .filter(|l| l.starts_with("slidewin_store_errors_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

fn redirects(nginx: &Nginx, kind: &str) -> u64 {
    let metrics = nginx.get("/metrics").body;
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("slidewin_redis_redirects_total{")
                && l.contains(&format!("kind=\"{kind}\""))
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Admitted by Redis: a 200 with the RateLimit header (a store error's 200 has none).
fn limited_and_admitted(r: &Response) -> bool {
    r.status == 200 && r.header("RateLimit").is_some()
}

/// `n` users whose keys for limiter `limiter` live on each master in turn.
fn users_on_every_master(cluster: &RedisCluster, limiter: &str, per_master: usize) -> Vec<String> {
    let mut by_master: Vec<Vec<String>> = vec![Vec::new(); 3];
    for i in 0.. {
        let user = format!("u{i}");
        let master = cluster.master_of(&format!("slidewin:{{{limiter}:{user}}}"));
        if by_master[master].len() < per_master {
            by_master[master].push(user);
        }
        if by_master.iter().all(|u| u.len() == per_master) {
            break;
        }
    }
    by_master.concat()
}

#[test]
fn slots_match_redis() {
    let cluster = RedisCluster::start(3, 0);
    let nginx = nginx_on_cluster(&cluster, 1);
    for key in [
        "foo",
        "slidewin:{log:alice}",
        "slidewin:{log:alice}:m",
        "{}x",
        "a{b",
        "x{}{y}",
        "{user1000}.following",
        "ünïcode-κλειδί",
    ]
    .into_iter()
    .map(String::from)
    .chain((0..300).map(|i| format!("slidewin:{{api:user-{i}}}")))
    {
        let path = format!("/slot?key={}", percent_encode(&key));
        assert_eq!(
            nginx.get(&path).body,
            cluster.slot(&key).to_string(),
            "slot of {key:?}"
        );
    }
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn two_nginx_instances_limit_users_on_three_masters() {
    let cluster = RedisCluster::start(3, 0);
    // One seed only: the slot map names the other masters.
    let seed = cluster.seeds().split(',').next().unwrap().to_string();
    let a = Nginx::start_with_env("redis.conf", 2, &[("SLIDEWIN_REDIS_CLUSTER", seed)]);
    let b = nginx_on_cluster(&cluster, 2);
    for (limiter, exact) in [("log", true), ("buckets", false), ("counter", false)] {
        let users = users_on_every_master(&cluster, limiter, 2);
        // Per user: 2 instances x 3 clients x 40 requests = 240 against a limit of 100.
        let barrier = Arc::new(Barrier::new(users.len() * 6));
        let threads: Vec<_> = users
            .iter()
            .flat_map(|user| [(user.clone(), a.port()), (user.clone(), b.port())])
            .flat_map(|job| [job.clone(), job.clone(), job])
            .map(|(user, port)| {
                let (barrier, path) = (barrier.clone(), format!("/limit/{limiter}?user={user}"));
                thread::spawn(move || {
                    barrier.wait();
                    let statuses: Vec<u16> =
                        (0..40).map(|_| http::get(port, &path).status).collect();
                    (user, statuses)
                })
            })
            .collect();
        let mut admitted = std::collections::BTreeMap::<String, usize>::new();
        for t in threads {
            let (user, statuses) = t.join().unwrap();
            assert!(
                statuses.iter().all(|&s| s == 200 || s == 429),
                "{statuses:?}"
            );
            *admitted.entry(user).or_default() += statuses.iter().filter(|&&s| s == 200).count();
        }
        for (user, n) in &admitted {
            if exact {
                assert_eq!(*n, 100, "{limiter} {user}: {admitted:?}");
            } else {
                assert!((1..=100).contains(n), "{limiter} {user}: {admitted:?}");
            }
        }
    }
    for nginx in [&a, &b] {
        assert_eq!(store_errors(nginx), 0, "{}", nginx.get("/metrics").body);
        let metrics = nginx.get("/metrics").body;
        assert!(!nginx.error_log().contains("exited on"), "a worker died");
        assert_eq!(redirects(nginx, "moved"), 0, "{metrics}");
    }
}

#[test]
fn a_slot_migrated_during_traffic_keeps_its_limit() {
    let cluster = RedisCluster::start(3, 0);
    let nginx = nginx_on_cluster(&cluster, 2);
    let (user, key) = ("mover", "slidewin:{log:mover}");
    let path = format!("/limit/log?user={user}");
    let from = cluster.master_of(key);
    let to = (from + 1) % 3;
    let send = |n: usize| -> Vec<u16> { (0..n).map(|_| nginx.get(&path).status).collect() };
    assert_eq!(send(40), [200; 40]);
    // While its keys sit on the target but the slot is not handed over: ASK, then ASKING.
    let asks_before = redirects(&nginx, "ask");
    cluster.migrate_slot(cluster.slot(key), from, to, || {
        assert_eq!(send(30), [200; 30]);
    });
    assert_eq!(redirects(&nginx, "ask") - asks_before, 30);
    assert_eq!(cluster.master_of(key), to);
    // After the hand-over the map is stale: MOVED, then the refreshed map.
    let statuses = send(40);
    assert_eq!(statuses[..30], [200; 30]);
    assert_eq!(statuses[30..], [429; 10]);
    let moved = redirects(&nginx, "moved");
    assert!((1..=4).contains(&moved), "{moved} MOVED");
    assert_eq!(store_errors(&nginx), 0);
}

/// Requests for `path` until `done()`; each answered per on_store_error within `bound`.
fn during_the_gap(nginx: &Nginx, user: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let mut answered = 0;
    while !done() {
        let started = Instant::now();
        let allow = nginx.get(&format!("/limit/allow?user={user}"));
        let deny = nginx.get(&format!("/limit/deny?user={user}"));
        assert_eq!(allow.status, 200, "on_store_error = allow");
        assert!(
            deny.status == 429 || limited_and_admitted(&deny),
            "deny: a store error refuses: {deny:?}"
        );
        assert!(
            started.elapsed() < bound,
            "{:?}\n{}",
            started.elapsed(),
            nginx.error_log()
        );
        answered += 1;
        thread::sleep(Duration::from_millis(20));
    }
    assert!(answered > 0);
}

/// After a promotion: within 2 s every worker has Redis deciding again (20 decisions in a row:
/// a 200 with the RateLimit header, or a 429), and from then on every request is decided and
/// the limit holds exactly: Redis admits 100 (a store error's 200 has no RateLimit header and
/// records nothing).
fn limiting_resumes(nginx: &Nginx, user: &str) {
    let promoted = Instant::now();
    let path = format!("/limit/log?user={user}");
    let (mut admitted, mut in_a_row, mut refused) = (0, 0, false);
    while in_a_row < 20 {
        assert!(
            promoted.elapsed() < Duration::from_secs(2),
            "Redis not deciding 2 s after the promotion:\n{}",
            nginx.error_log()
        );
        let answer = nginx.get(&path);
        if limited_and_admitted(&answer) {
            (admitted, in_a_row) = (admitted + 1, in_a_row + 1);
        } else if answer.status == 429 {
            (refused, in_a_row) = (true, in_a_row + 1);
        } else {
            in_a_row = 0;
        }
    }
    eprintln!(
        "{user}: Redis decides again {:?} after the promotion was seen",
        promoted.elapsed()
    );
    while !refused {
        let answer = nginx.get(&path);
        refused = answer.status == 429;
        if !refused {
            assert!(limited_and_admitted(&answer), "{answer:?}");
            admitted += 1;
        }
    }
    assert_eq!(admitted, 100);
}

#[test]
fn a_killed_master_is_replaced_by_its_replica_without_restarting_nginx() {
    let mut cluster = RedisCluster::start(3, 1);
    let nginx = nginx_on_cluster(&cluster, 2);
    let users = users_on_every_master(&cluster, "allow", 1);
    let (victim_user, other_user) = (&users[0], &users[1]);
    let victim = cluster.master_of(&format!("slidewin:{{allow:{victim_user}}}"));
    let replica = cluster.replica_of(victim);
    // The log key of `fresh` is on the same master.
    let fresh = (0..)
        .map(|i| format!("f{i}"))
        .find(|u| cluster.master_of(&format!("slidewin:{{log:{u}}}")) == victim)
        .unwrap();
    assert!(limited_and_admitted(
        &nginx.get(&format!("/limit/allow?user={victim_user}"))
    ));

    cluster.kill(victim);
    let mut promoted = false;
    during_the_gap(&nginx, victim_user, Duration::from_millis(800), || {
        // Keys on the other masters are limited all along.
        let other = nginx.get(&format!("/limit/allow?user={other_user}"));
        // (A 429 is Redis deciding too: the gap may outlast the limit.)
        assert!(
            other.status == 429 || limited_and_admitted(&other),
            "{other:?}"
        );
        promoted = promoted || cluster.node(replica).role() == "master";
        promoted
    });
    limiting_resumes(&nginx, &fresh);
    assert!(redirects(&nginx, "refresh") >= 1);
    assert!(!nginx.error_log().contains("exited on"));
}

#[test]
fn a_sentinel_failover_is_followed_without_restarting_nginx() {
    let mut redis = RedisSentinel::start();
    let nginx = nginx_on_sentinel(&redis);
    assert!(limited_and_admitted(&nginx.get("/limit/allow?user=s")));
    let replica_port = redis.replica.port();
    redis.master.stop();
    during_the_gap(&nginx, "s", Duration::from_millis(800), || {
        redis.master_port() == replica_port
    });
    limiting_resumes(&nginx, "after");
    assert!(redirects(&nginx, "refresh") >= 1);
    assert!(!nginx.error_log().contains("exited on"));
}

#[test]
fn bad_cluster_and_sentinel_options_are_named() {
    let nginx = Nginx::start("test.conf", 1);
    let error = |redis: &str| {
        let lua = format!(
            "return select(2, require('resty.slidewin').new{{ name = 'x', limit = 1, window_ms = 1000, store = 'redis', redis = {redis} }})"
        );
        nginx.eval(&lua).body
    };
    for (redis, message) in [
        (
            "{ cluster_nodes = {} }",
            "redis.cluster_nodes must be a non-empty list of \"host:port\", got an empty list",
        ),
        (
            "{ cluster_nodes = 'a:1' }",
            "redis.cluster_nodes must be a non-empty list of \"host:port\", got a:1",
        ),
        (
            "{ cluster_nodes = { '127.0.0.1' } }",
            "redis.cluster_nodes[1] must be \"host:port\", got 127.0.0.1",
        ),
        (
            "{ cluster_nodes = { 'a:1', 'b:99999' } }",
            "redis.cluster_nodes[2] must be \"host:port\", got b:99999",
        ),
        (
            "{ cluster_nodes = { 'a:1' }, port = 7000 }",
            "redis.port cannot be combined with redis.cluster_nodes",
        ),
        (
            "{ cluster_nodes = { 'a:1' }, sentinels = { 'b:2' } }",
            "redis.sentinels cannot be combined with redis.cluster_nodes",
        ),
        (
            "{ cluster_nodes = { 'a:1' }, db = 2 }",
            "redis.db must be 0 with redis.cluster_nodes (a cluster has one db), got 2",
        ),
        (
            "{ sentinels = { 'a:1' } }",
            "redis.master_name (a string) goes with redis.sentinels, got nil",
        ),
        (
            "{ master_name = 'm' }",
            "redis.master_name (a string) goes with redis.sentinels, got m",
        ),
        (
            "{ sentinels = { 'a:1' }, master_name = 5 }",
            "redis.master_name must be a string, got 5",
        ),
    ] {
        assert_eq!(error(redis), message, "redis = {redis}");
    }
    // Well-formed: nothing is contacted before the first request.
    assert_eq!(error("{ cluster_nodes = { '127.0.0.1:1' } }"), "nil");
    assert_eq!(
        error("{ sentinels = { '127.0.0.1:1' }, master_name = 'm' }"),
        "nil"
    );
}

#[test]
fn a_frozen_master_and_a_cluster_down_are_answered_per_on_store_error() {
    let mut cluster = RedisCluster::start(3, 0);
    let nginx = nginx_on_cluster(&cluster, 2);
    let users = users_on_every_master(&cluster, "allow", 1);
    let frozen = cluster.master_of(&format!("slidewin:{{allow:{}}}", users[0]));
    assert!(limited_and_admitted(
        &nginx.get(&format!("/limit/allow?user={}", users[0]))
    ));

    // Frozen: a request waits at most the timeouts (connect 50 + read 100 ms on the node, and
    // the same for each of up to 3 nodes a reload asks): 2 x 600 ms for the allow/deny pair.
    cluster.node(frozen).pause();
    let mut answered = 0;
    during_the_gap(&nginx, &users[0], Duration::from_millis(1500), || {
        answered += 1;
        answered > 5
    });
    cluster.node(frozen).resume();

    // Every node down: every key, at once.
    for i in 0..3 {
        cluster.kill(i);
    }
    for user in &users {
        let mut answered = 0;
        during_the_gap(&nginx, user, Duration::from_millis(800), || {
            answered += 1;
            answered > 3
        });
    }
    // Back on the same ports (empty): limiting resumes, nginx untouched.
    for i in 0..3 {
        cluster.restart(i);
    }
    cluster.wait_ok();
    limiting_resumes(&nginx, "back");
}

#[test]
fn a_demoted_master_answering_readonly_is_left_for_the_new_one() {
    let redis = RedisSentinel::start();
    let nginx = nginx_on_sentinel(&redis);
    // Both workers hold pooled connections to the master.
    for _ in 0..20 {
        assert!(limited_and_admitted(&nginx.get("/limit/allow?user=r")));
    }
    let old = redis.master_port();
    let failover = redis.client().cmd(&["SENTINEL", "FAILOVER", "mymaster"]);
    assert_eq!(failover.text(), "OK");
    // The old master lives on as a replica: its connections answer READONLY to the scripts.
    let deadline = Instant::now() + Duration::from_secs(20);
    while redis.master_port() == old || redis.master.role() != "slave" {
        assert!(Instant::now() < deadline, "no demotion");
        thread::sleep(Duration::from_millis(20));
    }
    limiting_resumes(&nginx, "demoted");
    assert!(redirects(&nginx, "refresh") >= 1);
}
