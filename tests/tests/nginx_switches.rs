//! The gateway switches in real nginx (nginx/switches.conf, one worker unless named): dry run,
//! exemptions by CIDR (IPv4 and IPv6 listeners) and key, header styles, JSON refusals, delay
//! instead of refusal, refunds by upstream status on stores shm, local and redis; the demo's
//! /api-dry/ and /api-legacy/.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slidewin_tests::http::{self, Response};
use slidewin_tests::load;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn statuses(nginx: &Nginx, path: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| nginx.get(path).status).collect()
}

/// The value of the sample `metric` (its whole name with labels) in Prometheus text.
fn sample(metrics: &str, metric: &str) -> i64 {
    let line = metrics
        .lines()
        .find(|l| l.starts_with(metric))
        .unwrap_or_else(|| panic!("{metric} in {metrics}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn requests(nginx: &Nginx, limiter: &str, outcome: &str) -> i64 {
    sample(
        &nginx.get("/metrics").body,
        &format!("slidewin_requests_total{{limiter=\"{limiter}\",outcome=\"{outcome}\"}}"),
    )
}

/// `n` GETs of `path` sent at once; each response with its time from the common start.
fn at_once(nginx: &Nginx, path: &str, n: usize) -> Vec<(Response, Duration)> {
    let barrier = Arc::new(Barrier::new(n));
    let port = nginx.port();
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (barrier, path) = (barrier.clone(), path.to_string());
            thread::spawn(move || {
                barrier.wait();
                let start = Instant::now();
                let r = http::get(port, &path);
                (r, start.elapsed())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// An RFC 8941 List of Items whose bare items are strings and whose parameters are integers
/// (all the IETF draft's RateLimit headers use), parsed strictly: `[(item, [(key, value)])]`.
fn sf_list(text: &str) -> Vec<(String, Vec<(String, i64)>)> {
    let bad = |why: &str| -> ! { panic!("not a structured-field list ({why}): {text:?}") };
    let mut rest = text;
    let mut items = Vec::new();
    loop {
        let Some(after_quote) = rest.strip_prefix('"') else {
            bad("an item is a string")
        };
        let end = after_quote
            .find('"')
            .unwrap_or_else(|| bad("unterminated string"));
        let item = &after_quote[..end];
        if item.contains('\\') || !item.chars().all(|c| (' '..='~').contains(&c)) {
            bad("string characters");
        }
        rest = &after_quote[end + 1..];
        let mut params = Vec::new();
        while let Some(param) = rest.strip_prefix(';') {
            let param = param.trim_start_matches(' ');
            let key_len = param
                .find(|c: char| {
                    !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_-.*".contains(c))
                })
                .unwrap_or(param.len());
            let key = &param[..key_len];
            if !key.starts_with(|c: char| c.is_ascii_lowercase() || c == '*') {
                bad("a parameter key");
            }
            let Some(value) = param[key_len..].strip_prefix('=') else {
                bad("an integer parameter")
            };
            let digits = value
                .find(|c: char| !(c.is_ascii_digit() || c == '-'))
                .unwrap_or(value.len());
            let number = &value[..digits];
            if number.is_empty() || number.trim_start_matches('-').len() > 15 {
                bad("an integer of 1 to 15 digits");
            }
            params.push((
                key.to_string(),
                number.parse().unwrap_or_else(|_| bad("an integer")),
            ));
            rest = &value[digits..];
        }
        items.push((item.to_string(), params));
        if rest.is_empty() {
            return items;
        }
        rest = rest
            .trim_start_matches([' ', '\t'])
            .strip_prefix(',')
            .unwrap_or_else(|| bad("members are separated by commas"))
            .trim_start_matches([' ', '\t']);
    }
}

fn param(items: &[(String, Vec<(String, i64)>)], key: &str) -> i64 {
    let (_, params) = &items[0];
    params.iter().find(|(k, _)| k == key).unwrap().1
}

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn dry_run_admits_everything_counts_would_be_refusals_and_logs_them_per_interval() {
    let nginx = Nginx::start("switches.conf", 1);
    let responses: Vec<_> = (0..20).map(|_| nginx.get("/limit/dry?user=u")).collect();
    assert!(responses.iter().all(|r| r.status == 200));
    assert_eq!(responses[0].header("RateLimit"), Some("\"dry\";r=4;t=10"));
    // A would-be refusal keeps its headers, but says nothing about retrying: it went on.
    let sixth = &responses[5];
    assert!(sixth
        .header("RateLimit")
        .unwrap()
        .starts_with("\"dry\";r=0;t="));
    assert_eq!(sixth.header("Retry-After"), None);
    assert_eq!(requests(&nginx, "dry", "allowed"), 5);
    assert_eq!(requests(&nginx, "dry", "would_reject"), 15);
    assert_eq!(requests(&nginx, "dry", "rejected"), 0);

    // One line per interval (1 s here): the first would-be refusal, then the sum since.
    let line = |n: usize| {
        format!("slidewin dry: dry run: {n} request(s) would have been refused since the last line")
    };
    let log = nginx.error_log();
    assert_eq!(log.matches("dry run:").count(), 1, "{log}");
    assert!(log.contains(&line(1)), "{log}");
    thread::sleep(Duration::from_millis(1_100));
    assert_eq!(nginx.get("/limit/dry?user=u").status, 200);
    let log = nginx.error_log();
    assert_eq!(log.matches("dry run:").count(), 2, "{log}");
    assert!(log.contains(&line(15)), "{log}");

    // A rule of two windows in dry run, with X-RateLimit headers: 3 per 10 s decides.
    let rule: Vec<_> = (0..6)
        .map(|_| nginx.get("/limit/dry-rule?user=r"))
        .collect();
    assert!(rule.iter().all(|r| r.status == 200));
    let remaining: Vec<_> = rule
        .iter()
        .map(|r| r.header("X-RateLimit-Remaining").unwrap())
        .collect();
    assert_eq!(remaining, ["2", "1", "0", "0", "0", "0"]);
    assert!(rule
        .iter()
        .all(|r| r.header("X-RateLimit-Limit") == Some("3")));
    assert_eq!(requests(&nginx, "dry-rule", "allowed"), 3);
    assert_eq!(requests(&nginx, "dry-rule", "would_reject"), 3);
}

#[test]
fn dry_run_counts_are_node_wide_on_shm_without_a_metrics_dict() {
    let nginx = Nginx::start("switches.conf", 2);
    let responses = load::hammer(&nginx, "/limit/dry-nodict?user=n", 4, 300);
    assert!(responses.iter().all(|r| r.status == 200));
    assert!(responses.len() > 20, "{} requests", responses.len());
    assert_eq!(requests(&nginx, "dry-nodict", "allowed"), 5);
    assert_eq!(
        requests(&nginx, "dry-nodict", "would_reject"),
        responses.len() as i64 - 5
    );
    assert_eq!(requests(&nginx, "dry-nodict", "rejected"), 0);
}

#[test]
fn exempt_cidrs_v4_v6_and_keys_are_admitted_without_the_store() {
    let nginx = Nginx::start("switches.conf", 1);
    let port = nginx.port();
    let v6 = |path: &str| http::get_at("::1", port, path);
    // exempt6: ::1/128 and key "partner" are exempt; 127.0.0.1 is limited (2 per minute).
    for _ in 0..20 {
        let r = v6("/limit/exempt6?user=u");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("RateLimit"), None, "exempt: no window described");
        assert_eq!(nginx.get("/limit/exempt6?user=partner").status, 200);
    }
    assert_eq!(
        statuses(&nginx, "/limit/exempt6?user=u", 3),
        [200, 200, 429]
    );
    // exempt4: 127.0.0.0/8 is exempt, ::1 is not.
    assert_eq!(statuses(&nginx, "/limit/exempt4?user=v", 10), [200; 10]);
    let from_v6: Vec<_> = (0..3).map(|_| v6("/limit/exempt4?user=v").status).collect();
    assert_eq!(from_v6, [200, 200, 429]);
    // An address function (here ?client=): IPv4, and IPv4-mapped IPv6, in 192.0.2.0/24.
    for client in ["192.0.2.7", "::ffff:192.0.2.9"] {
        let path = format!("/limit/exempt-header?user=w&client={client}");
        assert_eq!(statuses(&nginx, &path, 5), [200; 5], "{client}");
    }
    assert_eq!(
        statuses(&nginx, "/limit/exempt-header?user=w&client=192.0.3.7", 3),
        [200, 200, 429]
    );

    // Counted as exempt, never as allowed; the store saw only the limited key.
    assert_eq!(requests(&nginx, "exempt6", "exempt"), 40);
    assert_eq!(requests(&nginx, "exempt6", "allowed"), 2);
    assert_eq!(requests(&nginx, "exempt6", "rejected"), 1);
    assert_eq!(requests(&nginx, "exempt4", "exempt"), 10);
    let metrics = nginx.get("/metrics").body;
    assert_eq!(sample(&metrics, "slidewin_keys{limiter=\"exempt6\"}"), 1);
    assert_eq!(sample(&metrics, "slidewin_keys{limiter=\"exempt4\"}"), 1);
    assert!(!metrics.contains("limiter=\"draft\",outcome=\"exempt\""));
}

#[test]
fn header_styles_and_json_refusals() {
    let nginx = Nginx::start("switches.conf", 1);
    let [a, b, refused] = [0; 3].map(|_| nginx.get("/limit/draft?user=h"));
    assert_eq!((a.status, b.status, refused.status), (200, 200, 429));
    assert_eq!(a.header("RateLimit-Policy"), Some("\"draft\";q=2;w=60"));
    assert_eq!(a.header("RateLimit"), Some("\"draft\";r=1;t=60"));
    for r in [&a, &b, &refused] {
        let policy = sf_list(r.header("RateLimit-Policy").unwrap());
        assert_eq!(policy.len(), 1);
        assert_eq!((param(&policy, "q"), param(&policy, "w")), (2, 60));
        let rate = sf_list(r.header("RateLimit").unwrap());
        assert_eq!(rate[0].0, "draft");
    }
    assert_eq!(param(&sf_list(b.header("RateLimit").unwrap()), "r"), 0);
    let rule = sf_list("\"api\";q=10;w=1, \"api-1h\";q=1000;w=3600");
    assert_eq!(
        (rule.len(), rule[1].0.as_str(), rule[1].1[1].1),
        (2, "api-1h", 3600)
    );
    assert_eq!(a.header("Retry-After"), None);
    let retry: i64 = refused.header("Retry-After").unwrap().parse().unwrap();
    assert!((59..=60).contains(&retry), "{retry}");
    assert_eq!(
        refused.header("RateLimit"),
        Some(format!("\"draft\";r=0;t={retry}").as_str())
    );
    assert_eq!(refused.header("Content-Type"), Some("text/plain"));
    assert_eq!(refused.body, "Too Many Requests\n");

    let before = unix_seconds();
    let [a, b, refused] = [0; 3].map(|_| nginx.get("/limit/legacy?user=h"));
    let after = unix_seconds();
    assert_eq!((a.status, b.status, refused.status), (200, 200, 429));
    for (r, remaining) in [(&a, "1"), (&b, "0"), (&refused, "0")] {
        assert_eq!(r.header("X-RateLimit-Limit"), Some("2"));
        assert_eq!(r.header("X-RateLimit-Remaining"), Some(remaining));
        let reset: i64 = r.header("X-RateLimit-Reset").unwrap().parse().unwrap();
        assert!(
            (before + 59..=after + 61).contains(&reset),
            "reset {reset} in UTC epoch seconds, now {before}"
        );
        assert_eq!(r.header("RateLimit"), None);
        assert_eq!(r.header("RateLimit-Policy"), None);
    }
    assert_eq!(a.header("Retry-After"), None);
    assert!(refused.header("Retry-After").is_some());

    let quiet: Vec<_> = (0..3).map(|_| nginx.get("/limit/quiet?user=h")).collect();
    assert_eq!(
        quiet.iter().map(|r| r.status).collect::<Vec<_>>(),
        [200, 200, 429]
    );
    for r in &quiet {
        for name in [
            "RateLimit",
            "RateLimit-Policy",
            "Retry-After",
            "X-RateLimit-Limit",
        ] {
            assert_eq!(r.header(name), None, "{name} with headers = \"none\"");
        }
    }

    assert_eq!(nginx.get("/limit/json?user=h").status, 200);
    let json = nginx.get("/limit/json?user=h");
    assert_eq!(json.status, 503);
    assert_eq!(json.header("Content-Type"), Some("application/json"));
    let retry = json.header("Retry-After").unwrap();
    assert_eq!(
        json.body,
        format!(
            "{{\"error\":\"rate_limited\",\"limiter\":\"json\",\"status\":503,\"retry_after_s\":{retry}}}\n"
        )
    );
}

#[test]
fn delay_admits_after_the_wait_and_never_more_than_the_limit_per_window() {
    let nginx = Nginx::start("switches.conf", 1);
    let answers = at_once(&nginx, "/limit/delay?user=d", 10);
    assert!(
        answers.iter().all(|(r, _)| r.status == 200),
        "{:?}",
        answers.iter().map(|(r, _)| r.status).collect::<Vec<_>>()
    );
    let mut waited: Vec<_> = answers.iter().map(|(_, t)| t.as_millis()).collect();
    waited.sort();
    assert!(waited[4] < 600, "5 answered at once: {waited:?}");
    assert!(
        waited[5] >= 900 && waited[9] < 1_800,
        "5 answered about 1 s later: {waited:?}"
    );
    // The server's decision times (each between X-T0 and X-T1): the k-th delayed admission
    // is at least the window after the k-th of the first five, whose entry it replaces.
    let decided: Vec<(i64, i64)> = answers.iter().map(|(r, _)| load::decided(r)).collect();
    let (mut first, mut later) = (Vec::new(), Vec::new());
    for (t0, t1) in decided {
        if t1 - t0 < 500 {
            first.push(t0);
        } else {
            later.push(t1);
        }
    }
    first.sort();
    later.sort();
    assert_eq!((first.len(), later.len()), (5, 5));
    for (t0, t1) in first.iter().zip(&later) {
        assert!(
            t1 - t0 >= 1_000,
            "6 admitted within 1000 ms: {first:?} {later:?}"
        );
    }
    let metrics = nginx.get("/metrics").body;
    assert!(sample(&metrics, "slidewin_delay_waits_total{limiter=\"delay\"}") >= 5);
    assert_eq!(requests(&nginx, "delay", "allowed"), 10);
    assert_eq!(requests(&nginx, "delay", "rejected"), 0);
}

#[test]
fn delay_refuses_beyond_max_waiting_and_max_ms_at_once() {
    let nginx = Nginx::start("switches.conf", 1);
    let summary = |answers: &[(Response, Duration)]| {
        let mut out: Vec<(u16, bool)> = answers
            .iter()
            .map(|(r, t)| (r.status, t.as_millis() >= 900))
            .collect();
        out.sort();
        out
    };
    // 5 admitted at once, 2 wait (max_waiting) and are admitted, 3 refused at once.
    let bounded = at_once(&nginx, "/limit/delay-bounded?user=b", 10);
    let mut want = vec![(200, false); 5];
    want.extend([(200, true); 2]);
    want.extend([(429, false); 3]);
    want.sort();
    assert_eq!(summary(&bounded), want);
    // A wait of about 1 s is more than max_ms = 100: refused at once.
    let short = at_once(&nginx, "/limit/delay-short?user=s", 10);
    let mut want = vec![(200, false); 5];
    want.extend([(429, false); 5]);
    assert_eq!(summary(&short), want);
    assert_eq!(requests(&nginx, "delay-bounded", "rejected"), 3);
    assert_eq!(requests(&nginx, "delay-short", "rejected"), 5);
}

/// 12 requests of a fresh key at once to limit 5 per 1000 ms with delay max_ms 1000 and
/// max_waiting 3: exactly 5 admitted at once, 3 after about 1 s, 4 refused at once. The worker
/// pids of the 7 refused at first.
fn delay_node_burst(nginx: &Nginx, user: &str) -> Vec<String> {
    let answers = at_once(nginx, &format!("/limit/delay-node?user={user}"), 12);
    let summary: Vec<_> = answers
        .iter()
        .map(|(r, t)| {
            (
                r.status,
                t.as_millis(),
                r.header("X-Worker").expect("X-Worker").to_string(),
            )
        })
        .collect();
    let count = |status: u16, delayed: bool| {
        summary
            .iter()
            .filter(|(s, ms, _)| *s == status && (*ms >= 900) == delayed)
            .count()
    };
    assert_eq!(count(200, false), 5, "admitted at once: {summary:?}");
    assert_eq!(count(200, true), 3, "admitted after a wait: {summary:?}");
    assert_eq!(count(429, false), 4, "refused at once: {summary:?}");
    assert!(summary.iter().all(|(_, ms, _)| *ms < 1_800), "{summary:?}");
    summary
        .into_iter()
        .filter(|(s, ms, _)| *s == 429 || *ms >= 900)
        .map(|(_, _, worker)| worker)
        .collect()
}

#[test]
fn delay_max_waiting_bounds_the_waiting_requests_of_every_worker_together() {
    let nginx = Nginx::start("switches.conf", 4);
    // The kernel may hand one burst to one worker (where a bound per worker holds too): a burst
    // whose refused requests met two workers or more shows the bound is the node's.
    let mut spread = 0;
    for attempt in 0..5 {
        let mut workers = delay_node_burst(&nginx, &format!("n{attempt}"));
        workers.sort();
        workers.dedup();
        if workers.len() >= 2 {
            spread = attempt + 1;
            break;
        }
    }
    assert!(spread > 0, "5 bursts each met one worker only");
    assert_eq!(requests(&nginx, "delay-node", "allowed"), 8 * spread);
    assert_eq!(requests(&nginx, "delay-node", "rejected"), 4 * spread);
}

#[test]
fn refunds_give_5xx_answers_back_on_shm_local_and_redis() {
    let redis = RedisServer::start();
    let nginx = Nginx::start_with_env(
        "switches.conf",
        1,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    );
    for limiter in ["refund-shm", "refund-local", "refund-redis", "refund-fn"] {
        for status in [503, 502, 500, 504, 503, 503, 503, 503] {
            let path = format!("/refund/{limiter}?user=k&status={status}");
            assert_eq!(nginx.get(&path).status, status, "{limiter}");
            // The refund lands after the answer (redis: from a timer).
            thread::sleep(Duration::from_millis(30));
        }
        let ok = format!("/refund/{limiter}?user=k&status=200");
        assert_eq!(
            statuses(&nginx, &ok, 6),
            [200, 200, 200, 200, 200, 429],
            "{limiter}: the 5xx answers cost nothing"
        );
    }
    // Statuses not listed are counted: two 404s leave three.
    let path = |status| format!("/refund/refund-shm?user=n&status={status}");
    assert_eq!(statuses(&nginx, &path(404), 2), [404, 404]);
    assert_eq!(statuses(&nginx, &path(200), 4), [200, 200, 200, 429]);
    assert!(
        !nginx.error_log().contains("refund failed"),
        "{}",
        nginx.error_log()
    );
}

#[test]
fn the_demo_shows_dry_run_and_x_ratelimit_headers() {
    let nginx = Nginx::start("demo.conf", 2);
    assert_eq!(statuses(&nginx, "/api-dry/?user=u", 8), [200; 8]);
    let legacy: Vec<_> = (0..6).map(|_| nginx.get("/api-legacy/?user=u")).collect();
    let remaining: Vec<_> = legacy
        .iter()
        .map(|r| r.header("X-RateLimit-Remaining").unwrap_or_default())
        .collect();
    assert_eq!(remaining, ["4", "3", "2", "1", "0", "0"]);
    assert!(legacy
        .iter()
        .all(|r| r.header("X-RateLimit-Limit") == Some("5")));
    assert_eq!(legacy[4].status, 200);
    assert_eq!(legacy[5].status, 429);
    assert!(legacy[5].header("Retry-After").is_some());
    let metrics = nginx.get("/metrics").body;
    assert_eq!(
        sample(
            &metrics,
            "slidewin_requests_total{limiter=\"api-dry\",outcome=\"would_reject\"}"
        ),
        3
    );
}
