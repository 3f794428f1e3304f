//! The figures of BENCHMARKS.md "Redis store", on a redis-server and an nginx of its own:
//! wrk req/s through store = "redis" next to a bare EVALSHA (nginx/redis.conf), memory per key
//! for a 1-hour window at 10 requests/s (filled fast with explicit now_ms), and Redis CPU per
//! decision (INFO commandstats usec_per_call) for each script.
//!
//! Also Redis CPU per refused buckets call next to an admitted one, at 60 and 3,600 buckets
//! (`refusals`), and req/s through a 3-master Redis Cluster next to one redis-server (`cluster`).
//!
//! And Redis CPU per decision of one-window and two-window rules next to the seed's ZSET
//! script, one hot key (`cost`).
//!
//! `scripts/bench-redis.sh [throughput|redis|refusals|cluster|cost]`
//! (= `cargo run --release -p slidewin-tests --bin slidewin-redis-bench -- [part]`).

use slidewin_tests::bench::{measured, median, workers_of, wrk};
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::{RedisCluster, RedisServer, Script};
use slidewin_tests::resp::{Reply, Resp};

const HOUR_MS: i64 = 3_600_000;
const START_MS: i64 = 1_700_000_000_000;
/// Calls per CPU measurement.
const CALLS: i64 = 100_000;

/// One algorithm under test: a one-window rule of it, and how its window is named to the script.
struct Algorithm {
    name: &'static str,
    /// bucket_ms (buckets only).
    options: &'static [&'static str],
}

impl Algorithm {
    /// The script's arguments for cost 1 under `limit` per `window` at `now`.
    fn args(&self, limit: &str, window: &str, now: i64) -> Vec<String> {
        let mut args = vec!["1", self.name, limit, window];
        args.extend(self.options);
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        args.extend(["now_ms".to_string(), now.to_string()]);
        args
    }

    /// The Redis key of the limiter key `k`.
    fn key(&self, k: &str) -> String {
        format!("bench:{{{k}}}")
    }
}

const ALGORITHMS: [Algorithm; 3] = [
    Algorithm {
        name: "log",
        options: &[],
    },
    Algorithm {
        name: "buckets",
        options: &["60000"],
    },
    Algorithm {
        name: "counter",
        options: &[],
    },
];

/// A field of INFO `section`, e.g. `used_memory`.
fn info(c: &mut Resp, section: &str, field: &str) -> Option<String> {
    let text = c.cmd(&["INFO", section]).text();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
}

/// `calls` (key, now_ms) pairs through `script`, pipelined in batches; every reply must be a decision.
fn run(
    c: &mut Resp,
    script: &Script,
    algo: &Algorithm,
    limit: &str,
    window: &str,
    calls: impl Iterator<Item = (String, i64)>,
) {
    let mut batch: Vec<Vec<String>> = Vec::new();
    let mut flush = |batch: &mut Vec<Vec<String>>| {
        for reply in c.pipeline(batch).expect("pipeline") {
            assert!(
                matches!(reply, Reply::Array(Some(_))),
                "{}: {reply:?}",
                algo.name
            );
        }
        batch.clear();
    };
    for (key, now) in calls {
        let mut cmd = vec![
            "EVALSHA".to_string(),
            script.sha().to_string(),
            "1".to_string(),
            algo.key(&key),
        ];
        cmd.extend(algo.args(limit, window, now));
        batch.push(cmd);
        if batch.len() == 2_000 {
            flush(&mut batch);
        }
    }
    flush(&mut batch);
}

/// Bytes per limiter key holding a full 1-hour window at 10 requests/s:
/// (INFO used_memory delta, MEMORY USAGE). `keys` keys are filled call by call, then each is
/// COPYed `copies` times (same encoding), so small states are measured over many keys and the
/// delta rises well above INFO's noise.
fn memory_per_key(c: &mut Resp, algo: &Algorithm, keys: usize, copies: usize) -> (f64, f64) {
    c.cmd(&["FLUSHALL"]);
    let script = Script::rule(c);
    let calls = (0..HOUR_MS / 100)
        .flat_map(|i| (0..keys).map(move |k| (format!("mem{k}"), START_MS + i * 100)));
    run(c, &script, algo, "1000000", &HOUR_MS.to_string(), calls);
    let mut all = Vec::new();
    for k in 0..keys {
        let filled = algo.key(&format!("mem{k}"));
        for copy in 0..copies {
            let to = algo.key(&format!("mem{k}c{copy}"));
            assert_eq!(c.cmd(&["COPY", &filled, &to]).int(), 1);
            all.push(to);
        }
        all.push(filled);
    }
    let used = |c: &mut Resp| -> f64 { info(c, "memory", "used_memory").unwrap().parse().unwrap() };
    let with_keys = used(c);
    let usage: i64 = all
        .iter()
        .map(|key| c.cmd(&["MEMORY", "USAGE", key, "SAMPLES", "0"]).int())
        .sum();
    for key in &all {
        c.cmd(&["DEL", key]);
    }
    // Against the same server without the keys, so client buffers and caches cancel out.
    let limiter_keys = (keys * (copies + 1)) as f64;
    (
        (with_keys - used(c)) / limiter_keys,
        usage as f64 / limiter_keys,
    )
}

/// Redis CPU per EVALSHA (µs) for 1000 keys at 10 requests/s each, 60 s window, limit 100 per key,
/// over `calls` calls (100,000: 100 per key, all admitted).
fn usec_per_call(c: &mut Resp, algo: &Algorithm, script: &Script, calls: i64) -> f64 {
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    let trace = (0..calls).map(|i| (format!("cpu{}", i % 1000), START_MS + i / 10));
    run(c, script, algo, "100", "60000", trace);
    let stat = info(c, "commandstats", "cmdstat_evalsha").expect("evalsha stats");
    let usec = stat
        .split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .unwrap();
    usec.parse().unwrap()
}

/// Throughput of each algorithm through nginx next to the bare-EVALSHA ceiling: `rounds` short
/// runs, each between a ceiling run before and after it so load drift hits both sides alike;
/// medians of the rates, of the per-round ratios and of the CPU per request.
fn throughput(redis: &RedisServer, rounds: usize) {
    let env = [("SLIDEWIN_REDIS_PORT", redis.port().to_string())];
    let nginx = Nginx::start_with_env("redis.conf", 2, &env);
    wrk(nginx.port(), "/bare", 2); // warm the pools and the script cache
    let workers = workers_of(&nginx);
    println!("| location | req/s | bare EVALSHA req/s | ratio (min-max of {rounds}) | nginx workers µs CPU/req (bare) | redis-server µs CPU/req (bare) |");
    println!("|---|---|---|---|---|---|");
    for algo in &ALGORITHMS {
        let path = format!("/limit/bench-{}", algo.name);
        // Per round: req/s, ceiling, ratio %, nginx CPU, its ceiling, redis CPU, its ceiling.
        let rows: Vec<[f64; 7]> = (0..rounds)
            .map(|_| {
                let (before, n0, r0) = measured(nginx.port(), "/bare", &workers, &[redis.pid()]);
                let (run, n1, r1) = measured(nginx.port(), &path, &workers, &[redis.pid()]);
                let (after, n2, r2) = measured(nginx.port(), "/bare", &workers, &[redis.pid()]);
                let ceiling = (before.rate + after.rate) / 2.0;
                let ratio = 100.0 * run.rate / ceiling;
                [
                    run.rate,
                    ceiling,
                    ratio,
                    n1,
                    (n0 + n2) / 2.0,
                    r1,
                    (r0 + r2) / 2.0,
                ]
            })
            .collect();
        let column = |i: usize| rows.iter().map(|r| r[i]).collect::<Vec<_>>();
        let m = |i: usize| median(column(i));
        let ratios = column(2);
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "| store = \"redis\", {} | {:.0} | {:.0} | {:.0}% ({low:.0}-{high:.0}%) | {:.1} ({:.1}) | {:.1} ({:.1}) |",
            algo.name, m(0), m(1), m(2), m(3), m(4), m(5), m(6),
        );
    }
    report_store_errors(&nginx);
}

/// A store error (a timeout on an overloaded machine) answers 200 too: say how many there were.
fn report_store_errors(nginx: &Nginx) {
    let metrics = nginx.get("/metrics").body;
    let errors: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("slidewin_store_errors_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    println!("store errors during these runs: {errors}");
    assert!(!nginx.error_log().contains("exited on"), "a worker died");
}

fn main() {
    // "throughput", "redis", "refusals", "cluster", or all of them
    let part = std::env::args().nth(1).unwrap_or_default();
    let all = part.is_empty();
    let redis = RedisServer::start();
    if all || part == "throughput" {
        throughput(&redis, 5);
    }
    if all || part == "redis" {
        redis_side(&redis);
    }
    if all || part == "refusals" {
        refusals(&redis);
    }
    if all || part == "cluster" {
        cluster_vs_standalone(&redis, 5);
    }
    if all || part == "cost" {
        cost_against_the_seed(&redis, 9);
    }
}

/// The seed article's ZSET script (../shared/seeds/002_*.txt, section 2.2), restated to measure
/// what it costs Redis: drop the members older than the window, count the rest, and when there
/// is room read TIME, add a member unique per call, set the expiry to twice the window.
/// KEYS[1]; ARGV: now_ms window_ms limit.
const SEED_ZSET: &str = "local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now - window)
if redis.call('ZCARD', KEYS[1]) >= limit then return 0 end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), now .. ':' .. math.random(1, 999999))
redis.call('PEXPIRE', KEYS[1], window * 2)
return 1";

/// Calls per round of the hot-key measurement: 10 per ms for 10 s of explicit now_ms.
const HOT_CALLS: i64 = 100_000;
/// The hot key's window: 1 s, so the run crosses 10 windows and every ms an entry expires.
const HOT_WINDOW: &str = "1000";

/// Redis µs per EVALSHA of `command(now_ms)` for one hot key, all admitted: `HOT_CALLS` calls at
/// 10 per ms, pipelined, on an empty server.
fn hot_key_usec(c: &mut Resp, command: &dyn Fn(i64) -> Vec<String>) -> f64 {
    c.cmd(&["FLUSHALL"]);
    c.cmd(&["CONFIG", "RESETSTAT"]);
    for chunk in (0..HOT_CALLS).collect::<Vec<_>>().chunks(2_000) {
        let batch: Vec<Vec<String>> = chunk.iter().map(|i| command(START_MS + i / 10)).collect();
        for reply in c.pipeline(&batch).expect("pipeline") {
            assert!(
                matches!(reply, Reply::Int(1))
                    || matches!(&reply, Reply::Array(Some(r)) if r[0] == Reply::Int(1)),
                "a hot-key call must be admitted: {reply:?}"
            );
        }
    }
    evalsha_usec(c)
}

/// The rules of the hot-key measurement: a label and the windows' arguments to the script
/// (limits high enough that every call is admitted).
const HOT_RULES: [(&str, &[&str]); 5] = [
    ("log", &["log", "1000000", HOT_WINDOW]),
    (
        "buckets (100 ms)",
        &["buckets", "1000000", HOT_WINDOW, "100"],
    ),
    ("counter", &["counter", "1000000", HOT_WINDOW]),
    (
        "2 windows: log 1 s + log 10 s",
        &["log", "1000000", HOT_WINDOW, "log", "1000000", "10000"],
    ),
    (
        "2 windows: buckets 1 s / 100 ms + buckets 10 s / 1 s",
        &[
            "buckets", "1000000", HOT_WINDOW, "100", "buckets", "1000000", "10000", "1000",
        ],
    ),
];

/// BENCHMARKS.md "Redis cost of rules": Redis CPU per decision of each rule next to the seed's
/// ZSET script, one hot key, every call admitted; `rounds` rounds alternating the two, medians.
fn cost_against_the_seed(redis: &RedisServer, rounds: usize) {
    let mut c = redis.client();
    let seed = Script::from_source(&mut c, SEED_ZSET.into());
    let seed_call = |now: i64| -> Vec<String> {
        let args = [
            "EVALSHA",
            seed.sha(),
            "1",
            "seed:{hot}",
            &now.to_string(),
            HOT_WINDOW,
            "1000000",
        ];
        args.map(String::from).to_vec()
    };
    let script = Script::rule(&mut c);
    println!("one hot key, {HOT_CALLS} calls at 10 per ms (explicit now_ms), window {HOT_WINDOW} ms, all admitted; medians of {rounds} rounds");
    // On a loaded machine a call waits for the CPU now and then: that only adds, so the least
    // of the rounds is the steadier figure, shown beside the median.
    println!(
        "| rule | Redis µs per decision (least) | seed ZSET script µs (least) | ratio to the seed: medians (min-max), leasts |"
    );
    println!("|---|---|---|---|");
    for (label, windows) in HOT_RULES {
        let keys: Vec<String> = (0..windows.iter().filter(|a| a.parse::<u64>().is_err()).count())
            .map(|k| format!("bench:{{hot}}:{k}"))
            .collect();
        let ours = |now: i64| -> Vec<String> {
            let mut cmd = vec![
                "EVALSHA".to_string(),
                script.sha().to_string(),
                keys.len().to_string(),
            ];
            cmd.extend(keys.iter().cloned());
            cmd.push("1".to_string());
            cmd.extend(windows.iter().map(|s| s.to_string()));
            cmd.extend(["now_ms".to_string(), now.to_string()]);
            cmd
        };
        let rows: Vec<[f64; 3]> = (0..rounds)
            .map(|_| {
                let (s, o) = (
                    hot_key_usec(&mut c, &seed_call),
                    hot_key_usec(&mut c, &ours),
                );
                [o, s, o / s]
            })
            .collect();
        let ratios: Vec<f64> = rows.iter().map(|r| r[2]).collect();
        let (low, high) = ratios
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
        let m = |i: usize| median(rows.iter().map(|r| r[i]).collect());
        let least = |i: usize| rows.iter().map(|r| r[i]).fold(f64::MAX, f64::min);
        println!(
            "| {label} | {:.2} ({:.2}) | {:.2} ({:.2}) | {:.2}x ({low:.2}-{high:.2}), {:.2}x |",
            m(0),
            least(0),
            m(1),
            least(1),
            m(2),
            least(0) / least(1)
        );
    }
    println!("uptime: {}", uptime());
}

/// The load average now, for the notes of a run.
fn uptime() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `usec_per_call` of EVALSHA since the last CONFIG RESETSTAT.
fn evalsha_usec(c: &mut Resp) -> f64 {
    let stat = info(c, "commandstats", "cmdstat_evalsha").expect("evalsha stats");
    stat.split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .unwrap()
        .parse()
        .unwrap()
}

/// Redis CPU per buckets call, admitted and refused, with `n` buckets of 1 s holding cost
/// (limit 2n, window n s): `keys` keys each filled with one call per bucket, and as many more
/// keys filled to the limit. Then `rounds` rounds of `m` calls per key on each set in turn, in
/// the last bucket (nothing expires): medians of admitted, refused and their per-round ratio.
fn buckets_admitted_and_refused(
    c: &mut Resp,
    n: i64,
    keys: i64,
    m: i64,
    rounds: usize,
) -> [f64; 3] {
    c.cmd(&["FLUSHALL"]);
    let script = Script::rule(c);
    let options = Algorithm {
        options: &["1000"],
        ..ALGORITHMS[1]
    };
    let (limit, window) = ((2 * n).to_string(), (n * 1000).to_string());
    let last = START_MS + n * 1000 - 1;
    let fill =
        (0..n).flat_map(|i| (0..2 * keys).map(move |k| (format!("r{k}"), START_MS + i * 1000)));
    run(c, &script, &options, &limit, &window, fill);
    let top_up = (0..n).flat_map(|_| (keys..2 * keys).map(|k| (format!("r{k}"), last)));
    run(c, &script, &options, &limit, &window, top_up);
    let mut measure = |first_key: i64| {
        c.cmd(&["CONFIG", "RESETSTAT"]);
        let calls =
            (0..m).flat_map(|_| (first_key..first_key + keys).map(|k| (format!("r{k}"), last)));
        run(c, &script, &options, &limit, &window, calls);
        evalsha_usec(c)
    };
    let rows: Vec<[f64; 3]> = (0..rounds)
        .map(|_| {
            let (admitted, refused) = (measure(0), measure(keys));
            [admitted, refused, refused / admitted]
        })
        .collect();
    [0, 1, 2].map(|i| median(rows.iter().map(|r| r[i]).collect()))
}

/// BENCHMARKS.md "Refused buckets calls": Redis µs per call, refused next to admitted.
fn refusals(redis: &RedisServer) {
    let mut c = redis.client();
    println!("| buckets holding cost | admitted µs/call | refused µs/call | refused / admitted (median of 5 rounds) |");
    println!("|---|---|---|---|");
    for (n, keys, m) in [(60, 1000, 5), (3_600, 50, 100)] {
        let [admitted, refused, ratio] = buckets_admitted_and_refused(&mut c, n, keys, m, 5);
        println!("| {n} | {admitted:.2} | {refused:.2} | {ratio:.2}x |");
    }
}

/// BENCHMARKS.md "Redis Cluster": req/s of each algorithm through a 3-master cluster (no
/// replicas) next to one redis-server, both behind an nginx of their own with 2 workers; `rounds`
/// runs of each, alternating, medians.
fn cluster_vs_standalone(redis: &RedisServer, rounds: usize) {
    let cluster = RedisCluster::start(3, 0);
    let single = Nginx::start_with_env(
        "redis.conf",
        2,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    );
    let sharded = Nginx::start_with_env(
        "redis.conf",
        2,
        &[("SLIDEWIN_REDIS_CLUSTER", cluster.seeds())],
    );
    let (single_workers, sharded_workers) = (workers_of(&single), workers_of(&sharded));
    println!("| algorithm | one redis-server req/s | 3-master cluster req/s | ratio (min-max of {rounds}) | nginx workers µs CPU/req: one (cluster) | redis µs CPU/req: one (cluster, all nodes) |");
    println!("|---|---|---|---|---|---|");
    for algo in &ALGORITHMS {
        let path = format!("/limit/bench-{}", algo.name);
        wrk(sharded.port(), &path, 1); // load the slot map and the scripts
        let rows: Vec<[f64; 7]> = (0..rounds)
            .map(|_| {
                let (one, one_nginx, one_redis) =
                    measured(single.port(), &path, &single_workers, &[redis.pid()]);
                let (many, many_nginx, many_redis) =
                    measured(sharded.port(), &path, &sharded_workers, &cluster.pids());
                [
                    one.rate,
                    many.rate,
                    100.0 * many.rate / one.rate,
                    one_nginx,
                    many_nginx,
                    one_redis,
                    many_redis,
                ]
            })
            .collect();
        let column = |i: usize| rows.iter().map(|r| r[i]).collect::<Vec<_>>();
        let (low, high) = column(2)
            .iter()
            .fold((f64::MAX, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
        let m = |i: usize| median(column(i));
        println!(
            "| {} | {:.0} | {:.0} | {:.0}% ({low:.0}-{high:.0}%) | {:.1} ({:.1}) | {:.1} ({:.1}) |",
            algo.name,
            m(0),
            m(1),
            m(2),
            m(3),
            m(4),
            m(5),
            m(6),
        );
    }
    report_store_errors(&single);
    report_store_errors(&sharded);
    println!(
        "{}",
        sharded
            .get("/metrics")
            .body
            .lines()
            .filter(|l| l.starts_with("slidewin_redis_"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Memory per key and CPU per decision, measured inside Redis.
fn redis_side(redis: &RedisServer) {
    let mut c = redis.client();
    let version = info(&mut c, "server", "redis_version").unwrap_or_default();
    println!(
        "redis-server {version}, 1-hour window at 10 requests/s per key (36,000 calls per key)"
    );
    println!("| algorithm | bytes per key (INFO used_memory delta) | MEMORY USAGE per key | Redis µs per decision |");
    println!("|---|---|---|---|");
    let mut log_bytes = 0.0;
    // The floor: an EVALSHA of a script that only answers, with the same keys and arguments.
    let trivial = Script::from_source(&mut c, "return {1, 0, 0, 0}".into());
    let floor = usec_per_call(&mut c, &ALGORITHMS[1], &trivial, CALLS);
    for algo in &ALGORITHMS {
        let copies = if algo.name == "log" { 0 } else { 499 };
        let (delta, usage) = memory_per_key(&mut c, algo, 4, copies);
        let script = Script::rule(&mut c);
        let usec = usec_per_call(&mut c, algo, &script, CALLS);
        if algo.name == "log" {
            log_bytes = delta;
        }
        let ratio = if algo.name == "log" {
            String::new()
        } else {
            format!(" ({:.0}x less than log)", log_bytes / delta)
        };
        println!(
            "| {} | {delta:.0}{ratio} | {usage:.0} | {usec:.2} |",
            algo.name
        );
    }
    println!("| trivial script `return {{1, 0, 0, 0}}` (the floor) | | | {floor:.2} |");
    // The same hour in 1 s buckets: 3,600 buckets of 10 calls, large enough without copies.
    let (delta, usage) = memory_per_key(&mut c, &BUCKETS_1S, 4, 9);
    println!("| buckets (1 s) | {delta:.0} | {usage:.0} | |");
}

/// Buckets of 1 s, for the memory of a 1-hour window of many buckets.
const BUCKETS_1S: Algorithm = Algorithm {
    name: "buckets",
    options: &["1000"],
};
