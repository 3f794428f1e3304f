//! Token limits for an OpenAI-compatible upstream in real nginx (nginx/llm.conf):
//! resty.slidewin.llm in front of the tests' stand-in provider (slidewin_tests::llm_upstream).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

#[path = "../../crates/slidewin/tests/common/bpe.rs"]
mod bpe;

use slidewin::llm::prompt::{PER_MESSAGE, PER_NAME, REPLY};
use slidewin::llm::tokens::{Split, Tokenizer};
use slidewin_tests::http::{self, Response};
use slidewin_tests::llm_upstream::{LlmUpstream, Produced};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

fn start(workers: u32, stream_ms: (u64, u64)) -> (Nginx, LlmUpstream) {
    let upstream = LlmUpstream::start(stream_ms);
    let env = [("SLIDEWIN_LLM_UPSTREAM", upstream.port.to_string())];
    (Nginx::start_with_env("llm.conf", workers, &env), upstream)
}

/// nginx and a stand-in counting prompts with a table trained on the sample text, written
/// where guard `counted` reads it (a file name that tells its split); the table's tokenizer
/// for the test's own counts; the directory holding the file.
fn start_counted(stream_ms: (u64, u64)) -> (Nginx, LlmUpstream, Tokenizer, tempfile::TempDir) {
    let (upstream, tokenizer, dir, env) = counting_upstream(stream_ms);
    let nginx = Nginx::start_with_env("llm.conf", 2, &env);
    (nginx, upstream, tokenizer, dir)
}

/// A table the tests train, in a file of a temporary folder; the stand-in provider counting
/// with it; and the environment that gives llm.conf both.
fn counting_upstream(
    stream_ms: (u64, u64),
) -> (
    LlmUpstream,
    Tokenizer,
    tempfile::TempDir,
    Vec<(&'static str, String)>,
) {
    let table = bpe::tiktoken(&bpe::train(&bpe::SAMPLE.repeat(3), 400));
    let tokenizer = || Tokenizer::new(table.as_bytes(), Split::Cl100k).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cl100k_test.tiktoken");
    std::fs::write(&path, &table).unwrap();
    let upstream = LlmUpstream::start_counting(stream_ms, tokenizer());
    let env = vec![
        ("SLIDEWIN_LLM_UPSTREAM", upstream.port.to_string()),
        ("SLIDEWIN_LLM_TABLE", path.display().to_string()),
    ];
    (upstream, tokenizer(), dir, env)
}

fn call(nginx: &Nginx, path: &str, user: &str, extra: &[(&str, &str)], body: &[u8]) -> Response {
    let mut headers = vec![("X-User", user), ("Content-Type", "application/json")];
    headers.extend_from_slice(extra);
    http::send(nginx.port(), "POST", path, &headers, body)
}

/// Room left in `limiter` for `user`, once the log phase has settled.
fn room(nginx: &Nginx, limiter: &str, user: &str) -> u64 {
    thread::sleep(Duration::from_millis(150));
    let lua = format!(
        "local ok, remaining = require('limits'):get('{limiter}'):decide('{user}', 0, false) \
         return remaining"
    );
    let body = nginx.eval(&lua).body;
    body.parse().unwrap_or_else(|_| panic!("room: {body}"))
}

fn chat(content: &str, extra: &str) -> String {
    format!(r#"{{"model":"cheap","messages":[{{"role":"user","content":"{content}"}}]{extra}}}"#)
}

#[test]
fn a_json_call_is_capped_to_the_room_and_settled_at_its_usage() {
    let (nginx, upstream) = start(2, (0, 0));
    let body = chat("hello there, how are you", r#","max_tokens":5000"#);
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "a",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The cap is what 1,000 tokens leave after the prompt's bound (the body's bytes), and the
    // answer shows the room after the reservation: none.
    let produced = upstream.wait(1);
    assert_eq!(produced.len(), 1);
    assert_eq!(produced[0].cap, Some(1000 - body.len() as u64));
    assert!(
        r.header("RateLimit")
            .unwrap()
            .starts_with(r#""tokens";r=0;"#),
        "{:?}",
        r.headers
    );
    // Settled for what the answer reported, at the reservation's stamp.
    let used = produced[0].prompt + produced[0].output;
    assert_eq!(room(&nginx, "tokens", "a"), 1000 - used);

    // Embeddings have no output: the prompt's bound alone is reserved.
    let embed = r#"{"model":"cheap","input":["one","two"]}"#;
    let r = call(&nginx, "/tokens/v1/embeddings", "e", &[], embed.as_bytes());
    let rate = format!(r#""tokens";r={};"#, 1000 - embed.len());
    assert!(
        r.header("RateLimit").unwrap().starts_with(&rate),
        "{:?}",
        r.headers
    );
    let p = &upstream.wait(2)[1];
    assert_eq!(room(&nginx, "tokens", "e"), 1000 - p.prompt);

    // No cap given: the guard's default (300) is written.
    let body = chat("x", "");
    assert_eq!(
        call(
            &nginx,
            "/tokens/v1/chat/completions",
            "b",
            &[],
            body.as_bytes()
        )
        .status,
        200
    );
    assert_eq!(upstream.wait(3)[2].cap, Some(300));
}

#[test]
fn streams_report_usage_and_lose_the_event_the_client_did_not_ask_for() {
    let (nginx, upstream) = start(1, (50, 50));
    let plain = chat("stream me", r#","stream":true,"max_tokens":20"#);
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "s",
        &[],
        plain.as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert!(r.body.ends_with("data: [DONE]\n\n"), "{}", r.body);
    assert!(!r.body.contains("completion_tokens"), "{}", r.body);
    let first = &upstream.wait(1)[0];
    assert!(first.reported);
    assert_eq!(
        room(&nginx, "tokens", "s"),
        1000 - first.prompt - first.output
    );

    // A client that asked keeps its usage event.
    let asked = chat(
        "stream me",
        r#","stream":true,"stream_options":{"include_usage":true}"#,
    );
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "t",
        &[],
        asked.as_bytes(),
    );
    let second = &upstream.wait(2)[1];
    let usage = format!(r#""completion_tokens":{}"#, second.output);
    assert!(r.body.contains(&usage), "{}", r.body);

    // Responses report usage in response.completed, unasked.
    let body = r#"{"model":"cheap","input":"hi","stream":true,"max_output_tokens":10}"#;
    let r = call(&nginx, "/tokens/v1/responses", "u", &[], body.as_bytes());
    assert!(r.body.contains("response.completed"), "{}", r.body);
    let third = &upstream.wait(3)[2];
    assert_eq!(
        room(&nginx, "tokens", "u"),
        1000 - third.prompt - third.output
    );
}

#[test]
fn an_answer_that_reports_nothing_keeps_its_reservation() {
    let (nginx, upstream) = start(1, (0, 0));
    let body = chat("cut", r#","stream":true,"max_tokens":100"#);
    let cut = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "c",
        &[("X-Cut", "1")],
        body.as_bytes(),
    );
    assert_eq!(cut.status, 200);
    assert!(!upstream.wait(1)[0].reported);
    assert_eq!(
        room(&nginx, "tokens", "c"),
        1000 - (body.len() as u64 + 100)
    );
    // An error that reports usage settles it.
    let body = chat("err", r#","max_tokens":100"#);
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "e",
        &[("X-Status", "500")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 500);
    let p = &upstream.wait(2)[1];
    assert_eq!(room(&nginx, "tokens", "e"), 1000 - p.prompt - p.output);
    // An upstream that ignores the cap: the window keeps the reservation, the excess is
    // counted as over (clamp mode assumes the cap holds).
    let body = chat("ignore", r#","max_tokens":10"#);
    let ignored = [("X-Ignore-Cap", "500")];
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "i",
        &ignored,
        body.as_bytes(),
    );
    assert_eq!(r.status, 200);
    let p = &upstream.wait(3)[2];
    let reserved = body.len() as u64 + 10;
    assert_eq!(room(&nginx, "tokens", "i"), 1000 - reserved);
    let metrics = nginx.get("/metrics").body;
    let cut_reserved = chat("cut", r#","stream":true,"max_tokens":100"#).len() + 100;
    for (kind, units) in [
        ("kept", cut_reserved as u64),
        ("over", p.prompt + 500 - reserved),
    ] {
        let line = format!(
            "slidewin_reservation_units_total{{limiter=\"tokens\",kind=\"{kind}\"}} {units}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

#[test]
fn every_limit_reserves_and_a_refusal_gives_the_others_back() {
    let (nginx, upstream) = start(1, (0, 0));
    // 500 cents a minute at 1 per input and 4 per output token: the cap is what the cents
    // leave after the prompt's bound.
    let body = r#"{"model":"dear","messages":[{"role":"user","content":"hi"}],"max_tokens":900}"#;
    let r = call(
        &nginx,
        "/priced/v1/chat/completions",
        "p",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let p = upstream.wait(1)[0].clone();
    assert_eq!(p.cap, Some((500 - body.len() as u64) / 4));
    assert_eq!(
        room(&nginx, "priced_tokens", "p"),
        1000 - p.prompt - p.output
    );
    assert_eq!(room(&nginx, "cents", "p"), 500 - (p.prompt + 4 * p.output));

    // Cents full: the tokens reserved first go back when the cents refuse.
    nginx.eval("return require('limits'):get('cents'):decide('q', 500, true)");
    let r = call(
        &nginx,
        "/priced/v1/chat/completions",
        "q",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 429);
    assert!(r.header("Retry-After").is_some());
    assert_eq!(room(&nginx, "priced_tokens", "q"), 1000);
    assert_eq!(upstream.record().len(), 1);

    // A model with no price is refused: its cost cannot be known.
    let free = r#"{"model":"free","messages":[]}"#;
    let r = call(
        &nginx,
        "/priced/v1/chat/completions",
        "f",
        &[],
        free.as_bytes(),
    );
    assert_eq!(r.status, 400);
    assert!(
        r.body.contains("model free has no price in limit cents"),
        "{}",
        r.body
    );
}

/// Thirty hostile bodies: each a 400 or 413 naming what is wrong, none a 500, none charged,
/// none sent upstream.
#[test]
fn hostile_bodies_are_refused_and_charge_nothing() {
    let (nginx, upstream) = start(2, (0, 0));
    let deep = format!(
        r#"{{"model":"m","messages":{}1{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let big = format!(r#"{{"model":"m","messages":"{}"}}"#, "a".repeat(1_100_000));
    let huge_number = format!(r#"{{"model":"m","max_tokens":1{}}}"#, "0".repeat(400));
    let bodies: Vec<(&[u8], &str)> = vec![
        (&b""[..], "body must be a JSON object"),
        (b"not json", "body must be a JSON object"),
        (br#"{"model":"m","messages":[{"role":"#, "EOF while parsing"),
        (b"[1,2]", "invalid type: sequence"),
        (b"null", "invalid type: null"),
        (br#"{"model":"m"} {}"#, "trailing characters"),
        (br#"{"model":"m",}"#, "trailing comma"),
        (b"{\"model\":\"m\xff\"}", "body must be UTF-8"),
        (
            b"\xef\xbb\xbf{\"model\":\"m\"}",
            "expected value at line 1 column 1",
        ),
        (br#"{"messages":[]}"#, "model is missing"),
        (br#"{"model":5}"#, "model must be a non-empty string, got 5"),
        (br#"{"model":["m"]}"#, "model must be a non-empty string"),
        (br#"{"model":"m","model":"n"}"#, "member model twice"),
        (
            br#"{"model":"m","max_tokens":1,"max_tokens":1000000}"#,
            "twice",
        ),
        (
            br#"{"model":"m","max_tokens":-5}"#,
            "max_tokens must be an integer",
        ),
        (br#"{"model":"m","max_tokens":0.5}"#, "got 0.5"),
        (
            br#"{"model":"m","max_tokens":"9"}"#,
            "max_tokens must be an integer",
        ),
        (
            br#"{"model":"m","max_tokens":1e999}"#,
            "number out of range",
        ),
        (huge_number.as_bytes(), "number out of range"),
        (br#"{"model":"m","max_completion_tokens":true}"#, "got true"),
        (br#"{"model":"m","n":0}"#, "n must be an integer from 1"),
        (br#"{"model":"m","n":-1}"#, "n must be an integer from 1"),
        (br#"{"model":"m","stream":1}"#, "stream must be a boolean"),
        (
            br#"{"model":"m","stream_options":[]}"#,
            "stream_options must be an object",
        ),
        (deep.as_bytes(), "recursion limit exceeded"),
        (
            br#"{"model":"m","messages":"\ud800"}"#,
            "messages: unexpected end of hex escape",
        ),
        (
            br#"{"model":"m","messages":"a\u0001b\x"}"#,
            "invalid escape",
        ),
        (
            b"{\"model\":\"m\",\"messages\":\"a\x00\"}",
            "control character",
        ),
    ];
    for (body, says) in bodies
        .iter()
        .chain([(big.as_bytes(), "body must be at most 1048576 bytes")].iter())
    {
        let r = call(&nginx, "/tokens/v1/chat/completions", "h", &[], body);
        let status = if body.len() > 1 << 20 { 413 } else { 400 };
        let shown = String::from_utf8_lossy(&body[..body.len().min(80)]);
        assert_eq!(
            (r.status, r.body.contains(says)),
            (status, true),
            "{shown}: {}",
            r.body
        );
    }
    // A compressed body is not read.
    let gzip =
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\xae\x05\x00\x43\xbf\xa6\xa3\x02\x00\x00\x00";
    let r = call(
        &nginx,
        "/tokens/v1/chat/completions",
        "h",
        &[("Content-Encoding", "gzip")],
        gzip,
    );
    assert_eq!(r.status, 400);
    assert!(
        r.body.contains("Content-Encoding gzip is not read"),
        "{}",
        r.body
    );
    assert_eq!(bodies.len() + 2, 30);
    assert_eq!(room(&nginx, "tokens", "h"), 1000);
    assert!(upstream.record().is_empty());
    assert!(
        !nginx.error_log().contains("[error]"),
        "{}",
        nginx.error_log()
    );
}

/// The statuses of 64 concurrent calls of user "burst" to guard `guard` with `body`.
fn burst(
    nginx: &Nginx,
    guard: &str,
    extra: &[(&'static str, &'static str)],
    body: &str,
) -> Vec<u16> {
    let (port, path) = (nginx.port(), format!("/{guard}/v1/chat/completions"));
    let calls: Vec<_> = (0..64)
        .map(|_| {
            let (body, path) = (body.to_string(), path.clone());
            let mut headers = vec![("X-User", "burst"), ("Content-Type", "application/json")];
            headers.extend_from_slice(extra);
            thread::spawn(move || http::send(port, "POST", &path, &headers, body).status)
        })
        .collect();
    calls.into_iter().map(|t| t.join().unwrap()).collect()
}

/// LiteLLM's measured case: many concurrent `max_tokens=1` streams on one key. Each reserves
/// its prompt's bound and one token, so exactly as many as fit are admitted, and what the
/// upstream produced stays within the limit. Streams of 2 s: every call of the burst is
/// decided before the first settles.
#[test]
fn a_burst_of_one_token_streams_admits_only_what_fits() {
    let (nginx, upstream) = start(2, (2_000, 2_000));
    let body = chat("one token please", r#","stream":true,"max_tokens":1"#);
    let statuses = burst(&nginx, "tokens", &[], &body);
    let fit = 1000 / (body.len() + 1);
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        fit,
        "{statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 64 - fit);
    let produced: u64 = upstream.wait(fit).iter().map(|p| p.prompt + p.output).sum();
    assert!(produced <= 1000, "{produced}");
}

/// The same burst in debt mode against an upstream that ignores the cap (500 tokens each):
/// as many are admitted, and each one's use above its reservation is owed at its stamp. The
/// window then holds more than the limit by at most what the calls in flight owed (the bound
/// docs/usage.md gives), and refuses until the debt leaves with the stamps.
#[test]
fn a_burst_in_debt_mode_owes_what_the_calls_used_above_their_reservations() {
    // One worker: its counters are the whole of /metrics.
    let (nginx, upstream) = start(1, (2_000, 2_000));
    let body = chat("one token please", r#","stream":true,"max_tokens":1"#);
    let statuses = burst(&nginx, "debt", &[("X-Ignore-Cap", "500")], &body);
    let reserved = body.len() as u64 + 1;
    let fit = (1000 / reserved) as usize;
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(admitted, fit, "{statuses:?}");
    let produced: u64 = upstream.wait(fit).iter().map(|p| p.prompt + p.output).sum();
    let owed = produced - fit as u64 * reserved;
    assert!(
        produced > 1000 && produced - 1000 <= owed,
        "{produced} {owed}"
    );
    // Settled: the window holds every token produced (at most twice the limit), no room.
    assert_eq!(room(&nginx, "owed", "burst"), 0);
    let r = call(
        &nginx,
        "/debt/v1/chat/completions",
        "burst",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 429);
    let wait: u64 = r.header("Retry-After").unwrap().parse().unwrap();
    assert!((7..=10).contains(&wait), "{wait}");
    let metrics = nginx.get("/metrics").body;
    let line =
        format!("slidewin_reservation_units_total{{limiter=\"owed\",kind=\"owed\"}} {owed}\n");
    assert!(metrics.contains(&line), "{line}{metrics}");
}

/// 64 clients on one key of 20,000 tokens per 10 s, streams of 0.2-2 s, on one node's
/// shared memory: replayed from the upstream's record at the reservations' stamps, no window
/// holds more than the limit of tokens actually produced.
#[test]
fn sixty_four_clients_never_put_a_window_over_its_limit() {
    let (nginx, upstream) = start(4, (200, 2_000));
    saturate(&[nginx.port()], "busy", &upstream);
}

/// The same with the prompt counted by a tokenizer table (the upstream counting with it
/// too): the reservations are tighter, so more of the limit is used.
#[test]
fn sixty_four_clients_with_a_table_never_put_a_window_over_its_limit() {
    let (nginx, upstream, _table, _dir) = start_counted((200, 2_000));
    saturate(&[nginx.port()], "busycounted", &upstream);
}

/// The issue's own shape, too long for every run: tokens per minute (20,000), streams of
/// 2-30 s, a table counting the prompt, for 4 minutes. Run it with
/// `cargo test -p slidewin-tests --test nginx_llm tokens_per_minute -- --ignored --nocapture`.
#[test]
#[ignore]
fn tokens_per_minute_with_long_streams() {
    let (nginx, upstream, _table, _dir) = start_counted((2_000, 30_000));
    let load = Load {
        limit: 20_000,
        window_ms: 60_000,
        run: Duration::from_secs(240),
    };
    saturate_for(&[nginx.port()], "tpmcounted", &upstream, load);
}

/// The same across 2 nginx x 4 workers deciding in one Redis, with and without a table.
#[test]
fn sixty_four_clients_on_two_nodes_never_put_a_window_over_its_limit() {
    for guard in ["fleet", "fleetcounted"] {
        let redis = RedisServer::start();
        let (upstream, _table, _dir, mut env) = counting_upstream((200, 2_000));
        env.push(("SLIDEWIN_REDIS_PORT", redis.port().to_string()));
        let nodes = [
            Nginx::start_with_env("llm.conf", 4, &env),
            Nginx::start_with_env("llm.conf", 4, &env),
        ];
        saturate(&[nodes[0].port(), nodes[1].port()], guard, &upstream);
    }
}

/// Redis down: the guard answers as the limiter's on_store_error says ("allow", the
/// default: the call goes through unreserved), never a 500.
#[test]
fn a_store_that_fails_answers_by_its_policy() {
    let redis = RedisServer::start();
    let upstream = LlmUpstream::start((0, 0));
    let env = [
        ("SLIDEWIN_LLM_UPSTREAM", upstream.port.to_string()),
        ("SLIDEWIN_REDIS_PORT", redis.port().to_string()),
    ];
    let nginx = Nginx::start_with_env("llm.conf", 1, &env);
    drop(redis);
    let body = chat("redis is gone", r#","max_tokens":50"#);
    let r = call(
        &nginx,
        "/fleet/v1/chat/completions",
        "d",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(upstream.wait(1)[0].cap, Some(50));
    thread::sleep(Duration::from_millis(200));
    assert!(
        nginx.error_log().contains("store error"),
        "{}",
        nginx.error_log()
    );
}

/// 64 clients (spread over `ports`) calling guard `guard` for 30 s; asserts the replay.
fn saturate(ports: &[u16], guard: &str, upstream: &LlmUpstream) {
    saturate_for(ports, guard, upstream, BUSY)
}

/// A guard's limit and how long its clients call it.
#[derive(Clone, Copy)]
struct Load {
    limit: u64,
    window_ms: i64,
    run: Duration,
}

/// busy's and fleet's: 20,000 tokens per 10 s, for 30 s.
const BUSY: Load = Load {
    limit: 20_000,
    window_ms: 10_000,
    run: Duration::from_secs(30),
};

/// [`saturate`] under `load`.
fn saturate_for(ports: &[u16], guard: &str, upstream: &LlmUpstream, load: Load) {
    let stop = Arc::new(AtomicBool::new(false));
    let path = format!("/{guard}/v1/chat/completions");
    let clients: Vec<_> = (0..64)
        .map(|i| {
            let (stop, path, port) = (Arc::clone(&stop), path.clone(), ports[i % ports.len()]);
            thread::spawn(move || {
                let mut statuses = Vec::new();
                let body = chat(
                    &format!("client {i} asks a question of some length"),
                    r#","stream":true"#,
                );
                let headers = [("X-User", "all"), ("Content-Type", "application/json")];
                while !stop.load(Ordering::Relaxed) {
                    let r = http::send(port, "POST", &path, &headers, body.as_bytes());
                    if r.status == 429 {
                        thread::sleep(Duration::from_millis(100));
                    }
                    statuses.push(r.status);
                }
                statuses
            })
        })
        .collect();
    let began = Instant::now();
    thread::sleep(load.run);
    stop.store(true, Ordering::Relaxed);
    let statuses: Vec<u16> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    let record: Vec<Produced> = upstream.wait(admitted);
    assert!(record.iter().all(|p| p.stamp_ms > 0));
    assert_eq!(
        windows_over(&record, load.window_ms, load.limit),
        0,
        "windows over the limit"
    );
    let used = utilization(&record, load.window_ms, load.limit);
    eprintln!(
        "{guard}: {} calls admitted, {} refused in {:?}; tokens per window at saturation: {:.1}% of the limit",
        record.len(),
        statuses.len() - admitted,
        began.elapsed(),
        used * 100.0
    );
    // With the prompt bound by its bytes, about 0.74-0.84 here (calls that kept their whole
    // reservation would use about 0.4: 10 tokens of prompt and half the cap of 300, out of
    // ~390 reserved); counted with a table, about 0.92-0.93. The margins are for a loaded
    // machine, where fewer calls run at once.
    let floor = if guard.ends_with("counted") {
        0.8
    } else {
        0.55
    };
    assert!(used >= floor, "utilization {used}");
}

/// Windows (t - window, t], t at each stamp, holding more than `limit` produced tokens.
fn windows_over(record: &[Produced], window: i64, limit: u64) -> usize {
    let mut calls: Vec<(i64, u64)> = record
        .iter()
        .map(|p| (p.stamp_ms, p.prompt + p.output))
        .collect();
    calls.sort();
    calls
        .iter()
        .filter(|(t, _)| {
            let held: u64 = calls
                .iter()
                .filter(|(s, _)| s > &(t - window) && s <= t)
                .map(|c| c.1)
                .sum();
            held > limit
        })
        .count()
}

/// The mean share of the limit produced in the windows ending every 100 ms from the first
/// call's window's end to the last call, the last two seconds left out (calls not yet ended).
fn utilization(record: &[Produced], window: i64, limit: u64) -> f64 {
    let first = record.iter().map(|p| p.stamp_ms).min().unwrap();
    let last = record.iter().map(|p| p.stamp_ms).max().unwrap() - 2_000;
    let ends: Vec<i64> = (first + window..=last).step_by(100).collect();
    let shares: f64 = ends
        .iter()
        .map(|t| {
            let held: u64 = record
                .iter()
                .filter(|p| p.stamp_ms > t - window && p.stamp_ms <= *t)
                .map(|p| p.prompt + p.output)
                .sum();
            held as f64 / limit as f64
        })
        .sum();
    shares / ends.len() as f64
}

/// A system message and a user's named message: the body, and its bound with `table` as
/// slidewin::llm::prompt documents it.
fn counted_chat(table: &Tokenizer, content: &str, extra: &str) -> (String, u64) {
    let body = format!(
        r#"{{"model":"cheap","messages":[{{"role":"system","content":"You are terse."}},{{"role":"user","name":"ann","content":"{content}"}}]{extra}}}"#
    );
    let text = table.count("system") + table.count("You are terse.") + table.count("user");
    let bound =
        REPLY + 2 * PER_MESSAGE + text + table.count("ann") + PER_NAME + table.count(content);
    (body, bound)
}

#[test]
fn a_table_counts_the_prompt_and_the_reservation_is_its_bound_and_the_cap() {
    let (nginx, upstream, table, _dir) = start_counted((0, 0));
    let content = "The quick brown fox jumps over the lazy dog. It's the dog's day, they're sure.";
    let (body, bound) = counted_chat(&table, content, r#","max_tokens":5000"#);
    let path = "/counted/v1/chat/completions";
    let r = call(&nginx, path, "a", &[], body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.body);
    let p = upstream.wait(1)[0].clone();
    // The cap is what the limit leaves after the bound, far under the body's bytes; the
    // provider's count (the cookbook's 3 per message) is the bound less 1 per message.
    assert_eq!(p.cap, Some(1000 - bound));
    assert_eq!(p.prompt, bound - 2);
    assert!(bound * 2 < body.len() as u64, "{bound} / {}", body.len());
    assert_eq!(room(&nginx, "counted", "a"), 1000 - (p.prompt + p.output));

    // A stream holds its bound and cap until it settles, then its usage.
    let (body, bound) = counted_chat(&table, "stream it", r#","stream":true,"max_tokens":50"#);
    let port = nginx.port();
    let streaming = thread::spawn(move || {
        let headers = [("X-User", "s"), ("X-Stream-Ms", "1500")];
        http::send(port, "POST", path, &headers, body.as_bytes())
    });
    thread::sleep(Duration::from_millis(500));
    assert_eq!(room(&nginx, "counted", "s"), 1000 - (bound + 50));
    assert_eq!(streaming.join().unwrap().status, 200);
    let p = upstream.wait(2)[1].clone();
    assert_eq!(p.prompt, bound - 2);
    assert_eq!(room(&nginx, "counted", "s"), 1000 - (p.prompt + p.output));
}

#[test]
fn with_a_table_a_window_never_goes_over_its_limit() {
    let (nginx, upstream, _table, _dir) = start_counted((100, 300));
    let port = nginx.port();
    let clients: Vec<_> = (0..8)
        .map(|i| {
            thread::spawn(move || {
                let mut statuses = Vec::new();
                for j in 0..6 {
                    let content = "the quick brown fox ".repeat(1 + (i * 7 + j) % 5);
                    let stream = if j % 2 == 0 { r#","stream":true"# } else { "" };
                    let body = chat(
                        &content,
                        &format!(r#","max_tokens":{}{stream}"#, 40 + 30 * i),
                    );
                    let headers = [("X-User", "w"), ("Content-Type", "application/json")];
                    let path = "/counted/v1/chat/completions";
                    statuses.push(http::send(port, "POST", path, &headers, body.as_bytes()).status);
                }
                statuses
            })
        })
        .collect();
    let statuses: Vec<u16> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let passed = statuses.iter().filter(|s| **s == 200).count();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    let record = upstream.wait(passed);
    assert_eq!(record.len(), passed);
    assert!(passed >= 4, "{statuses:?}");
    assert_eq!(windows_over(&record, 10_000, 1000), 0, "{record:?}");
}

#[test]
fn a_bad_tokenizer_is_refused_naming_the_option_and_the_value() {
    let (nginx, _upstream, _table, dir) = start_counted((0, 0));
    let bad = dir.path().join("cl100k_bad.tiktoken");
    std::fs::write(&bad, "AA== 0\naGk= x\n").unwrap();
    let unnamed = dir.path().join("table.tiktoken");
    std::fs::write(&unnamed, "AA== 0\n").unwrap();
    let new = |conf: &str| {
        let lua = format!(
            "local guard, err = require('resty.slidewin.llm').new{{ limits = {{ {{ limiter = \
             require('limits'):get('counted') }} }}, {conf} }} return err"
        );
        nginx.eval(&lua).body
    };
    assert_eq!(
        new("tokenizer = '/nowhere/cl100k_base.tiktoken'"),
        "resty.slidewin.llm: tokenizer: path \"/nowhere/cl100k_base.tiktoken\": \
         No such file or directory (os error 2)"
    );
    assert_eq!(
        new(&format!("tokenizer = '{}'", bad.display())),
        format!(
            "resty.slidewin.llm: tokenizer: path \"{}\": line 2: rank must be an integer \
             from 0 to 4294967294, got \"x\"",
            bad.display()
        )
    );
    assert_eq!(
        new(&format!("tokenizer = '{}'", unnamed.display())),
        "resty.slidewin.llm: tokenizer_split must be \"cl100k\" or \"o200k\" (nil: the \
         tokenizer file's name begins with one), got nil"
    );
    assert_eq!(
        new("tokenizer = 5"),
        "resty.slidewin.llm: tokenizer must be the path of a tiktoken table, got 5"
    );
    // Bytes in Lua: a table with only "AA==" lacks the other bytes.
    let lua =
        "local t, err = require('slidewin').llm_tokenizer{ table = 'AA== 0', split = 'o200k' } \
               return err";
    assert_eq!(
        nginx.eval(lua).body,
        "table: table must have a token for each byte: byte 0x01 has none"
    );
}
