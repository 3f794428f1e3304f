//! The native module (`ngx_http_slidewin_module.so`) in Debian's nginx: without Lua
//! (nginx/native.conf) exact across workers, through SIGKILLed workers and reloads, with the
//! decisions read from the server's own access log; beside resty.slidewin in one nginx
//! (nginx/doors.conf), the same headers for the same trace; `slidewin_metrics`'s window usage,
//! walked in steps that let the worker serve others; and bad directives refused by `nginx -t`
//! naming the directive.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::Response;
use slidewin_tests::load::{reload, try_get, worker_pids};
use slidewin_tests::metrics::promtool_check;
use slidewin_tests::nginx::{native_module, repo_root, Nginx, Prefix};
use slidewin_tests::random::Random;

/// What a logged `$slidewin_msec` may lag the time its decision was recorded at: none, since
/// the time is read once the key's set is locked.
const SLACK_MS: i64 = 0;

fn start(config: &str, workers: u32) -> Nginx {
    native_module();
    Nginx::start(config, workers)
}

/// The admitted decisions of decisions.log (`$msec $slidewin_status $status`), in ms.
fn admitted(nginx: &Nginx) -> Vec<i64> {
    let log = std::fs::read_to_string(nginx.prefix.dir.join("logs/decisions.log")).unwrap();
    let mut times: Vec<i64> = log
        .lines()
        .filter(|l| l.ends_with(" PASSED 200"))
        .map(|l| {
            let msec = l.split(' ').next().unwrap();
            let (s, ms) = msec.split_once('.').unwrap();
            s.parse::<i64>().unwrap() * 1000 + ms.parse::<i64>().unwrap()
        })
        .collect();
    times.sort();
    times
}

/// The most admissions inside any window of `window_ms` less the slack: what an exact
/// sliding log bounds by its limit.
fn busiest(times: &[i64], window_ms: i64) -> usize {
    most_in(times, window_ms - SLACK_MS)
}

/// The most of `times` (sorted) inside any span of `span_ms`.
fn most_in(times: &[i64], span_ms: i64) -> usize {
    let mut first = 0;
    let mut most = 0;
    for (i, &t) in times.iter().enumerate() {
        while times[first] <= t - span_ms {
            first += 1;
        }
        most = most.max(i + 1 - first);
    }
    most
}

/// 16 clients on one key for `ms`, while `chaos` runs every `every_ms`; the answers
/// (`None`: a connection a killed worker dropped).
fn load(
    nginx: &Nginx,
    key: &str,
    ms: u64,
    every_ms: u64,
    chaos: &(dyn Fn() + Sync),
) -> Vec<Option<u16>> {
    let deadline = Instant::now() + Duration::from_millis(ms);
    let port = nginx.port();
    let path = format!("/limit?user={key}");
    thread::scope(|s| {
        let clients: Vec<_> = (0..16)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while Instant::now() < deadline {
                        out.push(try_get(port, &path));
                    }
                    out
                })
            })
            .collect();
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(every_ms));
            chaos();
        }
        clients
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

fn assert_exact(nginx: &Nginx, answers: &[Option<u16>], what: &str) {
    assert!(
        answers.iter().flatten().all(|&s| s == 200 || s == 429),
        "{what}"
    );
    let times = admitted(nginx);
    assert_eq!(busiest(&times, 1_000), 10, "{what}: the busiest 1 s window");
    assert_eq!(
        busiest(&times, 10_000),
        50,
        "{what}: the busiest 10 s window"
    );
    let refused = answers.iter().filter(|&&s| s == Some(429)).count();
    assert!(refused > 1_000, "{what}: {refused} refusals");
}

#[test]
fn four_workers_hold_every_window_exactly_through_kills_and_reloads() {
    let nginx = start("native.conf", 4);
    let log = nginx.prefix.dir.join("logs/decisions.log");
    let answers = load(&nginx, "calm", 12_000, 1_000, &|| {});
    let served = answers.iter().filter(|&&s| s == Some(200)).count();
    assert_eq!(served, admitted(&nginx).len(), "every admission is logged");
    assert_exact(&nginx, &answers, "calm");

    std::fs::write(&log, "").unwrap();
    let kills = std::sync::atomic::AtomicUsize::new(0);
    let answers = load(&nginx, "killed", 12_000, 300, &|| {
        if let Some(&pid) = worker_pids(&nginx).first() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            kills.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(kills.into_inner() >= 30);
    assert_exact(&nginx, &answers, "a worker SIGKILLed every 300 ms");

    std::fs::write(&log, "").unwrap();
    let answers = load(&nginx, "reloaded", 12_000, 2_000, &|| reload(&nginx));
    assert_exact(&nginx, &answers, "nginx -s reload every 2 s");

    let error_log = nginx.error_log();
    assert!(
        error_log.contains("exited on signal 9"),
        "workers were killed"
    );
    for line in error_log
        .lines()
        .filter(|l| l.contains("[alert]") || l.contains("[emerg]"))
    {
        assert!(line.contains("exited on signal 9"), "{line}");
    }
    let metrics = nginx.get("/metrics").body;
    assert!(
        metrics.contains("slidewin_keys{limiter=\"api\"} 3\n"),
        "{metrics}"
    );
    promtool_check(&metrics);
}

/// The headers both doors answer a key with, request after request.
fn trace(nginx: &Nginx, location: &str, key: &str, fields: &[&str]) -> Vec<Vec<String>> {
    (0..14)
        .map(|_| {
            let r: Response = nginx.get(&format!("{location}?user={key}"));
            let mut seen = vec![r.status.to_string()];
            seen.extend(
                fields
                    .iter()
                    .map(|f| r.header(f).unwrap_or("-").to_string()),
            );
            seen
        })
        .collect()
}

#[test]
fn both_doors_send_the_same_headers_for_the_same_trace() {
    let nginx = start("doors.conf", 2);
    let draft = ["RateLimit-Policy", "RateLimit", "Retry-After"];
    let native = trace(&nginx, "/native", "n", &draft);
    let lua = trace(&nginx, "/lua", "l", &draft);
    assert_eq!(native, lua);
    assert_eq!(native[0][1], r#""api";q=10;w=1, "api-10s";q=50;w=10"#);
    assert_eq!(native[13][0], "429");
    let x = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After"];
    assert_eq!(
        trace(&nginx, "/native-x", "nx", &x),
        trace(&nginx, "/lua-x", "lx", &x)
    );
    let reset = |location: &str, key: &str| -> i64 {
        let r = nginx.get(&format!("{location}?user={key}"));
        r.header("X-RateLimit-Reset").unwrap().parse().unwrap()
    };
    // Epoch seconds: the two requests may straddle a second.
    assert!((reset("/native-x", "rx") - reset("/lua-x", "rx-lua")).abs() <= 1);
}

#[test]
fn resty_opens_the_zone_nginx_conf_declared() {
    let nginx = start("doors.conf", 2);
    for _ in 0..12 {
        nginx.get("/native?user=hog");
    }
    nginx.get("/native?user=calm");
    assert_eq!(nginx.get("/native-zone?op=top").body, "hog\n");
    // A limit set through the Lua door holds for the native one, in every worker.
    assert_eq!(nginx.get("/native-zone?op=limit&n=5").body, "ok\n");
    let statuses: Vec<u16> = (0..7)
        .map(|_| nginx.get("/native?user=low").status)
        .collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429]);
    let policy = nginx
        .get("/native?user=other")
        .header("RateLimit-Policy")
        .map(String::from);
    assert_eq!(
        policy.as_deref(),
        Some(r#""api";q=5;w=1, "api-10s";q=50;w=10"#)
    );
}

fn rewrite(nginx: &Nginx, from: &str, to: &str) {
    let conf = nginx.prefix.dir.join("conf/native.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(&conf, text.replace(from, to)).unwrap();
}

/// Reloads and waits until the zone `kept` was attached `n` times with its keys.
fn reload_kept(nginx: &Nginx, n: usize) {
    reload(nginx);
    let deadline = Instant::now() + Duration::from_secs(10);
    let kept = "slidewin_zone \"kept\": kept with its keys";
    while nginx.error_log().matches(kept).count() < n {
        assert!(Instant::now() < deadline, "{}", nginx.error_log());
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500)); // the old workers drain
}

#[test]
fn a_reload_that_changes_only_a_limit_keeps_every_window() {
    let nginx = start("native.conf", 2);
    let statuses = |n| -> Vec<u16> { (0..n).map(|_| nginx.get("/kept?user=r").status).collect() };
    assert_eq!(statuses(6), [200, 200, 200, 200, 200, 429]);
    rewrite(&nginx, "log 5/60s max_limit=10", "log 4/60s max_limit=10");
    reload_kept(&nginx, 1);
    let r = nginx.get("/kept?user=r");
    assert_eq!(r.status, 429, "the refused client stays refused");
    assert_eq!(r.header("RateLimit-Policy"), Some(r#""kept";q=4;w=60"#));
    rewrite(&nginx, "log 4/60s max_limit=10", "log 7/60s max_limit=10");
    reload_kept(&nginx, 2);
    assert_eq!(
        statuses(3),
        [200, 200, 429],
        "raised to 7: two more of the 5 kept"
    );
}

/// nginx/native.conf with one worker, `http` (zones, formats) before its zone "kept" and
/// `locations` before its /metrics, as `name`.
fn start_with(name: &str, http: &str, locations: &str) -> Nginx {
    native_module();
    let prefix = Prefix::temporary(1);
    let conf = std::fs::read_to_string(prefix.dir.join("conf/native.conf")).unwrap();
    let text = conf
        .replace(
            "    slidewin_zone kept",
            &format!("    {http}\n    slidewin_zone kept"),
        )
        .replace(
            "        location = /metrics {",
            &format!("        {locations}\n        location = /metrics {{"),
        )
        .replace("{{prefix}}", &prefix.dir.display().to_string());
    std::fs::write(prefix.dir.join("conf").join(name), text).unwrap();
    Nginx::start_in(prefix, name, &[])
}

/// Calls of `user` one at a time, each reserving 10 of zone `tokens` (20 a minute) through
/// `location`, whose upstream reports `used`: the statuses.
fn reservations(nginx: &Nginx, location: &str, user: &str, used: &str, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let status = nginx
                .get(&format!("{location}?user={user}&cost=10&used={used}"))
                .status;
            // The log phase settles after the response is sent: let it run.
            thread::sleep(Duration::from_millis(50));
            status
        })
        .collect()
}

#[test]
fn a_reservation_settles_in_the_log_phase_for_what_the_upstream_reported() {
    let zone = "slidewin_zone tokens size=1m log 20/60s;";
    let locations = r#"location = /usage {
            add_header X-Usage $arg_used;
            return 200 "ok
";
        }
        location = /reserve {
            slidewin_limit tokens key=$arg_user cost=$arg_cost settle=$upstream_http_x_usage;
            proxy_pass http://127.0.0.1:$server_port/usage?used=$arg_used;
        }
        location = /redirected {
            slidewin_limit tokens key=$arg_user cost=$arg_cost settle=$upstream_http_x_usage;
            try_files /nothing-here @upstream;
        }
        location = /clamped {
            slidewin_limit tokens key=$arg_user cost=$arg_cost settle=$upstream_http_x_usage above=clamp;
            proxy_pass http://127.0.0.1:$server_port/usage?used=$arg_used;
        }
        location = /owed {
            slidewin_limit tokens key=$arg_user cost=$arg_cost settle=$upstream_http_x_usage above=debt;
            proxy_pass http://127.0.0.1:$server_port/usage?used=$arg_used;
        }
        location @upstream {
            proxy_pass http://127.0.0.1:$server_port/usage?used=$arg_used;
        }"#;
    let nginx = start_with("settle.conf", zone, locations);
    // Each uses 2 of 10: before the k-th the window holds 2 (k - 1); 2 (k - 1) + 10 <= 20.
    let settled = reservations(&nginx, "/reserve", "a", "2", 8);
    assert_eq!(settled, [200, 200, 200, 200, 200, 200, 429, 429]);
    // Decided before an internal redirect, settled after it: the reservation rides in the
    // main request.
    let redirected = reservations(&nginx, "/redirected", "r", "2", 8);
    assert_eq!(redirected, [200, 200, 200, 200, 200, 200, 429, 429]);
    // Nothing reported (an empty header): each reservation stays whole.
    assert_eq!(
        reservations(&nginx, "/reserve", "b", "", 3),
        [200, 200, 429]
    );
    // More than reserved, or not a number: said in error.log, the reservation stays.
    assert_eq!(
        reservations(&nginx, "/reserve", "c", "12", 3),
        [200, 200, 429]
    );
    assert_eq!(
        reservations(&nginx, "/reserve", "d", "lots", 3),
        [200, 200, 429]
    );
    // above=clamp: the same, unsaid. above=debt: 15 owed at the first call's stamp, 25 of
    // 20 held until it leaves.
    assert_eq!(
        reservations(&nginx, "/clamped", "e", "12", 3),
        [200, 200, 429]
    );
    assert_eq!(reservations(&nginx, "/owed", "o", "25", 3), [200, 429, 429]);
    let r = nginx.get("/owed?user=o&cost=1&used=1");
    let wait: u64 = r.header("Retry-After").unwrap().parse().unwrap();
    assert!(r.status == 429 && (59..=60).contains(&wait), "{wait}");
    let log = nginx.error_log();
    let above = "slidewin_limit: settle 12 is above the cost reserved (10); the reservation stays";
    assert_eq!(log.matches(above).count(), 2, "{log}");
    assert!(
        log.contains(
            "slidewin_limit: settle must be a non-negative integer, got \"lots\"; the reservation of 10 stays"
        ),
        "{log}"
    );
}

/// `limit=`: a key's own limits from a `map` of plans (an unknown plan: the zone's), or a
/// constant; a bad value from a variable is a 500 with a line naming it.
#[test]
fn a_key_takes_its_own_limits_from_a_variable() {
    let http = r#"slidewin_zone plans size=1m log 2/1s max_limit=10 buckets 100/1h bucket=1m max_limit=200;
    map $arg_plan $plan_limits { default ""; pro "5,150"; zero "0,10"; short "5"; }"#;
    let locations = r#"location = /plan {
            slidewin_limit plans key=$arg_user limit=$plan_limits;
            empty_gif;
        }
        location = /fixed {
            slidewin_limit plans key=$arg_user limit=4,100;
            empty_gif;
        }"#;
    let nginx = start_with("plans.conf", http, locations);
    let statuses = |path: &str, n| -> Vec<u16> { (0..n).map(|_| nginx.get(path).status).collect() };
    assert_eq!(statuses("/plan?user=a", 3), [200, 200, 429]);
    assert_eq!(
        statuses("/plan?user=b&plan=pro", 6),
        [200, 200, 200, 200, 200, 429]
    );
    assert_eq!(statuses("/fixed?user=c", 5), [200, 200, 200, 200, 429]);
    // The headers tell each key its own limits.
    let policy = |path: &str| {
        nginx
            .get(path)
            .header("RateLimit-Policy")
            .map(str::to_string)
    };
    assert_eq!(
        policy("/plan?user=d&plan=pro").as_deref(),
        Some(r#""plans";q=5;w=1, "plans-1h";q=150;w=3600"#)
    );
    assert_eq!(
        policy("/plan?user=e").as_deref(),
        Some(r#""plans";q=2;w=1, "plans-1h";q=100;w=3600"#)
    );
    for (plan, said) in [
        ("zero", "got \"0,10\": limit must be a positive integer"),
        (
            "short",
            "got \"5\": limits must be one limit per window of the rule, got 1",
        ),
    ] {
        assert_eq!(nginx.get(&format!("/plan?user=f&plan={plan}")).status, 500);
        let log = nginx.error_log();
        let line = format!(
            "slidewin_limit: limit must be 2 limit(s) of zone \"plans\", one per window, {said}"
        );
        assert!(log.contains(&line), "{line}\n{log}");
    }
}

#[test]
fn every_option_answers_as_documented() {
    let zone = "slidewin_zone all size=1m max_key_bytes=32 log 2/1s name=per-second \
                buckets 100/1h bucket=1m max_limit=200 counter 5/10s;";
    let locations = r#"location = /dry {
            slidewin_limit all key=$arg_user dry_run;
            add_header X-Status $slidewin_status always;
            empty_gif;
        }
        location = /cost {
            slidewin_limit all key=$arg_user cost=$arg_cost status=503 headers=x-ratelimit;
            empty_gif;
        }
        location = /pair {
            slidewin_limit all key=$arg_user.$arg_team;
            empty_gif;
        }"#;
    let nginx = start_with("all.conf", zone, locations);
    let dry: Vec<(u16, String)> = (0..3)
        .map(|_| {
            let r = nginx.get("/dry?user=d");
            (r.status, r.header("X-Status").unwrap_or("-").to_string())
        })
        .collect();
    let passed = |s: &str| (200, s.to_string());
    assert_eq!(
        dry,
        [
            passed("PASSED"),
            passed("PASSED"),
            passed("REJECTED_DRY_RUN")
        ]
    );
    let r = nginx.get("/dry?user=p");
    assert_eq!(
        r.header("RateLimit-Policy"),
        Some(r#""per-second";q=2;w=1, "all-1h";q=100;w=3600, "all-10s";q=5;w=10"#)
    );
    let r = nginx.get("/cost?user=c&cost=2");
    assert_eq!(
        (r.status, r.header("X-RateLimit-Remaining")),
        (200, Some("0"))
    );
    let r = nginx.get("/cost?user=c&cost=1");
    assert_eq!((r.status, r.header("Retry-After")), (503, Some("1")));
    let r = nginx.get("/cost?user=big&cost=3");
    assert_eq!(
        (r.status, r.header("Retry-After")),
        (503, None),
        "never fits: no wait"
    );
    assert_eq!(nginx.get("/cost?user=c&cost=abc").status, 500);
    assert!(nginx
        .error_log()
        .contains("slidewin_limit: cost must be a non-negative integer, got \"abc\""));
    assert_eq!(
        nginx.get("/cost?cost=1").status,
        200,
        "an empty key is not limited"
    );
    let pair = |query| nginx.get(&format!("/pair?{query}")).status;
    assert_eq!(
        [
            pair("user=a&team=x"),
            pair("user=a&team=x"),
            pair("user=a&team=x")
        ],
        [200, 200, 429],
        "a key of two variables"
    );
    assert_eq!(pair("user=a&team=y"), 200, "another team, another key");
}

/// The lines of the usage histogram of zone `zone` in `metrics`.
fn usage_histogram<'m>(metrics: &'m str, zone: &str) -> Vec<&'m str> {
    let limiter = format!("limiter=\"{zone}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("slidewin_window_usage_ratio_") && l.contains(&limiter))
        .collect()
}

#[test]
fn metrics_count_every_key_in_the_usage_bucket_of_its_window_nearest_the_limit() {
    let zones = "slidewin_zone usage size=64k log 4/1m;\n    \
                 slidewin_zone near size=64k log 10/1m log 4/1h;\n    \
                 slidewin_zone thirds size=64k log 3/1m;";
    let locations =
        "location = /usage { slidewin_limit usage key=$arg_user; empty_gif; }\n        \
                     location = /near { slidewin_limit near key=$arg_user; empty_gif; }\n        \
                     location = /thirds { slidewin_limit thirds key=$arg_user; empty_gif; }";
    let nginx = start_with("usage.conf", zones, locations);
    // Keys at 1, 2, 3 and 4 of 4, and one refused once at 4 of 4.
    for (key, requests) in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)] {
        for _ in 0..requests {
            nginx.get(&format!("/usage?user={key}"));
        }
    }
    // 3 of 10 a minute, 3 of 4 an hour: the hour's window is the nearest.
    for _ in 0..3 {
        nginx.get("/near?user=x");
    }
    // Two keys at 1 of 3: a sum of 2/3, written as the Lua layer writes it (%.9g).
    for user in ["p", "q"] {
        nginx.get(&format!("/thirds?user={user}"));
    }
    let metrics = nginx.get("/metrics").body;
    promtool_check(&metrics);
    let bucket = |zone: &str, le: &str, n: u32| {
        format!("slidewin_window_usage_ratio_bucket{{limiter=\"{zone}\",le=\"{le}\"}} {n}")
    };
    let histogram = |zone: &str, counts: [u32; 6], sum: &str| {
        let les = ["0.25", "0.5", "0.75", "0.9", "1", "+Inf"];
        let mut lines: Vec<String> = les
            .iter()
            .zip(counts)
            .map(|(le, n)| bucket(zone, le, n))
            .collect();
        lines.push(format!(
            "slidewin_window_usage_ratio_sum{{limiter=\"{zone}\"}} {sum}"
        ));
        lines.push(format!(
            "slidewin_window_usage_ratio_count{{limiter=\"{zone}\"}} {}",
            counts[5]
        ));
        lines
    };
    assert_eq!(
        usage_histogram(&metrics, "usage"),
        histogram("usage", [1, 2, 3, 3, 5, 5], "3.5")
    );
    assert_eq!(
        usage_histogram(&metrics, "near"),
        histogram("near", [0, 0, 1, 1, 1, 1], "0.75")
    );
    assert_eq!(
        usage_histogram(&metrics, "thirds"),
        histogram("thirds", [0, 2, 2, 2, 2, 2], "0.666666667")
    );
    assert_eq!(
        usage_histogram(&metrics, "kept"),
        histogram("kept", [0; 6], "0"),
        "no key"
    );
    for (zone, n) in [("usage", 2), ("near", 0)] {
        let line = format!("slidewin_window_keys_at_limit{{limiter=\"{zone}\"}} {n}\n");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    let counted = "slidewin_requests_total{limiter=\"usage\",outcome=\"allowed\"} 14\n\
                   slidewin_requests_total{limiter=\"usage\",outcome=\"rejected\"} 1\n";
    assert!(metrics.contains(counted), "{metrics}");
}

#[test]
fn a_dry_runs_refusals_count_as_would_reject_apart_from_enforced_ones() {
    let zones = "slidewin_zone trial size=64k log 2/1m;\n    \
                 slidewin_zone mixed size=64k log 2/1m;";
    let locations =
        "location = /trial { slidewin_limit trial key=$arg_user dry_run; empty_gif; }\n        \
         location = /mixed { slidewin_limit mixed key=$arg_user; empty_gif; }\n        \
         location = /mixed-trial { slidewin_limit mixed key=$arg_user dry_run; empty_gif; }";
    let nginx = start_with("trial.conf", zones, locations);
    let statuses = |uri: &str| -> Vec<u16> { (0..3).map(|_| nginx.get(uri).status).collect() };
    assert_eq!(statuses("/trial?user=a"), [200, 200, 200]);
    assert_eq!(statuses("/mixed?user=a"), [200, 200, 429]);
    assert_eq!(statuses("/mixed-trial?user=b"), [200, 200, 200]);
    let metrics = nginx.get("/metrics").body;
    promtool_check(&metrics);
    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("slidewin_requests_total{limiter=\"trial\"")
                || l.starts_with("slidewin_requests_total{limiter=\"mixed\"")
        })
        .collect();
    assert_eq!(
        requests,
        [
            "slidewin_requests_total{limiter=\"trial\",outcome=\"allowed\"} 2",
            "slidewin_requests_total{limiter=\"trial\",outcome=\"rejected\"} 0",
            "slidewin_requests_total{limiter=\"trial\",outcome=\"would_reject\"} 1",
            "slidewin_requests_total{limiter=\"mixed\",outcome=\"allowed\"} 4",
            "slidewin_requests_total{limiter=\"mixed\",outcome=\"rejected\"} 1",
            "slidewin_requests_total{limiter=\"mixed\",outcome=\"would_reject\"} 1",
        ],
        "in a zone both kinds of limit use, each refusal is counted as what it was"
    );
}

#[test]
fn a_refusal_is_logged_at_the_level_slidewin_limit_log_level_sets() {
    let zones = "slidewin_zone logged size=64k log 1/1h name=per-hour;";
    let locations = "location = /warned { slidewin_limit_log_level warn; \
                       slidewin_limit logged key=$arg_user cost=$arg_cost; empty_gif; }\n        \
         location = /trial { slidewin_limit logged key=$arg_user dry_run; empty_gif; }\n        \
         location = /quiet { slidewin_limit_log_level info; \
                       slidewin_limit logged key=$arg_user; empty_gif; }";
    let nginx = start_with("logged.conf", zones, locations);
    let status = |uri: &str| nginx.get(uri).status;
    assert_eq!(status("/warned?user=a&cost=1"), 200);
    assert_eq!(status("/warned?user=a&cost=1"), 429);
    assert_eq!(status("/warned?user=b&cost=2"), 429, "never fits");
    assert_eq!(status("/trial?user=a"), 200, "a dry run lets it through");
    assert_eq!(status("/quiet?user=a"), 429);
    // error.log is at notice: the info line is left out. nginx appends the client and request.
    let log = nginx.error_log();
    let refusals: Vec<String> = log
        .lines()
        .filter_map(|l| {
            let level = &l[l.find('[')?..=l.find(']')?];
            let from = l.find("limiting requests")?;
            let to = l[from..].find(", server:")? + from;
            Some(format!("{level} {}", &l[from..to]))
        })
        .collect();
    let full = |dry_run: &str| {
        format!(
            "limiting requests{dry_run} by zone \"logged\": window \"per-hour\" full, \
             retry after 3600 s, client: 127.0.0.1"
        )
    };
    assert_eq!(
        refusals,
        [
            format!("[warn] {}", full("")),
            "[warn] limiting requests by zone \"logged\": cost 2 never fits window \"per-hour\", \
             client: 127.0.0.1"
                .to_string(),
            format!("[error] {}", full(", dry run,")),
        ],
        "{log}"
    );
}

/// 8 clients on 50 keys in turn, as fast as they go, for `ms` on `path` (`?user=` added):
/// the admissions of each key at their decision's time (`$slidewin_msec` in `log`).
fn fifty_keys(nginx: &Nginx, path: &str, log: &str, ms: u64) -> Vec<Vec<i64>> {
    fifty_keys_while(nginx, path, log, ms, None)
}

/// [`fifty_keys`], with `chaos` run every `every_ms` meanwhile.
fn fifty_keys_while(
    nginx: &Nginx,
    path: &str,
    log: &str,
    ms: u64,
    chaos: Option<(u64, &(dyn Fn() + Sync))>,
) -> Vec<Vec<i64>> {
    let deadline = Instant::now() + Duration::from_millis(ms);
    let port = nginx.port();
    thread::scope(|s| {
        for client in 0..8 {
            s.spawn(move || {
                let mut key = client;
                while Instant::now() < deadline {
                    try_get(port, &format!("{path}?user=k{}", key % 50));
                    key += 1;
                }
            });
        }
        while let Some((every_ms, chaos)) = chaos.filter(|_| Instant::now() < deadline) {
            thread::sleep(Duration::from_millis(every_ms));
            chaos();
        }
    });
    let text = std::fs::read_to_string(nginx.prefix.dir.join("logs").join(log)).unwrap();
    let mut keys = vec![Vec::new(); 50];
    for line in text.lines().filter(|l| l.ends_with(" 200")) {
        let [at, key, _] = line.split(' ').collect::<Vec<_>>()[..] else {
            panic!("{line}")
        };
        let ms = at.replace('.', "").parse::<i64>().unwrap();
        keys[key[1..].parse::<usize>().unwrap()].push(ms);
    }
    keys.iter_mut().for_each(|k| k.sort());
    keys
}

/// The field report's rule (two bucket windows), 50 keys, a worker SIGKILLed every 300 ms:
/// no key's window holds more than its limit, replayed at the decisions' own times.
#[test]
fn fifty_keys_on_buckets_keep_every_window_through_kills() {
    let nginx = start("native.conf", 4);
    let kill = || {
        if let Some(&pid) = worker_pids(&nginx).first() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    };
    let keys = fifty_keys_while(&nginx, "/bk", "bk.log", 12_000, Some((300, &kill)));
    for (key, times) in keys.iter().enumerate() {
        assert!(busiest(times, 1_000) <= 10, "k{key}: {times:?}");
        assert!(busiest(times, 10_000) <= 50, "k{key}: {times:?}");
    }
    assert!(keys.iter().all(|t| t.len() >= 50), "every key was served");
    assert!(nginx.error_log().contains("exited on signal 9"));
}

#[test]
fn a_zone_too_small_warns_and_with_full_refuse_admits_no_key_past_its_limit() {
    // Logged with native.conf's format "keyed": "$slidewin_msec $arg_user $status".
    let http = "slidewin_zone small size=32k log 10/1s log 50/10s;\n    \
                slidewin_zone tight size=32k full=refuse log 10/1s log 50/10s;";
    let locations = "location = /small { slidewin_limit small key=$arg_user; empty_gif; \
                     access_log {{prefix}}/logs/small.log keyed; }\n        \
                     location = /tight { slidewin_limit tight key=$arg_user; empty_gif; \
                     access_log {{prefix}}/logs/tight.log keyed; }";
    let nginx = start_with("full.conf", http, locations);

    let tight = fifty_keys(&nginx, "/tight", "tight.log", 2_500);
    for (key, times) in tight.iter().enumerate() {
        assert!(most_in(times, 1_000) <= 10, "k{key}: {times:?}");
        assert!(times.len() <= 50, "k{key}: {}", times.len());
    }
    // 24 ways in 3 sets of 8: a key is refused only while its set is full. The zone's random
    // seed spreads the 50 keys over the sets, so a set draws fewer than 8 of them in 0.5% of
    // runs and its free ways stay unused; 4 or more ways unused: 8 runs in 100,000.
    let admitted = tight.iter().filter(|t| !t.is_empty()).count();
    assert!(
        (21..=24).contains(&admitted),
        "every way of a set the keys fill is used: {admitted} keys admitted"
    );
    let metrics = nginx.get("/metrics").body;
    let evicted = "slidewin_evictions_total{limiter=\"tight\"} 0\n";
    assert!(metrics.contains(evicted), "{metrics}");
    assert!(!nginx.error_log().contains("\"tight\" is full"));

    let small = fifty_keys(&nginx, "/small", "small.log", 2_500);
    let over = small.iter().filter(|t| most_in(t, 1_000) > 10).count();
    assert!(over > 0, "evictions forget windows: {small:?}");
    let warning = nginx.error_log();
    let warning = warning
        .lines()
        .find(|l| l.contains("slidewin_zone \"small\" is full: "));
    let warning = warning.unwrap_or_else(|| panic!("{}", nginx.error_log()));
    assert!(warning.contains("[warn]"), "{warning}");
    assert!(
        warning.contains("it holds 24 keys: raise size= or set full=refuse"),
        "{warning}"
    );
}

/// `nginx -t` on `text` written as `conf/<name>` of `prefix`: its exit status and stderr.
fn nginx_t(prefix: &Prefix, name: &str, text: &str) -> (std::process::ExitStatus, String) {
    std::fs::write(prefix.dir.join("conf").join(name), text).unwrap();
    let out = prefix.command(name).arg("-t").output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_first_config_of_the_docs_passes_nginx_t_as_written() {
    let module = native_module();
    let docs = std::fs::read_to_string(repo_root().join("docs/nginx-module.md")).unwrap();
    let block = docs.split("```nginx\n").nth(1).unwrap();
    let config = block.split("```").next().unwrap();
    let loaded = "load_module /usr/lib/nginx/modules/ngx_http_slidewin_module.so;";
    assert!(config.starts_with(loaded), "{config}");
    let prefix = Prefix::temporary(1);
    // The module where this checkout built it, the files under the test's prefix.
    let config = config
        .replace(loaded, &format!("load_module {};", module.display()))
        .replace(
            "events {}",
            &format!(
                "events {{}}\npid {0}/logs/nginx.pid;\nerror_log {0}/logs/error.log;",
                prefix.dir.display()
            ),
        )
        .replace(
            "listen 8080;",
            &format!("listen 127.0.0.1:{};", prefix.port),
        );
    let (status, stderr) = nginx_t(&prefix, "docs.conf", &config);
    assert!(status.success(), "{stderr}");
}

#[test]
fn spans_read_nginx_time_syntax() {
    let zone = "slidewin_zone spans size=1m log 2/1h30m log 3/1w buckets 4/1M bucket=1d \
                counter 5/1y log 6/1500;";
    let locations = "location = /spans { slidewin_limit spans key=$arg_user; empty_gif; }";
    let nginx = start_with("spans.conf", zone, locations);
    let policy = nginx
        .get("/spans?user=s")
        .header("RateLimit-Policy")
        .unwrap()
        .to_string();
    let windows = [
        "\"spans\";q=2;w=5400",
        "\"spans-7d\";q=3;w=604800",
        "\"spans-30d\";q=4;w=2592000",
        "\"spans-365d\";q=5;w=31536000",
        "\"spans-1500ms\";q=6;w=2",
    ];
    assert_eq!(policy, windows.join(", "));
}

#[test]
fn a_constant_bad_cost_fails_nginx_t_naming_the_directive_and_the_value() {
    native_module();
    let prefix = Prefix::temporary(1);
    let conf = std::fs::read_to_string(prefix.dir.join("conf/native.conf")).unwrap();
    for cost in ["-1", "abc", "1.5", "0x10", "1e3"] {
        let text = conf.replace(
            "slidewin_limit kept key=$arg_user;",
            &format!("slidewin_limit kept key=$arg_user cost={cost};"),
        );
        let (status, stderr) = nginx_t(&prefix, "bad.conf", &text);
        assert!(!status.success(), "cost={cost}: accepted");
        let said =
            format!(": slidewin_limit: cost must be a non-negative integer, got \"{cost}\" in ");
        let line = stderr.lines().find(|l| l.contains("[emerg]"));
        assert!(
            line.is_some_and(|l| l.contains(&said)),
            "cost={cost}: {stderr}"
        );
    }
}

#[test]
fn two_windows_of_one_name_fail_nginx_t_naming_the_window_and_the_name() {
    zones_fail_nginx_t(&[
        // A name= taken by another window's default name (the zone's, for the first window).
        (
            "log 5/60s log 9/1h name=kept",
            "window 2 (log 9/3600000ms) name must be unique in the zone, got \"kept\"",
        ),
        (
            "log 5/60s name=a log 9/1h name=a",
            "window 2 (log 9/3600000ms) name must be unique in the zone, got \"a\"",
        ),
    ]);
}

#[test]
fn a_bucket_given_or_missing_against_its_kind_fails_nginx_t_naming_bucket() {
    zones_fail_nginx_t(&[
        (
            "log 5/60s bucket=1s",
            "window 1 (log 5/60000ms): bucket= must be given for a buckets window alone, got 1000",
        ),
        (
            "buckets 5/60s",
            "window 1 (buckets 5/60000ms): bucket= must be a positive integer for a buckets \
             window, got 0",
        ),
    ]);
}

/// `nginx -t` refuses native.conf with zone `kept` of each case's windows, its [emerg] line
/// saying the case's words.
fn zones_fail_nginx_t(cases: &[(&str, &str)]) {
    native_module();
    let prefix = Prefix::temporary(1);
    let conf = std::fs::read_to_string(prefix.dir.join("conf/native.conf")).unwrap();
    let zone = "slidewin_zone kept size=64k log 5/60s max_limit=10;";
    for (windows, said) in cases {
        let text = conf.replace(zone, &format!("slidewin_zone kept size=64k {windows};"));
        let (status, stderr) = nginx_t(&prefix, "zones.conf", &text);
        assert!(!status.success(), "{windows}: accepted");
        let line = stderr.lines().find(|l| l.contains("[emerg]"));
        assert!(
            line.is_some_and(|l| l.contains(said)),
            "{windows}: {stderr}"
        );
    }
}

#[test]
fn a_bad_log_level_or_above_is_an_error_naming_the_directive() {
    native_module();
    let prefix = Prefix::temporary(1);
    let conf = std::fs::read_to_string(prefix.dir.join("conf/native.conf")).unwrap();
    for (lines, said) in [
        (
            "slidewin_limit api key=$arg_user limit=20,50;",
            "slidewin_limit: limit must be 2 limit(s) of zone \"api\", one per window, got \"20,50\": ",
        ),
        (
            "slidewin_limit api key=$arg_user above=debt;",
            "slidewin_limit: above must be given with settle=, got \"above=debt\"",
        ),
        (
            "slidewin_limit api key=$arg_user settle=$arg_used above=owe;",
            "slidewin_limit: above must be clamp or debt, got \"above=owe\"",
        ),
        (
            "slidewin_limit_log_level debug;",
            "slidewin_limit_log_level: the level must be one of info, notice, warn, error, got \"debug\"",
        ),
        (
            "slidewin_limit_log_level warn error;",
            "invalid number of arguments in \"slidewin_limit_log_level\" directive",
        ),
        (
            "slidewin_limit_log_level warn; slidewin_limit_log_level info;",
            "slidewin_limit_log_level: is duplicate",
        ),
    ] {
        let text = conf.replace(
            "            slidewin_metrics;",
            &format!("            {lines}\n            slidewin_metrics;"),
        );
        let (status, stderr) = nginx_t(&prefix, "bad.conf", &text);
        assert!(!status.success(), "{lines}: accepted");
        assert!(stderr.contains(said), "{lines}: {stderr}");
    }
}

/// The `(uri, start, end)` of each request of nginx's own `timing` log, in ms.
fn timings(nginx: &Nginx) -> Vec<(String, f64, f64)> {
    let log = std::fs::read_to_string(nginx.prefix.dir.join("logs/timing.log")).unwrap();
    let ms = |s: &str| s.parse::<f64>().unwrap() * 1000.0;
    log.lines()
        .map(|l| {
            let [uri, end, took] = l.split(' ').collect::<Vec<_>>()[..] else {
                panic!("{l}")
            };
            (uri.to_string(), ms(end) - ms(took), ms(end))
        })
        .collect()
}

#[test]
fn a_scrape_of_a_big_zone_lets_the_worker_serve_others_between_its_steps() {
    let http = "slidewin_zone big size=1g log 10/1s;\n    \
                log_format timing '$uri $msec $request_time';";
    let locations = "location = /plain { empty_gif; access_log {{prefix}}/logs/timing.log timing; }\n        \
                     location = /scrape { slidewin_metrics; access_log {{prefix}}/logs/timing.log timing; }";
    let nginx = start_with("big.conf", http, locations);
    let port = nginx.port();
    let scrape = thread::spawn(move || slidewin_tests::http::get(port, "/scrape").body);
    while !scrape.is_finished() {
        assert_eq!(nginx.get("/plain").status, 200);
    }
    let metrics = scrape.join().unwrap();
    assert!(
        metrics.contains("slidewin_window_usage_ratio_count{limiter=\"big\"} 0\n"),
        "{metrics}"
    );
    // One worker, so what it answered while the scrape was under way (by its own clock), it
    // answered between two of the scrape's steps.
    let timings = timings(&nginx);
    let (_, start, end) = timings.iter().find(|t| t.0 == "/scrape").unwrap().clone();
    let between = timings
        .iter()
        .filter(|(uri, _, at)| uri == "/plain" && *at > start && *at < end)
        .count();
    assert!(
        between >= 5,
        "{between} requests answered during a scrape of {} ms: {timings:?}",
        end - start
    );
}

/// A line that must be refused: a directive with at least one bad argument among good ones.
fn malformed(random: &mut Random) -> (&'static str, String) {
    const ZONE_GOOD: [&str; 6] = [
        "size=1m",
        "log 10/1s",
        "buckets 100/1h bucket=1m",
        "counter 5/10s",
        "max_key_bytes=32",
        "log 20/1m max_limit=40",
    ];
    const ZONE_BAD: [&str; 27] = [
        "size=0",
        "size=1k",
        "size=10x",
        "size=",
        "size=99999999999999999999999g",
        "size=2g",
        "log",
        "log 0/1s",
        "log 10/0s",
        "log 10/1x",
        "log 10/30m1h",
        "log 10/1h1h",
        "log -5/1s",
        "buckets 10/1s",
        "log 10/1s bucket=1m",
        "buckets 10/1s bucket=0",
        "log 10/1s max_limit=0",
        "log 10/1s max_limit=5",
        "log 10/1s name=a\"b",
        "max_key_bytes=0",
        "max_key_bytes=15",
        "max_key_bytes=99999",
        "weird",
        "10/1s",
        "log 1/1s log 1/1s log 1/1s log 1/1s log 1/1s log 1/1s log 1/1s log 1/1s log 1/1s",
        "log 99999999999999999999/1s",
        "log 10/1s name=x log 10/2s name=x",
    ];
    const LIMIT_GOOD: [&str; 8] = [
        "limit=$arg_limits",
        "key=$arg_user",
        "cost=2",
        "settle=$arg_used",
        "settle=$arg_used above=debt",
        "status=503",
        "dry_run",
        "headers=x-ratelimit",
    ];
    const LIMIT_BAD: [&str; 25] = [
        "key=",
        "limit=",
        "limit=5",
        "above=owe",
        "above=",
        "settle=5",
        "settle=",
        "cost=-1",
        "cost=abc",
        "cost=1.5",
        "cost=0x10",
        "cost=1e3",
        "key=${user",
        "cost=",
        "cost=${",
        "status=200",
        "status=600",
        "status=abc",
        "headers=foo",
        "headers=",
        "dry-run",
        "zone=api",
        "key",
        "nokey",
        "rate=10r/s",
    ];
    let zone = random.below(2) == 0;
    let (good, bad): (&[&str], &[&str]) = if zone {
        (&ZONE_GOOD, &ZONE_BAD)
    } else {
        (&LIMIT_GOOD, &LIMIT_BAD)
    };
    let mut args: Vec<&str> = (0..random.below(4)).map(|_| random.pick(good)).collect();
    args.insert(
        random.below(args.len() as u64 + 1) as usize,
        random.pick(bad),
    );
    let name = random.pick(&["fresh", "fresh", "fresh", "api", "bad name", "", "\"x y\""]);
    let (directive, name) = match zone {
        true => (
            "slidewin_zone",
            if name == "fresh" {
                format!("z{}", random.below(1000))
            } else {
                name.to_string()
            },
        ),
        false => (
            "slidewin_limit",
            if name == "fresh" {
                "api".to_string()
            } else {
                name.to_string()
            },
        ),
    };
    let size = if zone && !args.iter().any(|a| a.starts_with("size=")) {
        " size=1m"
    } else {
        ""
    };
    (
        directive,
        format!("{directive} {name}{size} {};", args.join(" ")),
    )
}

#[test]
fn two_hundred_malformed_directives_each_fail_nginx_t_naming_the_directive() {
    native_module();
    let prefix = Prefix::temporary(1);
    let conf = std::fs::read_to_string(prefix.dir.join("conf/native.conf")).unwrap();
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2026);
    println!("FUZZ_SEED={seed}");
    let mut random = Random(seed);
    for _ in 0..200 {
        let (directive, line) = malformed(&mut random);
        let text = match directive {
            // Zones in http, limits in a location.
            "slidewin_zone" => conf.replace(
                "    slidewin_zone kept",
                &format!("    {line}\n    slidewin_zone kept"),
            ),
            _ => conf.replace(
                "            slidewin_metrics;",
                &format!("            {line}\n            slidewin_metrics;"),
            ),
        };
        assert_ne!(text, conf);
        let (status, stderr) = nginx_t(&prefix, "bad.conf", &text);
        assert!(
            status.code().is_some(),
            "{line}: nginx -t was killed by a signal"
        );
        assert!(!status.success(), "{line}: accepted");
        let named = stderr
            .lines()
            .any(|l| l.contains("[emerg]") && l.contains(directive));
        assert!(named, "{line}: {stderr}");
    }
}
