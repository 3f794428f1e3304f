//! resty.slidewin and the slidewin module inside real nginx (nginx/test.conf).

use std::os::unix::fs::PermissionsExt;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::Response;
use slidewin_tests::nginx::Nginx;

fn get_many(nginx: &Nginx, path: &str, n: usize) -> Vec<Response> {
    (0..n).map(|_| nginx.get(path)).collect()
}

fn statuses(responses: &[Response]) -> Vec<u16> {
    responses.iter().map(|r| r.status).collect()
}

#[test]
fn local_store_admits_exactly_the_limit_then_429_until_the_window_passes() {
    let nginx = Nginx::start("test.conf", 1);
    let started = Instant::now();
    let responses = get_many(&nginx, "/limit/local?user=alice", 31);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "too slow for a 2 s window"
    );
    assert_eq!(statuses(&responses[..30]), vec![200; 30]);
    for (i, r) in responses[..30].iter().enumerate() {
        assert_eq!(r.header("RateLimit-Policy"), Some("\"local\";q=30;w=2"));
        assert_eq!(
            r.header("RateLimit"),
            Some(format!("\"local\";r={};t=2", 29 - i).as_str())
        );
    }
    let refused = &responses[30];
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body, "Too Many Requests\n");
    let retry: u64 = refused
        .header("Retry-After")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "Retry-After {retry}");
    assert_eq!(
        refused.header("RateLimit-Policy"),
        Some("\"local\";q=30;w=2")
    );
    assert_eq!(
        refused.header("RateLimit"),
        Some(format!("\"local\";r=0;t={retry}").as_str())
    );
    // Another client has its own window.
    assert_eq!(nginx.get("/limit/local?user=bob").status, 200);

    thread::sleep(Duration::from_millis(2100));
    let again = nginx.get("/limit/local?user=alice");
    assert_eq!(again.status, 200);
    assert_eq!(again.header("RateLimit"), Some("\"local\";r=29;t=2"));
}

/// 8 clients at once against `path`; the responses, with the worker that answered each.
fn hammer(nginx: &Nginx, path: &str, clients: usize, per_client: usize) -> Vec<Response> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| s.spawn(|| get_many(nginx, path, per_client)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

#[test]
fn shdict_store_holds_the_limit_across_two_workers_under_concurrency() {
    let nginx = Nginx::start("test.conf", 2);
    let started = Instant::now();
    let responses = hammer(&nginx, "/limit/shared?user=carol", 8, 40);
    let elapsed_ms = started.elapsed().as_millis() as u64;
    let admitted = responses.iter().filter(|r| r.status == 200).count() as u64;
    let workers: std::collections::BTreeSet<_> = responses
        .iter()
        .filter_map(|r| r.header("X-Worker"))
        .collect();
    assert_eq!(workers.len(), 2, "both workers served: {workers:?}");
    assert!(responses.iter().all(|r| r.status == 200 || r.status == 429));
    // Limit 100 per 60 s. Within one fixed window the counter is exact; if the burst straddles
    // a window boundary the previous window's weight falls by elapsed/window (documented error).
    let slack = 100 * elapsed_ms / 60_000 + 1;
    assert!(
        (100..=100 + slack).contains(&admitted),
        "admitted {admitted}, slack {slack}"
    );

    let metrics = nginx.get("/metrics").body;
    assert!(
        metrics.contains(&format!(
            "slidewin_requests_total{{limiter=\"shared\",outcome=\"allowed\"}} {admitted}\n"
        )),
        "{metrics}"
    );
    let rejected = 320 - admitted;
    assert!(
        metrics.contains(&format!(
            "slidewin_requests_total{{limiter=\"shared\",outcome=\"rejected\"}} {rejected}\n"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("slidewin_keys{limiter=\"shared\"} 1\n"),
        "{metrics}"
    );
}

#[test]
fn local_store_counts_per_worker_as_documented() {
    let nginx = Nginx::start("test.conf", 2);
    let responses = hammer(&nginx, "/limit/perworker?user=dave", 8, 30);
    let admitted_by = |worker: &str| {
        responses
            .iter()
            .filter(|r| r.status == 200 && r.header("X-Worker") == Some(worker))
            .count()
    };
    let served_by = |worker: &str| {
        responses
            .iter()
            .filter(|r| r.header("X-Worker") == Some(worker))
            .count()
    };
    for worker in ["0", "1"] {
        // Each worker admits up to the limit (20) of what it serves, whatever the other did.
        assert_eq!(
            admitted_by(worker),
            served_by(worker).min(20),
            "worker {worker}"
        );
    }
    assert!(
        served_by("0") > 20 && served_by("1") > 20,
        "both workers saw > limit: {} {}",
        served_by("0"),
        served_by("1")
    );
    assert_eq!(
        admitted_by("0") + admitted_by("1"),
        40,
        "N workers admit N x limit"
    );
}

#[test]
fn a_refusal_by_the_second_limiter_rolls_back_the_first() {
    let nginx = Nginx::start("test.conf", 1);
    let bodies: Vec<String> = (0..6)
        .map(|_| nginx.get("/combine?user=erin").body)
        .collect();
    assert_eq!(
        bodies,
        [
            "admitted",
            "admitted",
            "admitted",
            "second rejected",
            "second rejected",
            "second rejected"
        ]
        .map(|b| format!("{b}\n"))
    );
    // The first limiter (10 per minute) keeps only the 3 requests the second admitted.
    assert_eq!(nginx.get("/combine/first?user=erin").body, "7\n");
}

#[test]
fn bad_configs_answer_500_and_log_why_while_other_locations_serve() {
    let nginx = Nginx::start("test.conf", 1);
    let cases = [
        ("bad-limit", "limit must be a positive integer, got -1"),
        (
            "bad-algorithm",
            "algorithm must be \"log\", \"buckets\" or \"counter\", got \"sliding\"",
        ),
        (
            "bad-dict",
            "dict must name a lua_shared_dict, got \"missing\"",
        ),
    ];
    for (name, message) in cases {
        assert_eq!(nginx.get(&format!("/limit/{name}")).status, 500, "{name}");
        let log = nginx.error_log();
        assert!(
            log.contains(&format!("slidewin limiter \"{name}\": {message}")),
            "{name}: {log}"
        );
    }
    assert_eq!(nginx.get("/ok").status, 200);
    assert_eq!(nginx.get("/limit/local?user=frank").status, 200);
}

#[test]
fn key_var_keys_by_the_variable_across_workers_and_a_missing_value_is_an_error() {
    let nginx = Nginx::start("test.conf", 2);
    let answers = get_many(&nginx, "/byvar?user=carol", 8);
    assert_eq!(statuses(&answers), [200, 200, 200, 429, 429, 429, 429, 429]);
    assert_eq!(answers[2].header("ratelimit"), Some("\"byvar\";r=0;t=60"));
    assert_eq!(
        nginx.get("/byvar?user=dave").status,
        200,
        "another value, another key"
    );
    assert_eq!(nginx.get("/byvar").status, 500);
    let log = nginx.error_log();
    assert!(
        log.contains("sw:enforce: no key given and key_var $arg_user has no value in this request"),
        "{log}"
    );
    assert_eq!(
        nginx.get("/byvar?user=erin").status,
        200,
        "the worker keeps serving"
    );
}

/// The fast path stays fast: with a location reading `ngx.var` in its chunk (which makes LuaJIT
/// blacklist resty.core's getter, as in any real config), `enforce` by `key_var` on store
/// `shm` compiles, and no trace through the layer, the FFI decider or the variable read aborts.
/// The log starts after each path's first request: what a limiter does once (holding its
/// rule's version) runs before it, so a loop of that code which LuaJIT happens to find hot
/// (its hot counters are shared by hash) is not taken for the path of every request.
#[test]
fn enforce_by_key_var_compiles_into_traces_that_never_abort() {
    let dir = tempfile::tempdir().expect("temp dir");
    // nginx's workers (user nobody) write the log.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let log = dir.path().join("jit.log");
    let env = [("SLIDEWIN_JIT_LOG", log.display().to_string())];
    let nginx = Nginx::start_with_env("test.conf", 1, &env);
    for first in ["/limit/huge?user=first", "/byvar?user=first", "/jit-log"] {
        assert_eq!(nginx.get(first).status, 200, "{first}");
    }
    for i in 0..600 {
        let status = nginx.get(&format!("/limit/huge?user=u{i}")).status;
        assert_eq!(status, 200, "ngx.var read in the chunk");
        assert_eq!(
            nginx.get(&format!("/byvar?user=u{i}")).status,
            200,
            "key_var"
        );
    }
    drop(nginx);
    let traces = std::fs::read_to_string(&log).expect("jit.v wrote its log");
    let ours = ["slidewin.lua", "registry.lua", "fast.lua", "variable.lua"];
    let aborted: Vec<&str> = traces
        .lines()
        .filter(|line| line.starts_with("[TRACE ---") && ours.iter().any(|f| line.contains(f)))
        .collect();
    assert!(aborted.is_empty(), "aborted traces: {aborted:#?}\n{traces}");
    // Which function roots the traces through enforce varies from run to run (LuaJIT's hot
    // counters), but some trace starts or ends in our code.
    let compiled =
        |line: &str| !line.starts_with("[TRACE ---") && ours.iter().any(|f| line.contains(f));
    assert!(
        traces.lines().any(compiled),
        "no trace through enforce: {traces}"
    );
}

#[test]
fn stats_json_reports_node_wide_counters() {
    let nginx = Nginx::start("test.conf", 2);
    let _ = hammer(&nginx, "/limit/shared?user=gina", 4, 30);
    let json = nginx.get("/stats.json");
    assert_eq!(json.header("Content-Type"), Some("application/json"));
    assert!(
        json.body
            .contains("\"shared\":{\"allowed\":100,\"rejected\":20,\"store_errors\":0,\"keys\":1}"),
        "{}",
        json.body
    );
    assert!(json.body.starts_with("{\"now_ms\":"), "{}", json.body);
}

#[test]
fn stream_functions_return_the_known_vectors_inside_nginx() {
    let nginx = Nginx::start("test.conf", 1);
    let lua = r#"
        local slidewin = require "slidewin"
        local xs = { 1, 3, -1, -3, 5, 3, 6, 7 }
        local function show(t) return "[" .. table.concat(t, ",") .. "]" end
        local mean = slidewin.mean{ k = 3 }
        for _, x in ipairs(xs) do mean:push(x) end
        return table.concat({
            show(slidewin.sliding_max(xs, 3)), show(slidewin.sliding_min(xs, 3)),
            show(slidewin.sliding_sum(xs, 3)), show(slidewin.sliding_mean({ 1, 2, 3, 4 }, 2)),
            show(slidewin.ewma({ 10, 20, 20 }, 0.5)), tostring(mean:value()),
        }, " ")
    "#;
    let out = nginx.eval(lua);
    assert_eq!(out.status, 200, "{}", out.body);
    assert_eq!(out.body, "[3,3,5,5,6,7] [-1,-3,-3,-3,3,3] [3,-1,1,5,14,16] [1.5,2.5,3.5] [10,15,17.5] 5.3333333333333");
}

#[test]
fn a_wrong_argument_is_a_lua_error_naming_it_and_the_worker_keeps_serving() {
    let nginx = Nginx::start("test.conf", 1);
    let fails = |lua: &str| {
        let out = nginx.eval(lua);
        (out.status, out.body)
    };
    let message = |m: &str| (500, m.to_string());
    assert_eq!(
        fails("return require('slidewin').limiter{ limit = 30, window_ms = -5 }"),
        message("slidewin.limiter: window_ms must be a positive integer, got -5")
    );
    let lim = "local lim = require('slidewin').limiter{ limit = 1, window_ms = 1000 }";
    assert_eq!(
        fails(&format!("{lim}; lim:incoming(nil, true)")),
        message("lim:incoming: key must be a string or a finite number, got nil")
    );
    let pid_before = nginx.eval("return ngx.worker.pid()").body;
    for _ in 0..3 {
        assert_eq!(
            nginx
                .eval_raw(&format!("{lim}; return lim:check({{}}).allowed"))
                .status,
            500
        );
        assert_eq!(
            nginx
                .eval_raw(&format!("{lim}; return lim.incoming('x', true)"))
                .status,
            500
        );
        assert_eq!(
            nginx
                .eval_raw("return require('slidewin').sliding_max({ 0 / 0 }, 1)[1]")
                .status,
            500
        );
    }
    let log = nginx.error_log();
    assert!(
        log.contains("lim:check: key must be a string or a finite number, got table"),
        "{log}"
    );
    assert!(
        log.contains("slidewin.limiter expected, got string"),
        "{log}"
    );
    assert!(
        log.contains("slidewin.sliding_max: x must be a finite number, got NaN"),
        "{log}"
    );
    assert_eq!(
        nginx.eval("return ngx.worker.pid()").body,
        pid_before,
        "the worker was not replaced"
    );
    assert_eq!(nginx.get("/ok").status, 200);
}
