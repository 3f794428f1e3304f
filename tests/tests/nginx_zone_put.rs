//! A rule of a zone put again while every worker holds a limiter made for it
//! (nginx/rules.conf, `/zone-use`, 4 workers): each worker's limiter follows the rule in
//! force, its decisions and every header, and never answers 500 after charging.

use std::collections::HashSet;
use std::env;

use slidewin_tests::http::Response;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::random::Random;

const WORKERS: usize = 4;

/// Requests rule `name` until every worker made its limiter for it (with the location's
/// windows, before anything else is put).
fn held_by_every_worker(nginx: &Nginx, name: &str) {
    let mut pids = HashSet::new();
    for i in 0..400 {
        let r = nginx.get(&format!("/zone-use?name={name}&k=warm{i}"));
        assert_eq!(r.status, 200, "{r:?}");
        pids.insert(r.header("X-Worker-Pid").unwrap_or_default().to_string());
        if pids.len() == WORKERS {
            return;
        }
    }
    panic!("only {} workers served 400 requests", pids.len());
}

/// Puts rule `name` again in zone "gateway" with `windows` (a Lua table), from one worker.
fn put(nginx: &Nginx, name: &str, windows: &str) {
    let r = nginx.eval(&format!(
        r#"assert(require("resty.slidewin").new{{ name = "{name}", store = "zone",
               zone = "gateway", windows = {windows}, size = "16k" }})
           return "put""#
    ));
    assert_eq!((r.status, r.body.as_str()), (200, "put"), "{r:?}");
}

/// Status, RateLimit-Policy, RateLimit and Retry-After of an answer.
fn answer(r: &Response) -> (u16, String, String, Option<String>) {
    let header = |name| r.header(name).unwrap_or_default().to_string();
    (
        r.status,
        header("RateLimit-Policy"),
        header("RateLimit"),
        r.header("Retry-After").map(str::to_string),
    )
}

/// The error lines of error.log.
fn errors(nginx: &Nginx) -> String {
    let log = nginx.error_log();
    let lines: Vec<_> = log.lines().filter(|l| l.contains("[error]")).collect();
    lines.join("\n")
}

fn no_lua_errors(nginx: &Nginx) {
    let errors = errors(nginx);
    assert!(errors.is_empty(), "error.log has errors:\n{errors}");
}

#[test]
fn a_rule_put_again_with_another_window_is_followed_by_every_answer() {
    let nginx = Nginx::start("rules.conf", WORKERS as u32);
    held_by_every_worker(&nginx, "a");
    put(
        &nginx,
        "a",
        "{ { limit = 10, window_ms = 1000, max_limit = 20 }, { limit = 3, window_ms = 10000 } }",
    );
    let policy = r#""a";q=10;w=1, "a-10s";q=3;w=10"#;
    let answers: Vec<_> = (0..5)
        .map(|_| answer(&nginx.get("/zone-use?name=a&k=z")))
        .collect();
    let expected: Vec<_> = [
        (200, r#""a-10s";r=2;t=10"#, None),
        (200, r#""a-10s";r=1;t=10"#, None),
        (200, r#""a-10s";r=0;t=10"#, None),
        (429, r#""a-10s";r=0;t=10"#, Some("10")),
        (429, r#""a-10s";r=0;t=10"#, Some("10")),
    ]
    .into_iter()
    .map(|(status, rate, retry)| {
        (
            status,
            policy.to_string(),
            rate.to_string(),
            retry.map(str::to_string),
        )
    })
    .collect();
    assert_eq!(answers, expected);
    no_lua_errors(&nginx);
}

#[test]
fn a_rule_put_again_with_another_window_length_changes_its_policy() {
    let nginx = Nginx::start("rules.conf", WORKERS as u32);
    held_by_every_worker(&nginx, "b");
    put(&nginx, "b", "{ { limit = 2, window_ms = 5000 } }");
    let answers: Vec<_> = (0..3)
        .map(|_| answer(&nginx.get("/zone-use?name=b&k=z")))
        .collect();
    let policy = r#""b";q=2;w=5"#.to_string();
    assert_eq!(
        answers,
        vec![
            (200, policy.clone(), r#""b";r=1;t=5"#.to_string(), None),
            (200, policy.clone(), r#""b";r=0;t=5"#.to_string(), None),
            (
                429,
                policy,
                r#""b";r=0;t=5"#.to_string(),
                Some("5".to_string())
            ),
        ]
    );
    no_lua_errors(&nginx);
}

#[test]
fn a_call_checked_before_its_decision_is_checked_against_the_rule_put_again() {
    let nginx = Nginx::start("rules.conf", WORKERS as u32);
    held_by_every_worker(&nginx, "c");
    put(
        &nginx,
        "c",
        "{ { limit = 30, window_ms = 10000, max_limit = 40 }, { limit = 50, window_ms = 60000 } }",
    );
    let policy = |first| format!(r#""c";q={first};w=10, "c-1m";q=50;w=60"#);
    // A cost above the first rule's max_limit, which fits the rule in force.
    assert_eq!(
        answer(&nginx.get("/zone-use?name=c&k=cost&cost=25")),
        (200, policy(30), r#""c";r=5;t=10"#.to_string(), None)
    );
    // Limits for the two windows of the rule in force.
    assert_eq!(
        answer(&nginx.get("/zone-use?name=c&k=limits&limits=8,50")),
        (200, policy(8), r#""c";r=7;t=10"#.to_string(), None)
    );
    no_lua_errors(&nginx);
}

/// A window as a Lua table: algorithm, limit, window_ms, max_limit (and bucket_ms).
#[derive(Clone)]
struct Window {
    algorithm: &'static str,
    limit: u64,
    window_ms: u64,
    max_limit: u64,
}

impl Window {
    fn lua(&self) -> String {
        let buckets = match self.algorithm {
            "buckets" => format!(", bucket_ms = {}", self.window_ms / 10),
            _ => String::new(),
        };
        format!(
            r#"{{ algorithm = "{}", limit = {}, window_ms = {}, max_limit = {}{buckets} }}"#,
            self.algorithm, self.limit, self.window_ms, self.max_limit
        )
    }
}

fn lua(windows: &[Window]) -> String {
    let items: Vec<_> = windows.iter().map(Window::lua).collect();
    format!("{{ {} }}", items.join(", "))
}

/// The next rule: the last one with other limits only (its keys kept), or 1 to 3 windows of
/// distinct lengths (their default names differ), each algorithm, limit and max_limit drawn.
fn next_rule(random: &mut Random, last: &[Window]) -> Vec<Window> {
    if !last.is_empty() && random.below(4) == 0 {
        return last
            .iter()
            .map(|w| Window {
                limit: 1 + random.below(w.max_limit),
                ..w.clone()
            })
            .collect();
    }
    let mut lengths = vec![1_000, 2_000, 5_000, 10_000, 60_000];
    (0..1 + random.below(3))
        .map(|_| {
            let window_ms = lengths.remove(random.below(lengths.len() as u64) as usize);
            let limit = 1 + random.below(6);
            Window {
                algorithm: random.pick(&["log", "buckets", "counter"]),
                limit,
                window_ms,
                max_limit: limit + random.below(10),
            }
        })
        .collect()
}

fn url_encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn every_answer_after_random_puts_is_a_fresh_limiters() {
    let seed = env::var("ZONE_PUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_2028);
    println!("ZONE_PUT_SEED={seed}");
    let mut random = Random(seed);
    let nginx = Nginx::start("rules.conf", WORKERS as u32);
    held_by_every_worker(&nginx, "r");
    let mut rule = Vec::new();
    let mut pids = HashSet::new();
    for generation in 0..60 {
        rule = next_rule(&mut random, &rule);
        let windows = lua(&rule);
        put(&nginx, "r", &windows);
        // A fresh key per rule: the fresh limiter's key starts empty as well.
        for i in 0..8 {
            let r = nginx.get(&format!(
                "/zone-use?name=r&k=g{generation}&g={generation}&fresh={}",
                url_encoded(&windows)
            ));
            pids.insert(r.header("X-Worker-Pid").unwrap_or_default().to_string());
            let expected = (
                r.header("X-Expect-Status")
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0),
                r.header("X-Expect-Policy").unwrap_or_default().to_string(),
                r.header("X-Expect-RateLimit")
                    .unwrap_or_default()
                    .to_string(),
                r.header("X-Expect-Retry-After").map(str::to_string),
            );
            assert_eq!(
                answer(&r),
                expected,
                "seed {seed}, rule {generation} {windows}, request {i}: {r:?}\n{}",
                errors(&nginx)
            );
        }
    }
    assert_eq!(pids.len(), WORKERS, "every worker answered: {pids:?}");
    no_lua_errors(&nginx);
}
