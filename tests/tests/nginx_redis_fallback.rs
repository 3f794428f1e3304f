//! on_store_error = "local" (limiter "fallback" of nginx/redis.conf, deciding per request, and of
//! nginx/leases.conf, with leases: 10 a second in Redis, 4 a second per node in its own shared
//! memory while Redis cannot answer): with Redis down, each of two nginx nodes admits exactly
//! its fallback limit per window; when Redis is back, the nodes decide in Redis again, and the
//! error log says so both ways. Limiter "outage" (three nodes, a rule of two windows): what the
//! fallbacks admitted is replayed in Redis before it decides again, and every window keeps the
//! bounds docs/redis.md states, after an empty restart and with appendfsync always.

use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slidewin_tests::http;
use slidewin_tests::load::busiest_window;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn nginx_on(config: &str, redis: &RedisServer) -> Nginx {
    Nginx::start_with_env(
        config,
        2,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

/// The X-T0/X-T1 brackets of the admitted requests, and how many were refused.
type Admissions = (Vec<(i64, i64)>, usize);

/// `clients` threads sending GETs of `path` to `port` for `run`: the X-T0/X-T1 brackets
/// (now_ms before and after the decision) of the admitted ones, sorted, and the refused count.
fn admissions(port: u16, path: &str, clients: usize, run: Duration) -> Admissions {
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

/// [`admissions`] on every node of `nodes` at once, 4 clients each, each node from a thread of
/// its own: the handles, in the nodes' order.
fn admissions_on_each(
    nodes: &[Nginx],
    path: &'static str,
    run: Duration,
) -> Vec<thread::JoinHandle<Admissions>> {
    nodes
        .iter()
        .map(|n| {
            let port = n.port();
            thread::spawn(move || admissions(port, path, 4, run))
        })
        .collect()
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
    let runs = admissions_on_each(
        &nodes,
        "/timed/fallback?user=k",
        Duration::from_millis(5000),
    );
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
    // retry_ms (200) after their last error a worker replays what its fallback admitted, and
    // decides by its fallback until that is done: requests of another key wake every worker
    // that fell back until each says the store answers again. Then Redis decides: 10 a
    // second, shared.
    thread::sleep(Duration::from_millis(300));
    let deadline = Instant::now() + Duration::from_secs(10);
    let back = |node: &Nginx| {
        let log = node.error_log();
        log.matches("; fallback ended").count() >= log.matches("deciding locally").count()
    };
    while !nodes.iter().all(back) {
        assert!(Instant::now() < deadline, "{}", nodes[0].error_log());
        for node in &nodes {
            node.get("/timed/fallback?user=wake");
        }
        thread::sleep(Duration::from_millis(10));
    }
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
fn a_full_journal_refuses_other_keys_and_what_it_holds_counts_in_redis() {
    // Limiter "journaled": 10 per minute in Redis, 4 per node while it cannot answer, a journal
    // of two keys. One worker, so that one journal sees every request.
    let mut redis = RedisServer::start();
    let node = Nginx::start_with_env(
        "redis.conf",
        1,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    );
    let status = |user: &str| node.get(&format!("/limit/journaled?user={user}")).status;
    assert_eq!(status("warm"), 200);
    redis.stop();
    // a and b fill the journal: c is refused, though the fallback has room for it.
    let outage: Vec<u16> = ["a", "b", "c", "a", "c"].map(status).to_vec();
    assert_eq!(outage, [200, 200, 429, 200, 429]);
    redis.restart();
    thread::sleep(Duration::from_millis(300));
    // This request starts the replay and is decided by the fallback (a's third), replayed too.
    assert_eq!(status("a"), 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !node.error_log().contains("told the store of") {
        assert!(Instant::now() < deadline, "{}", node.error_log());
        thread::sleep(Duration::from_millis(20));
    }
    let log = node.error_log();
    assert!(
        log.contains(
            "told the store of 4 unit(s) of 2 key(s) the fallback admitted in this worker"
        ),
        "{log}"
    );
    assert_eq!(
        log.matches("the fallback's journal holds fallback.journal_keys = 2 keys: other keys are refused until the store is told of them").count(),
        1,
        "{log}"
    );
    // Redis counts them: a has 10 - 3 left this minute, b 10 - 1, c all 10.
    for (user, left) in [("a", 7), ("b", 9), ("c", 10)] {
        let admitted = (0..12).filter(|_| status(user) == 200).count();
        assert_eq!(admitted, left, "{user}");
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
            "fallback.share is not an option (limit, limits, retry_ms, size, journal_keys)",
        ),
        (
            r#"on_store_error = "local", fallback = { limit = 3, journal_keys = 0 }"#,
            "fallback.journal_keys must be a positive integer, got 0",
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

/// now_ms, the clock of the X-T0/X-T1 headers (the system clock, as the workers read it).
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The admissions of `admitted` (X-T0/X-T1 brackets) certainly inside (start, end].
fn inside(admitted: &[(i64, i64)], start: i64, end: i64) -> usize {
    admitted
        .iter()
        .filter(|&&(t0, t1)| t0 > start && t1 <= end)
        .count()
}

/// The units each node's workers told Redis of ("told the store of N unit(s)" lines).
fn replayed_units(node: &Nginx) -> u64 {
    node.error_log()
        .lines()
        .filter_map(|l| l.split("told the store of ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// A run of limiter "outage" (nginx/redis.conf: 100 per 1 s and 500 per 10 s in Redis; 33 and
/// 166 per node while Redis cannot answer): three nodes of two workers, four clients each far
/// above the limit on one key for 20 s; Redis killed (SIGKILL) after 6 s and restarted 2 s later.
struct Outage {
    /// Every admission's X-T0/X-T1 bracket, sorted.
    admitted: Vec<(i64, i64)>,
    killed: i64,
    restarted: i64,
    /// The units the workers told Redis of, per node.
    replayed: Vec<u64>,
}

fn outage(mut redis: RedisServer) -> Outage {
    let nodes: Vec<Nginx> = (0..3).map(|_| nginx_on("redis.conf", &redis)).collect();
    let runs = admissions_on_each(
        &nodes,
        "/timed/outage?user=k",
        Duration::from_millis(20_000),
    );
    thread::sleep(Duration::from_millis(6_000));
    redis.stop();
    let killed = now_ms();
    thread::sleep(Duration::from_millis(2_000));
    redis.restart();
    let restarted = now_ms();
    let mut admitted = Vec::new();
    for run in runs {
        admitted.extend(run.join().unwrap().0);
    }
    admitted.sort();
    let replayed = nodes.iter().map(replayed_units).collect();
    for node in &nodes {
        let log = node.error_log();
        assert!(!log.contains("exited on signal"), "{log}");
    }
    Outage {
        admitted,
        killed,
        restarted,
        replayed,
    }
}

impl Outage {
    /// The most admissions certainly inside one window of `window_ms` that starts at or after
    /// `from` (None: any window).
    fn busiest(&self, window_ms: i64, from: Option<i64>) -> usize {
        let admitted = &self.admitted;
        match from {
            None => busiest_window(admitted.clone(), window_ms).0,
            Some(from) => admitted
                .iter()
                .map(|&(_, end)| (end - window_ms, end))
                .filter(|&(start, _)| start >= from)
                .map(|(start, end)| inside(admitted, start, end))
                .max()
                .unwrap_or(0),
        }
    }

    /// The units the fallbacks admitted while Redis was down (certainly: both times inside).
    fn during(&self) -> usize {
        inside(&self.admitted, self.killed, self.restarted)
    }

    /// The units every node told Redis of: at least every admission decided while Redis was
    /// down. Returns their sum.
    fn assert_replayed(&self) -> usize {
        let during = self.during();
        assert!(during > 150, "{during} admitted by the fallbacks");
        assert!(
            self.replayed.iter().all(|&units| units > 0),
            "{:?}",
            self.replayed
        );
        let replayed = self.replayed.iter().sum::<u64>() as usize;
        assert!(
            replayed >= during,
            "{replayed} units replayed, {during} admitted while Redis was down"
        );
        replayed
    }

    /// No window of `window_ms` holds more than `bound`; those starting at or after the kill
    /// (the fallbacks' admissions and Redis's after the restart) no more than `after_kill`;
    /// those starting a second after the restart (every replay done) no more than `limit`.
    fn assert_windows(&self, window_ms: i64, limit: usize, bound: usize, after_kill: usize) {
        let busiest = self.busiest(window_ms, None);
        assert!(
            busiest <= bound,
            "{busiest} admitted within {window_ms} ms (bound {bound})"
        );
        let busiest = self.busiest(window_ms, Some(self.killed));
        assert!(
            busiest <= after_kill,
            "{busiest} admitted within {window_ms} ms from the kill on (bound {after_kill})"
        );
        let busiest = self.busiest(window_ms, Some(self.restarted + 1_000));
        assert!(
            busiest <= limit,
            "{busiest} admitted within {window_ms} ms after the replays (limit {limit})"
        );
    }
}

// The bounds of docs/redis.md ("What the fallback admitted is told to Redis"), for 3 nodes: a
// window holds at most P + limit + U, with P the admissions in it Redis decided on data it then
// lost (at most limit; none when its data is kept) and U the fallbacks' admissions in it that
// Redis was not told of when it last admitted in it (at most 3 x the fallback limit, and at
// most every unit the fallbacks admitted). A 1 s window cannot hold admissions from both sides
// of a 2 s outage: limit + 3 x 33. From the kill on, Redis admits at most 100 a second after
// the restart, so its 10 s window fills seconds after every worker has replayed the outage's
// admissions: U holds only those made after the restart, and without the replay Redis would
// admit its 500 on top of the ~280 the fallbacks admitted while it was down.

#[test]
fn after_an_empty_restart_what_the_fallback_admitted_counts_in_redis() {
    let run = outage(RedisServer::start());
    let replayed = run.assert_replayed();
    let after_restart = replayed - run.during();
    run.assert_windows(1_000, 100, 100 + 3 * 33, 100 + 3 * 33);
    run.assert_windows(10_000, 500, 2 * 500 + 3 * 166, 500 + after_restart);
}

#[test]
fn with_appendfsync_always_redis_keeps_its_admissions_and_learns_the_fallbacks() {
    let run = outage(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]));
    let replayed = run.assert_replayed();
    let after_restart = replayed - run.during();
    run.assert_windows(1_000, 100, 100 + 3 * 33, 100 + 3 * 33);
    // P is 0: no window holds more than the limit and what the fallbacks admitted (an empty
    // restart lets the 10 s window hold nearly 2 x 500).
    run.assert_windows(10_000, 500, 500 + replayed, 500 + after_restart);
}
