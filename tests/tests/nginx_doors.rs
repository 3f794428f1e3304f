//! One region, two doors (nginx/doors.conf): the zone nginx.conf's `slidewin_zone api`
//! declares, in resty.slidewin's registry as limiter "native" (store "nginx"), is listed and
//! changed by the admin location, named by its top keys, counted in /metrics and /stats.json,
//! and a limit set there holds for the native `slidewin_limit` in every worker, also after a
//! reload; a config that names no zone of nginx.conf, or repeats its windows, is an error
//! naming it.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http;
use slidewin_tests::load::{reload, worker_pids};
use slidewin_tests::metrics::{promtool_check, sample};
use slidewin_tests::nginx::{native_module, Nginx, Prefix};

const WINDOWS_AT_8: &str = r#"[{"name":"api","limit":10,"max_limit":10,"window_ms":1000},{"name":"api-10s","limit":8,"max_limit":50,"window_ms":10000}]"#;

fn start(workers: u32) -> Nginx {
    native_module();
    Nginx::start("doors.conf", workers)
}

/// The body of `path`, asserting 200.
fn read(nginx: &Nginx, path: &str) -> String {
    let r = nginx.get(path);
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.body
}

fn assert_has(body: &str, part: &str) {
    assert!(body.contains(part), "{part}\nnot in\n{body}");
}

/// `clients` threads each sending `each` requests of `/native?user=<key>` at once: the
/// statuses, and the workers that answered.
fn concurrent(nginx: &Nginx, key: &str, clients: usize, each: usize) -> (Vec<u16>, BTreeSet<u32>) {
    let port = nginx.port();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let path = format!("/native?user={key}");
            thread::spawn(move || {
                (0..each)
                    .map(|_| {
                        let r = http::get(port, &path);
                        (
                            r.status,
                            r.header("X-Worker").unwrap().parse::<u32>().unwrap(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let answers: Vec<(u16, u32)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    (
        answers.iter().map(|a| a.0).collect(),
        answers.iter().map(|a| a.1).collect(),
    )
}

#[test]
fn the_admin_location_reads_and_sets_a_zone_of_nginx_conf_in_every_worker() {
    let nginx = start(4);
    assert_has(
        &read(&nginx, "/slidewin/limits"),
        r#""native":[{"name":"api","limit":10,"max_limit":10,"window_ms":1000},{"name":"api-10s","limit":50,"max_limit":50,"window_ms":10000}]"#,
    );

    let hog: Vec<u16> = (0..12)
        .map(|_| nginx.get("/native?user=hog").status)
        .collect();
    assert_eq!(hog, [[200; 10].as_slice(), &[429; 2]].concat());
    assert_has(
        &read(&nginx, "/slidewin/top?n=1"),
        r#""native":{"live":1,"at_limit":1,"refused":[{"key":"hog","count":10,"limit":10,"window":1,"refused":2}]"#,
    );
    assert_has(
        &read(&nginx, "/slidewin/top?key=hog"),
        r#""native":{"allowed":false,"count":10,"limit":10,"window":1,"remaining":0,"#,
    );

    // Out of range: refused, naming the bound; nothing changes.
    let over = http::admin_post(
        nginx.port(),
        "/slidewin/limits?limiter=native&limit=51&window=api-10s",
    );
    assert_eq!(over.status, 400);
    assert_eq!(
        over.body,
        "limit must be a positive integer at most max_limit (50), got 51\n"
    );
    let set = http::send(
        nginx.port(),
        "PUT",
        "/slidewin/limits?limiter=native&limit=8&window=api-10s",
        &[("X-Slidewin-Admin", "1")],
        "",
    );
    assert_eq!((set.status, set.body.trim()), (200, WINDOWS_AT_8));
    assert_has(
        &nginx.error_log(),
        r#"set limiter "native" window 2 ("api-10s") limit 50 -> 8"#,
    );

    // 8 clients at once, 40 requests over the 4 workers: the native door admits exactly 8.
    let (statuses, workers) = concurrent(&nginx, "low", 8, 5);
    let admitted = statuses.iter().filter(|&&s| s == 200).count();
    let refused = statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!((admitted, refused), (8, 32), "{statuses:?}");
    let all: BTreeSet<u32> = worker_pids(&nginx).into_iter().collect();
    // reuseport spreads 40 connections over the 4 workers: one left out is a chance in 25,000.
    assert_eq!(workers, all);

    // The Lua door decides on the same words, with the same policy.
    let policy = r#""api";q=10;w=1, "api-10s";q=8;w=10"#;
    let lua = nginx.get("/lua-native?user=low");
    assert_eq!(
        (lua.status, lua.header("RateLimit-Policy")),
        (429, Some(policy))
    );
    let fresh = nginx.get("/native?user=fresh");
    assert_eq!(
        (fresh.status, fresh.header("RateLimit-Policy")),
        (200, Some(policy))
    );

    // Counted in the zone by both doors: hog 10 + 2, low 8 + 32 + 1, fresh 1.
    let metrics = read(&nginx, "/metrics");
    promtool_check(&metrics);
    let count = |m: &str| sample(&metrics, m);
    assert_eq!(
        count(r#"slidewin_requests_total{limiter="native",outcome="allowed"}"#),
        19
    );
    assert_eq!(
        count(r#"slidewin_requests_total{limiter="native",outcome="rejected"}"#),
        35
    );
    assert_eq!(count(r#"slidewin_keys{limiter="native"}"#), 3);
    // hog (10 of 8 in 10 s) and low (8 of 8) are at their limit; fresh is not.
    assert_eq!(
        count(r#"slidewin_window_keys_at_limit{limiter="native"}"#),
        2
    );
    assert_has(
        &read(&nginx, "/stats.json"),
        r#""native":{"allowed":19,"rejected":35,"store_errors":0,"keys":3}"#,
    );
    assert_eq!(
        read(&nginx, "/slidewin/limits")
            .matches(WINDOWS_AT_8)
            .count(),
        1
    );
}

#[test]
fn a_native_dry_runs_refusal_is_a_would_be_one_through_both_doors() {
    let nginx = start(1);
    // One a second, for every door at once: each request below after the first is refused.
    assert_eq!(read(&nginx, "/native-zone?op=limit&n=1").trim(), "ok");
    let statuses: Vec<u16> = ["/native", "/native-trial", "/native", "/lua-native"]
        .iter()
        .map(|path| nginx.get(&format!("{path}?user=trial")).status)
        .collect();
    assert_eq!(
        statuses,
        [200, 200, 429, 429],
        "the dry run lets its request through"
    );
    let native = read(&nginx, "/native-metrics");
    promtool_check(&native);
    let requests = |metrics: &str, limiter: &str, outcome: &str| {
        sample(
            metrics,
            &format!(r#"slidewin_requests_total{{limiter="{limiter}",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!(requests(&native, "api", "allowed"), 1);
    assert_eq!(requests(&native, "api", "rejected"), 2);
    assert_eq!(requests(&native, "api", "would_reject"), 1);
    // The Lua door's view of the same zone: the enforced refusals, its own included, and the
    // native dry run's would-be one.
    let lua = read(&nginx, "/metrics");
    promtool_check(&lua);
    assert_eq!(requests(&lua, "native", "allowed"), 1);
    assert_eq!(requests(&lua, "native", "rejected"), 2);
    assert_eq!(requests(&lua, "native", "would_reject"), 1);
}

#[test]
fn both_doors_send_the_window_names_nginx_conf_gives() {
    let nginx = start(1);
    let native = nginx.get("/native-named?user=a");
    let policy = r#""per-second";q=5;w=1, "named-1m";q=20;w=60"#;
    assert_eq!(
        (native.status, native.header("RateLimit-Policy")),
        (200, Some(policy))
    );
    // The Lua door's limiter carries the names the module gives (lim:rule()), and its
    // limiter of store "nginx" renders the same policy.
    assert_eq!(
        eval(
            &nginx,
            r#"local windows = require("slidewin").nginx_zone("named"):rule().windows
               local sw = assert(require("resty.slidewin").new{ name = "named", store = "nginx" })
               return windows[1].name .. "," .. windows[2].name .. " " .. sw.policy_header"#
        ),
        format!("per-second,named-1m {policy}")
    );
}

/// `lua` run in a worker through /eval: its output, asserting 200.
fn eval(nginx: &Nginx, lua: &str) -> String {
    let r = nginx.eval(lua);
    assert_eq!(r.status, 200, "{lua}: {}", r.body);
    r.body
}

#[test]
fn a_config_naming_no_zone_of_nginx_conf_or_its_windows_is_an_error_naming_it() {
    let nginx = start(1);
    let new = |fields: &str| {
        eval(
            &nginx,
            &format!(
                r#"local sw, err = require("resty.slidewin").new{{ name = "x", store = "nginx", {fields} }}
                   return err"#
            ),
        )
    };
    let missing = "no slidewin_zone \"nope\" in this worker's nginx.conf (nginx maps its zones \
                   after init_by_lua*: open one in a worker)";
    assert_eq!(new(r#"zone = "nope""#), format!("zone \"nope\": {missing}"));
    assert_eq!(
        new("zone = 42"),
        "zone must be the name of a slidewin_zone in nginx.conf, got 42"
    );
    assert_eq!(
        new(r#"zone = "api", limit = 5"#),
        "limit is nginx.conf's: store \"nginx\" takes the windows of its slidewin_zone, got limit = 5"
    );
    // Made in a worker, a registry makes it at once; its error stays in the registry.
    assert_eq!(
        eval(
            &nginx,
            r#"local limits = require("resty.slidewin.registry").new{ x = { store = "nginx", zone = "nope" } }
               return select(2, limits:get("x"))"#
        ),
        format!("zone \"nope\": {missing}")
    );
    // The zone's name by default is the limiter's; decisions and limits are the zone's.
    assert_eq!(
        eval(
            &nginx,
            r#"local sw = assert(require("resty.slidewin").new{ name = "api", store = "nginx" })
               return table.concat(sw:limits(), " ") .. " " .. sw.windows[2].name"#
        ),
        "10 50 api-10s"
    );
}

/// nginx.conf's doors.conf with `from` replaced by `to`, started with 2 workers.
fn start_changed(from: &str, to: &str) -> Nginx {
    native_module();
    let prefix = Prefix::temporary(2);
    let conf = prefix.dir.join("conf/doors.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains(from), "{from}");
    std::fs::write(&conf, text.replace(from, to)).unwrap();
    Nginx::start_in(prefix, "doors.conf", &[])
}

const NATIVE: &str = r#"native = { store = "nginx", zone = "api" },"#;

#[test]
fn a_registry_of_init_by_lua_makes_its_nginx_zones_in_each_worker_or_says_why_not() {
    let ghost = format!(r#"{NATIVE} ghost = {{ store = "nginx", zone = "ghost" }},"#);
    let nginx = start_changed(NATIVE, &ghost);
    let missing = "no slidewin_zone \"ghost\" in this worker's nginx.conf";
    // init_worker() says which limiter failed (each worker, once it runs); the others are
    // made all the same.
    let said = format!("registry: limiter \"ghost\": zone \"ghost\": {missing}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while nginx.error_log().matches(&said).count() < 2 {
        assert!(
            Instant::now() < deadline,
            "{said}\nnot twice in\n{}",
            nginx.error_log()
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        eval(&nginx, r#"return select(2, require("limits"):get("ghost"))"#),
        format!("zone \"ghost\": {missing} (nginx maps its zones after init_by_lua*: open one in a worker)")
    );
    assert_has(
        &read(&nginx, "/slidewin/limits"),
        r#""native":[{"name":"api""#,
    );
    drop(nginx);

    // Without init_worker(), the registry says what makes the limiter, and lists it nowhere.
    let nginx = start_changed(
        r#"init_worker_by_lua_block { assert(require("resty.slidewin").init_worker()) }"#,
        "",
    );
    assert_eq!(
        eval(
            &nginx,
            r#"return select(2, require("limits"):get("native"))"#
        ),
        "limiter \"native\" (store \"nginx\") is made in each worker: call \
         require(\"resty.slidewin\").init_worker() in init_worker_by_lua*"
    );
    assert_eq!(nginx.get("/lua-native?user=a").status, 500);
    assert!(!read(&nginx, "/slidewin/limits").contains("native"));
}

#[test]
fn a_limit_set_through_the_admin_location_outlives_a_reload_of_the_same_nginx_conf() {
    let nginx = start(2);
    let set = http::admin_post(
        nginx.port(),
        "/slidewin/limits?limiter=native&limit=8&window=api-10s",
    );
    assert_eq!((set.status, set.body.trim()), (200, WINDOWS_AT_8));
    let statuses = |n| -> Vec<u16> { (0..n).map(|_| nginx.get("/native?user=r").status).collect() };
    assert_eq!(statuses(9), [[200; 8].as_slice(), &[429]].concat());

    reload(&nginx);
    let kept = "slidewin_zone \"api\": kept with its keys";
    let deadline = Instant::now() + Duration::from_secs(10);
    while !nginx.error_log().contains(kept) {
        assert!(Instant::now() < deadline, "{}", nginx.error_log());
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500)); // the old workers drain
                                               // nginx.conf's limit did not change, so the live one stays; the new workers' registry
                                               // reads it, and the key keeps its window.
    assert_has(
        &read(&nginx, "/slidewin/limits"),
        &format!(r#""native":{WINDOWS_AT_8}"#),
    );
    assert_eq!(statuses(1), [429]);
}
