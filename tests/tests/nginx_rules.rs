//! Rules of several windows and limits that change while nginx runs (nginx/rules.conf, store
//! shm unless named): one atomic decision for every window across workers, `set_limit` from
//! an admin location, reloads that change only limits, per-call limits and tiers, the demo.

use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::{self, Response};
use slidewin_tests::load::{
    admitted_times, assert_each_window_refused, busiest_window, hammer, reload,
};
use slidewin_tests::nginx::Nginx;

fn admitted(responses: &[Response]) -> usize {
    responses.iter().filter(|r| r.status == 200).count()
}

fn statuses(nginx: &Nginx, path: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| nginx.get(path).status).collect()
}

fn set_limit(nginx: &Nginx, query: &str) -> Response {
    http::admin_post(nginx.port(), &format!("/slidewin/limits?{query}"))
}

#[test]
fn two_windows_hold_across_four_workers_and_refusals_consume_nothing() {
    let nginx = Nginx::start("rules.conf", 4);
    // Both algorithms at once, 8 clients each on one key, for 12 s: the 10 s window fills
    // in its first 5 s, then refuses while the 1 s window would admit.
    let (log, buckets) = thread::scope(|s| {
        let log = s.spawn(|| hammer(&nginx, "/limit/rule-log?user=hot", 8, 12_000));
        let buckets = s.spawn(|| hammer(&nginx, "/limit/rule-buckets?user=hot", 8, 12_000));
        (log.join().unwrap(), buckets.join().unwrap())
    });
    for (name, responses) in [("log", &log), ("buckets", &buckets)] {
        assert!(responses.iter().all(|r| r.status == 200 || r.status == 429));
        let times = admitted_times(responses);
        let (second, _) = busiest_window(times.clone(), 1_000);
        let (ten, _) = busiest_window(times, 10_000);
        assert!(second <= 10, "{name}: {second} admitted in one second");
        assert!(ten <= 50, "{name}: {ten} admitted in 10 s");
        if name == "log" {
            assert_eq!(second, 10, "a saturated second holds exactly 10");
            // Had refusals by the 1 s window cost the 10 s window anything, it would fill
            // with fewer than 50 admissions.
            assert_eq!(
                ten, 50,
                "a saturated 10 s window holds exactly 50 admissions"
            );
        }
    }
    // Refusals describe the window that refused, and RateLimit-Policy names both windows.
    let policy = "\"rule-log\";q=10;w=1, \"rule-log-10s\";q=50;w=10";
    assert_each_window_refused(&log, policy, &["rule-log", "rule-log-10s"]);
}

#[test]
fn set_limit_applies_at_once_on_every_worker_and_keeps_the_window() {
    let nginx = Nginx::start("rules.conf", 4);
    let path = "/limit/live?user=k";
    // 20 per 4 s: the window holds every phase below.
    assert_eq!(admitted(&hammer(&nginx, path, 8, 600)), 20);
    let set = set_limit(&nginx, "limiter=live&limit=30");
    assert_eq!(set.status, 200, "{}", set.body);
    assert!(
        set.body.contains("\"limit\":30,\"max_limit\":100"),
        "{}",
        set.body
    );
    let raised = hammer(&nginx, path, 8, 600);
    assert_eq!(
        admitted(&raised),
        10,
        "raising admits the difference at once"
    );
    let policies: Vec<_> = raised
        .iter()
        .map(|r| r.header("RateLimit-Policy").unwrap_or_default().to_string())
        .collect();
    assert!(
        policies.iter().all(|p| p == "\"live\";q=30;w=4"),
        "every worker advertises the new limit: {policies:?}"
    );
    let pids: std::collections::BTreeSet<_> = raised
        .iter()
        .filter_map(|r| r.header("X-Worker-Pid"))
        .collect();
    assert!(pids.len() >= 2, "several workers served: {pids:?}");
    assert_eq!(set_limit(&nginx, "limiter=live&limit=10").status, 200);
    assert_eq!(
        admitted(&hammer(&nginx, path, 8, 600)),
        0,
        "lowering refuses until the window drains"
    );

    // The local store's live limits are node-wide too (its keys stay per worker).
    assert_eq!(
        set_limit(&nginx, "limiter=live-local&limit=7&window=1").status,
        200
    );
    let local = hammer(&nginx, "/limit/live-local?user=l", 4, 300);
    assert!(local
        .iter()
        .all(|r| r.header("RateLimit-Policy") == Some("\"live-local\";q=7;w=4")));

    // Bad changes are refused, naming the value; nothing changes.
    let too_high = set_limit(&nginx, "limiter=live&limit=101");
    assert_eq!(too_high.status, 400);
    assert_eq!(
        too_high.body.trim(),
        "limit must be a positive integer at most max_limit (100), got 101"
    );
    let unknown = set_limit(&nginx, "limiter=nope&limit=5");
    assert_eq!(
        (unknown.status, unknown.body.trim()),
        (400, "limiter: no limiter called nope")
    );
    let window = set_limit(&nginx, "limiter=live&limit=5&window=2");
    assert_eq!(
        window.body.trim(),
        "window must be a window's index (1 to 1) or name, got 2"
    );
    let read = nginx.get("/slidewin/limits");
    assert!(
        read.body.contains(
            "\"live\":[{\"name\":\"live\",\"limit\":10,\"max_limit\":100,\"window_ms\":4000}]"
        ),
        "{}",
        read.body
    );
}

/// Waits until the workers started by a reload answer (the old ones drain).
fn reloaded(nginx: &Nginx) {
    reload(nginx);
    thread::sleep(Duration::from_millis(1_000));
}

#[test]
fn a_reload_that_changes_only_limits_keeps_every_window() {
    let nginx = Nginx::start("rules.conf", 2);
    let path = "/limit/held?user=h";
    assert_eq!(statuses(&nginx, path, 6), [200, 200, 200, 200, 200, 429]);
    assert_eq!(set_limit(&nginx, "limiter=held&limit=7").status, 200);
    assert_eq!(statuses(&nginx, path, 3), [200, 200, 429]);

    // Same config: the limit set at run time survives the reload, and so does the window.
    reloaded(&nginx);
    assert!(nginx
        .get("/slidewin/limits")
        .body
        .contains("\"held\":[{\"name\":\"held\",\"limit\":7,"));
    assert_eq!(statuses(&nginx, path, 2), [429, 429]);

    // A config whose limit changed: the new limit applies, the window is kept (held at 7
    // admitted, over the new 6): no fresh window, no new region.
    let conf = nginx.prefix.dir.join("conf/rules.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let changed = text.replace(
        "held = { algorithm = \"log\", limit = 5,",
        "held = { algorithm = \"log\", limit = 6,",
    );
    assert_ne!(text, changed);
    std::fs::write(&conf, changed).unwrap();
    reloaded(&nginx);
    assert!(nginx
        .get("/slidewin/limits")
        .body
        .contains("\"held\":[{\"name\":\"held\",\"limit\":6,"));
    let after = nginx.get(path);
    assert_eq!(after.status, 429, "still held: no fresh window");
    assert_eq!(after.header("RateLimit-Policy"), Some("\"held\";q=6;w=60"));
    assert_eq!(
        statuses(&nginx, "/limit/held?user=fresh", 7)
            .iter()
            .filter(|&&s| s == 200)
            .count(),
        6
    );
    assert!(
        !nginx.error_log().contains("layout changed"),
        "{}",
        nginx.error_log()
    );
}

#[test]
fn per_call_limits_and_tiers_share_one_rule() {
    let nginx = Nginx::start("rules.conf", 2);
    let count = |path: &str| {
        statuses(&nginx, path, 60)
            .iter()
            .filter(|&&s| s == 200)
            .count()
    };
    assert_eq!(count("/plan/plans?user=a&tier=free"), 5);
    assert_eq!(count("/plan/plans?user=b&limit=50"), 50);
    assert_eq!(count("/plan/plans?user=c&tier=pro"), 50);
    let pro = nginx.get("/plan/plans?user=d&tier=pro");
    assert_eq!(pro.header("RateLimit-Policy"), Some("\"plans\";q=50;w=60"));
    assert_eq!(pro.header("RateLimit"), Some("\"plans\";r=49;t=60"));

    // A tier or a limit the config does not allow is an error naming it (500, logged).
    assert_eq!(nginx.get("/plan/plans?user=e&tier=gold").status, 500);
    assert_eq!(nginx.get("/plan/plans?user=e&limit=1001").status, 500);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !nginx.error_log().contains("got 1001") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    let log = nginx.error_log();
    assert!(
        log.contains("sw:enforce: tier must be a tier of the config, got \"gold\""),
        "{log}"
    );
    assert!(
        log.contains(
            "sw:enforce: limits[1] must be a positive integer at most max_limit (1000), got 1001"
        ),
        "{log}"
    );
}

#[test]
fn the_demo_rules_location_refuses_by_either_window() {
    let nginx = Nginx::start("demo.conf", 2);
    let path = "/rules/?user=u";
    let first: Vec<Response> = (0..6).map(|_| nginx.get(path)).collect();
    let codes: Vec<u16> = first.iter().map(|r| r.status).collect();
    assert_eq!(codes, [200, 200, 429, 429, 429, 429]);
    assert_eq!(
        first[0].header("RateLimit-Policy"),
        Some("\"rules\";q=2;w=1, \"rules-10s\";q=4;w=10")
    );
    thread::sleep(Duration::from_millis(1_100));
    assert_eq!(statuses(&nginx, path, 2), [200, 200]);
    thread::sleep(Duration::from_millis(1_100));
    let full = nginx.get(path);
    assert_eq!(full.status, 429, "the 10 s window is full");
    assert!(full
        .header("RateLimit")
        .unwrap()
        .starts_with("\"rules-10s\";r=0;t="));
}

/// The workers' private memory (RssAnon: the zone itself is shared memory, RssShmem).
fn workers_private_kb(nginx: &Nginx) -> u64 {
    let pids = std::process::Command::new("pgrep")
        .args(["-P", &nginx.pid().to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&pids.stdout)
        .split_whitespace()
        .map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            status
                .lines()
                .find(|l| l.starts_with("RssAnon:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn rules_made_and_removed_at_run_time_share_one_bounded_zone() {
    let nginx = Nginx::start("rules.conf", 4);
    // Made by whichever worker first serves it, found by the others: one window for all.
    assert_eq!(
        statuses(&nginx, "/zone/rt?user=u", 20)
            .iter()
            .filter(|&&s| s == 200)
            .count(),
        3
    );
    // 1,000 rules put and removed (10 per call, about 200 a second: the zone holds a removed
    // rule's pages for a second), in two rounds while clients use rule "hot"; the workers'
    // memory after the first round is what it is after the second.
    let churn = r#"
        local zone = require("resty.slidewin.zone").get("gateway")
        for i = 1, 10 do
            local name = ("churn-%d-%d"):format(ngx.worker.pid(), ngx.now() * 1000 + i)
            local lim = zone:put(name, { limit = 3, window_ms = 60000, size = 4096 })
            assert(lim:incoming("k", true) == 0)
            assert(zone:remove(name))
        end
        -- The rounds compare what the churn keeps: collected here, a worker's heap does not
        -- swell to where its collector's pacing (its heap size at the fork) happens to be.
        collectgarbage()
        return "done"
    "#;
    let mut private_kb = Vec::new();
    let hot = thread::scope(|s| {
        let clients = s.spawn(|| hammer(&nginx, "/zone-hot?user=x", 4, 6_000));
        for round in 0..2 {
            for _ in 0..50 {
                let r = nginx.eval(churn);
                assert_eq!((r.status, r.body.as_str()), (200, "done"), "{}", r.body);
                thread::sleep(Duration::from_millis(40));
            }
            if round == 0 {
                thread::sleep(Duration::from_millis(200));
            }
            private_kb.push(workers_private_kb(&nginx));
        }
        clients.join().unwrap()
    });
    assert_eq!(
        admitted(&hot),
        5,
        "rule hot kept its window through the churn"
    );
    assert!(hot.iter().all(|r| r.status == 200 || r.status == 429));
    thread::sleep(Duration::from_millis(1_100)); // the last removed rules' grace
    let stats = nginx.eval(
        r#"local s = require("resty.slidewin.zone").get("gateway"):stats()
           return ("%d %d"):format(s.rules, s.pages_used)"#,
    );
    assert_eq!(
        stats.body, "2 8",
        "rules hot and rt, 4 pages each, are all that is left"
    );
    let growth = private_kb[1].saturating_sub(private_kb[0]);
    assert!(
        growth < 1_024,
        "workers' private memory grew by {growth} kB in the second round: {private_kb:?}"
    );
    // A rule larger than the zone's free space is refused with the size it needs.
    let refused = nginx.eval(
        r#"local ok, err = pcall(function()
               return require("resty.slidewin.zone").get("gateway"):put("big", { limit = 3, window_ms = 60000, size = 4194304 })
           end)
           return err"#,
    );
    assert!(
        refused
            .body
            .starts_with("zone:put: size must be at most the zone's largest free space (")
            && refused
                .body
                .ends_with("for this rule, got 4194304: remove rules or make the zone larger"),
        "{}",
        refused.body
    );
    let log = nginx.error_log();
    assert!(!log.contains("signal"), "no worker crashed: {log}");
}

#[test]
fn store_shdict_refuses_a_rule_naming_why_and_redis_takes_it() {
    let nginx = Nginx::start("rules.conf", 1);
    let made = |store: &str| {
        nginx
            .eval(&format!(
                r#"local sw, err = require("resty.slidewin").new{{ name = "r", store = "{store}",
                       dict = "none", windows = {{ {{ algorithm = "counter", limit = 1, window_ms = 1000 }},
                                                 {{ algorithm = "counter", limit = 2, window_ms = 2000 }} }} }}
                   return tostring(err)"#
            ))
            .body
    };
    // Store redis decides rules (tests/tests/nginx_redis.rs); buckets must divide windows, as
    // for every store.
    let redis = |windows: &str| {
        nginx
            .eval(&format!(
                r#"local sw, err = require("resty.slidewin").new{{ name = "r", store = "redis", windows = {windows} }}
                   return tostring(err)"#
            ))
            .body
    };
    assert_eq!(
        redis(
            "{ { algorithm = 'counter', limit = 1, window_ms = 1000 }, \
               { algorithm = 'buckets', limit = 2, window_ms = 2000, bucket_ms = 100 } }"
        ),
        "nil"
    );
    assert_eq!(
        redis("{ { algorithm = 'buckets', limit = 2, window_ms = 1000, bucket_ms = 300 } }"),
        "windows[1].bucket_ms must be a divisor of window_ms, got 300"
    );
    assert_eq!(
        made("shdict"),
        "windows must hold one window with store \"shdict\" (use store \"shm\" for rules), got 2 windows"
    );
}
