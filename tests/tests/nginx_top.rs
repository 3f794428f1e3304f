//! The operator's view in the demo nginx (nginx/demo.conf, 2 workers, `/api/`: log 5 per 10 s,
//! store shm; `/rules/`: 2 per second and 4 per 10 s): `/slidewin/top` names the clients being
//! refused with their in-window counts (a rule's key by its window nearest the limit), `?key=`
//! answers a key's windows as its next request finds them, and `/metrics` (window usage
//! histogram and at-limit gauge) passes `promtool check metrics` and matches the windows.

use std::time::Instant;

use serde_json::Value;
use slidewin_tests::metrics::promtool_check;
use slidewin_tests::nginx::Nginx;

const LIMIT: u64 = 5;

fn json(nginx: &Nginx, path: &str) -> Value {
    let r = nginx.get(path);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", r.body))
}

/// Sends `n` requests for `user` to /api/; how many were admitted.
fn send(nginx: &Nginx, user: &str, n: u64) -> u64 {
    (0..n)
        .filter(|_| nginx.get(&format!("/api/?user={user}")).status == 200)
        .count() as u64
}

/// `(key, count, limit, refused)` of a top list.
fn rows(list: &Value) -> Vec<(String, u64, u64, u64)> {
    let n = |hit: &Value, f: &str| hit[f].as_u64().unwrap_or_else(|| panic!("{f} in {hit}"));
    let hits = list.as_array().expect("a list");
    hits.iter()
        .map(|h| {
            let key = h["key"].as_str().unwrap().to_string();
            (key, n(h, "count"), n(h, "limit"), n(h, "refused"))
        })
        .collect()
}

/// The value of the sample `name{labels}` in Prometheus text.
fn sample(text: &str, name_and_labels: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no {name_and_labels} in\n{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn three_clients_at_ten_times_their_limit_are_the_top_refused_and_their_windows_answer_true() {
    let nginx = Nginx::start("demo.conf", 2);
    let hot: Vec<String> = (0..3).map(|i| format!("hot-{i}")).collect();
    for user in &hot {
        assert_eq!(send(&nginx, user, 10 * LIMIT), LIMIT);
    }
    for calm in 0..50 {
        assert_eq!(send(&nginx, &format!("calm-{calm}"), 2), 2);
    }

    let top = json(&nginx, "/slidewin/top");
    let api = &top["limiters"]["api"];
    let mut refused = rows(&api["refused"]);
    refused.sort();
    let want: Vec<_> = hot
        .iter()
        .map(|k| (k.clone(), LIMIT, LIMIT, 9 * LIMIT))
        .collect();
    assert_eq!(
        refused, want,
        "exactly the 3 hot clients, at their limit: {top}"
    );
    assert_eq!(
        (api["live"].as_u64(), api["at_limit"].as_u64()),
        (Some(53), Some(3))
    );
    let admitted = rows(&api["admitted"]);
    assert_eq!(admitted.len(), 10, "the default n");
    assert!(admitted[..3]
        .iter()
        .all(|(k, c, _, _)| k.starts_with("hot-") && *c == LIMIT));
    assert!(admitted[3..]
        .iter()
        .all(|(k, c, _, r)| k.starts_with("calm-") && (*c, *r) == (2, 0)));
    assert_eq!(
        rows(&json(&nginx, "/slidewin/top?n=1")["limiters"]["api"]["refused"]).len(),
        1
    );
    assert!(top["limiters"]["api-shared"]["unsupported"].is_string());
    assert_eq!(top["limiters"]["rules"]["live"].as_u64(), Some(0));

    // The usage histogram and the at-limit gauge: 50 keys at 2/5, 3 at 5/5.
    let metrics = nginx.get("/metrics").body;
    promtool_check(&metrics);
    let api = r#"limiter="api""#;
    let bucket = |le: &str| {
        sample(
            &metrics,
            &format!(r#"slidewin_window_usage_ratio_bucket{{{api},le="{le}"}}"#),
        )
    };
    let buckets: Vec<f64> = ["0.25", "0.5", "0.75", "0.9", "1", "+Inf"]
        .iter()
        .map(|le| bucket(le))
        .collect();
    assert_eq!(buckets, [0.0, 50.0, 50.0, 50.0, 53.0, 53.0]);
    let usage_sum = sample(
        &metrics,
        &format!("slidewin_window_usage_ratio_sum{{{api}}}"),
    );
    assert!((usage_sum - (50.0 * 0.4 + 3.0)).abs() < 1e-6, "{usage_sum}");
    assert_eq!(
        sample(
            &metrics,
            &format!("slidewin_window_usage_ratio_count{{{api}}}")
        ),
        53.0
    );
    assert_eq!(
        sample(&metrics, &format!("slidewin_window_keys_at_limit{{{api}}}")),
        3.0
    );

    // ?key= answers what the next request gets: a refusal with that wait, then one more refusal.
    for user in &hot {
        let started = Instant::now();
        let window = &json(&nginx, &format!("/slidewin/top?key={user}"))["limiters"]["api"];
        let next = nginx.get(&format!("/api/?user={user}"));
        let elapsed_ms = started.elapsed().as_millis() as u64;
        let field = |f: &str| {
            window[f]
                .as_u64()
                .unwrap_or_else(|| panic!("{f} in {window}"))
        };
        assert_eq!(
            (field("count"), field("limit"), field("remaining")),
            (LIMIT, LIMIT, 0)
        );
        assert_eq!((field("refused"), field("window")), (9 * LIMIT, 1));
        assert_eq!(next.status, 429);
        let retry_after_ms = field("retry_after_ms");
        let seconds: u64 = next.header("Retry-After").unwrap().parse().unwrap();
        let (late, early) = (
            retry_after_ms.saturating_sub(elapsed_ms).div_ceil(1000),
            retry_after_ms.div_ceil(1000),
        );
        assert!(
            (late..=early).contains(&seconds),
            "{user}: Retry-After {seconds} for a window that said {retry_after_ms} ms"
        );
        assert_eq!(
            next.header("RateLimit"),
            Some(&*format!("\"api\";r=0;t={seconds}"))
        );
        let after = &json(&nginx, &format!("/slidewin/top?key={user}"))["limiters"]["api"];
        assert_eq!(
            after["refused"].as_u64(),
            Some(9 * LIMIT + 1),
            "the refusal counted"
        );
    }
    let calm = &json(&nginx, "/slidewin/top?key=calm-7")["limiters"];
    assert_eq!(
        (
            calm["api"]["count"].as_u64(),
            calm["api"]["remaining"].as_u64()
        ),
        (Some(2), Some(LIMIT - 3))
    );
    assert_eq!(calm["api"]["retry_after_ms"].as_u64(), Some(0));
    // The shdict store answers a key's window through a peek of the store seam.
    assert_eq!(calm["api-shared"]["count"].as_u64(), Some(0));
    let next = nginx.get("/api/?user=calm-7");
    assert_eq!(next.status, 200);
    assert!(next
        .header("RateLimit")
        .unwrap()
        .starts_with(&format!("\"api\";r={};", LIMIT - 3)));
}

#[test]
fn odd_keys_are_quoted_and_a_bad_n_is_refused_naming_it() {
    let nginx = Nginx::start("demo.conf", 1);
    // /api/ keys by the raw argument (as sent); ?key= by the decoded one.
    assert_eq!(nginx.get("/api/?user=a\"b\\\u{e9}").status, 200);
    let top = json(&nginx, "/slidewin/top");
    let admitted = rows(&top["limiters"]["api"]["admitted"]);
    assert_eq!(
        admitted,
        [("a\"b\\\u{e9}".to_string(), 1, LIMIT, 0)],
        "UTF-8 as it is"
    );
    let body = nginx.get("/slidewin/top").body;
    assert!(
        body.contains("\"key\":\"a\\u0022b\\u005c\u{e9}\""),
        "{body}"
    );
    let window = json(&nginx, "/slidewin/top?key=a%22b%5C%C3%A9");
    assert_eq!(window["limiters"]["api"]["count"], 1);
    // Not UTF-8: every byte of 128 and above escaped.
    let window = nginx.get("/slidewin/top?key=x%01%FF");
    assert!(
        window.body.contains(r#""key":"x\u0001\u00ff""#),
        "{}",
        window.body
    );
    for (query, err) in [
        ("n=-1", "n must be an integer from 0 to 10000, got -1"),
        ("n=x", "n must be an integer from 0 to 10000, got x"),
        ("key", "key must be a string, got boolean"),
    ] {
        let r = nginx.get(&format!("/slidewin/top?{query}"));
        assert_eq!((r.status, r.body.trim()), (400, err), "{query}");
    }
}

#[test]
fn a_key_of_two_windows_is_listed_by_the_one_nearest_its_limit() {
    let nginx = Nginx::start("demo.conf", 2);
    let send_rules = |n| {
        (0..n)
            .filter(|_| nginx.get("/rules/?user=r").status == 200)
            .count()
    };
    // 2 per second: the third is refused by window 1.
    assert_eq!(send_rules(3), 2);
    let top = json(&nginx, "/slidewin/top");
    let refused = &top["limiters"]["rules"]["refused"][0];
    let got = |f: &str| {
        refused[f]
            .as_u64()
            .unwrap_or_else(|| panic!("{f} in {top}"))
    };
    assert_eq!(refused["key"], "r");
    assert_eq!(
        (got("count"), got("limit"), got("window"), got("refused")),
        (2, 2, 1, 1),
        "2/2 per second is nearer its limit than 2/4 per 10 s"
    );
    // A second later the first window is empty: 2/4 of window 2 is the nearest.
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let top = json(&nginx, "/slidewin/top");
    let admitted = &top["limiters"]["rules"]["admitted"][0];
    assert_eq!(
        (&admitted["count"], &admitted["limit"], &admitted["window"]),
        (&Value::from(2), &Value::from(4), &Value::from(2)),
        "{top}"
    );
    let window = &json(&nginx, "/slidewin/top?key=r")["limiters"]["rules"];
    assert_eq!(
        window["windows"],
        serde_json::json!([{"count": 0, "limit": 2}, {"count": 2, "limit": 4}])
    );
    let metrics = nginx.get("/metrics").body;
    promtool_check(&metrics);
    assert_eq!(
        sample(
            &metrics,
            r#"slidewin_window_usage_ratio_bucket{limiter="rules",le="0.5"}"#
        ),
        1.0
    );
}

#[test]
fn a_rule_of_a_zone_lists_its_keys_and_store_local_says_why_it_cannot() {
    let nginx = Nginx::start("rules.conf", 2);
    let admitted = (0..7)
        .filter(|_| nginx.get("/zone-hot?user=z").status == 200)
        .count();
    assert_eq!(admitted, 5);
    let top = nginx.eval(
        r#"local top = require("resty.slidewin.top")
        local limits = require("limits")
        return top.json({ package.loaded.hot, assert(limits:get("live-local")) }, 5, 0)"#,
    );
    let top: Value =
        serde_json::from_str(&top.body).unwrap_or_else(|e| panic!("{e}: {}", top.body));
    assert_eq!(
        rows(&top["limiters"]["hot"]["refused"]),
        [("z".to_string(), 5, 5, 2)],
        "{top}"
    );
    assert_eq!(
        top["limiters"]["live-local"]["unsupported"],
        "store local keeps each worker's keys apart: no node-wide list"
    );
    // The key's windows from the zone: what its next request gets, and its refusals.
    let window = nginx.eval(
        r#"local top = require("resty.slidewin.top")
        return top.window_json({ package.loaded.hot }, "z", 0)"#,
    );
    let window: Value = serde_json::from_str(&window.body).unwrap();
    let hot = &window["limiters"]["hot"];
    assert_eq!(
        (
            &hot["count"],
            &hot["remaining"],
            &hot["refused"],
            &hot["allowed"]
        ),
        (
            &Value::from(5),
            &Value::from(0),
            &Value::from(2),
            &Value::from(false)
        ),
        "{window}"
    );
}

/// The name of nginx/names.conf's adaptive limit (and its concurrency limit).
const ODD: &str = "say \"hi\" \\ then\nbye";

/// The value of label `label` in the first sample of `series` in Prometheus text, unescaped
/// as the exposition format says (`\\`, `\"`, `\n`).
fn label_value(text: &str, series: &str, label: &str) -> String {
    let start = format!("{series}{{");
    let line = text
        .lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"));
    let from = line
        .find(&format!("{label}=\""))
        .unwrap_or_else(|| panic!("no {label} in {line}"))
        + label.len()
        + 2;
    let mut value = String::new();
    let mut chars = line[from..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return value,
            '\\' => match chars.next() {
                Some('n') => value.push('\n'),
                Some(escaped @ ('\\' | '"')) => value.push(escaped),
                other => panic!("bad escape \\{other:?} in {line}"),
            },
            c => value.push(c),
        }
    }
    panic!("unterminated label value in {line}")
}

#[test]
fn names_with_quotes_backslashes_and_newlines_are_escaped_and_one_log_serves_every_kind() {
    let nginx = Nginx::start("names.conf", 2);
    // The one log(): refunds (3 answers of 500 cost nothing, so 2 more are admitted), the
    // adaptive counts and the concurrency slots, for the same requests.
    for _ in 0..3 {
        assert_eq!(nginx.get("/odd?status=500").status, 500);
    }
    let statuses: Vec<u16> = (0..3).map(|_| nginx.get("/odd").status).collect();
    assert_eq!(statuses, [200, 200, 429]);
    let odd = "package.loaded.odd_name";
    let counted = nginx.eval(&format!(
        "local d = ngx.shared.slidewin_adaptive \
         return d:get({odd} .. ':ok') .. ' ' .. d:get({odd} .. ':backpressure') .. ' ' \
             .. require('resty.slidewin.concurrency').get({odd}):inflight('all')"
    ));
    assert_eq!(
        counted.body, "5 1 0",
        "5 answered, the 429 pushed back, every slot given back"
    );
    // The one init_worker(): this worker's timers, each started once: the adaptive limit's,
    // and the one that watches the shm limiters' evictions.
    assert_eq!(nginx.eval("return ngx.timer.pending_count()").body, "2");

    let metrics = nginx.get("/metrics").body;
    promtool_check(&metrics);
    for series in [
        "slidewin_adaptive_limit",
        "slidewin_adaptive_inflight",
        "slidewin_adaptive_loss_ratio",
    ] {
        assert_eq!(label_value(&metrics, series, "limiter"), ODD, "{metrics}");
    }
    assert!(
        metrics.contains("slidewin_requests_total{limiter=\"refunded\",outcome=\"rejected\"} 1\n"),
        "{metrics}"
    );

    let stats = json(&nginx, "/stats.json");
    let adaptive = stats["adaptive"].as_object().expect("adaptive");
    assert_eq!(adaptive.keys().collect::<Vec<_>>(), [ODD], "{stats}");
    assert_eq!(adaptive[ODD]["limit"].as_u64(), Some(4), "{stats}");
    assert_eq!(stats["limiters"]["refunded"]["rejected"].as_u64(), Some(1));
}
