//! The rule script of lua/redis/ run directly on a real redis-server, one window at a time, on
//! its edge cases (rules of several windows: redis_vs_core.rs).

use slidewin_tests::redis::{RedisServer, Script};
use slidewin_tests::resp::{Reply, Resp};
use std::sync::{Arc, Barrier};

/// The rule script deciding one window of `algorithm`.
struct One {
    script: Script,
    algorithm: &'static str,
}

impl One {
    fn load(client: &mut Resp, algorithm: &'static str) -> Self {
        Self::from(Script::rule(client), algorithm)
    }

    fn from(script: Script, algorithm: &'static str) -> Self {
        Self { script, algorithm }
    }

    fn sha(&self) -> &str {
        self.script.sha()
    }

    /// The script's arguments for `limit window_ms cost [bucket_ms N] [other options]`:
    /// `cost algorithm limit window_ms [bucket_ms] [options]`.
    fn args<'a>(&'a self, args: &[&'a str]) -> Vec<&'a str> {
        let mut rule = vec![args[2], self.algorithm, args[0], args[1]];
        let options = &args[3..];
        for pair in options.chunks(2) {
            if pair[0] == "bucket_ms" {
                rule.push(pair[1]);
            }
        }
        for pair in options.chunks(2).filter(|p| p[0] != "bucket_ms") {
            rule.extend(pair);
        }
        rule
    }

    fn run(&self, client: &mut Resp, keys: &[&str], args: &[&str]) -> Reply {
        self.script.run(client, keys, &self.args(args))
    }
}

/// `{allowed, remaining, retry_after_ms, reset_after_ms}` of one call at `now_ms` (the window
/// shown, the fifth, is always 1 here).
fn at(client: &mut Resp, script: &One, keys: &[&str], args: &[&str], now_ms: i64) -> [i64; 4] {
    let now = now_ms.to_string();
    let args: Vec<&str> = args.iter().copied().chain(["now_ms", &now]).collect();
    let reply = script.run(client, keys, &args).ints();
    assert_eq!(reply[4], 1, "{reply:?}");
    reply[..4].try_into().expect("five integers")
}

const LOG_KEYS: [&str; 1] = ["rl:{log}"];

#[test]
fn log_admits_the_limit_and_retry_after_is_exact() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    let mut call = |now| at(&mut c, &log, &LOG_KEYS, &["3", "1000", "1"], now);
    assert_eq!(call(1000), [1, 2, 0, 1000]);
    assert_eq!(call(1100), [1, 1, 0, 1000]);
    assert_eq!(call(1200), [1, 0, 0, 1000]);
    // The entry at 1000 leaves the window at 2000.
    assert_eq!(call(1300), [0, 0, 700, 900]);
    assert_eq!(call(1999), [0, 0, 1, 201]);
    assert_eq!(call(2000), [1, 0, 0, 1000]);
    assert_eq!(call(2050), [0, 0, 50, 950]);
}

#[test]
fn log_keeps_the_cost_of_each_entry() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    let mut call = |cost: &str, now| at(&mut c, &log, &LOG_KEYS, &["10", "1000", cost], now);
    assert_eq!(call("4", 0), [1, 6, 0, 1000]);
    assert_eq!(call("4", 100), [1, 2, 0, 1000]);
    // Needs 2 more: the first entry (4) frees enough when it leaves at 1000.
    assert_eq!(call("4", 200), [0, 2, 800, 900]);
    assert_eq!(call("2", 200), [1, 0, 0, 1000]);
    // Needs 5: the entries at 0 and 100 must both leave; the second leaves at 1100.
    assert_eq!(call("5", 300), [0, 0, 800, 900]);
    // More than the limit never fits.
    assert_eq!(call("11", 300), [0, 0, -1, 900]);
    assert_eq!(call("5", 1100), [1, 3, 0, 1000]);
}

#[test]
fn hundred_concurrent_calls_in_one_millisecond_are_all_counted() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let scripts: Vec<(One, Vec<&str>, Vec<&str>)> = vec![
        (One::load(&mut c, "log"), LOG_KEYS.to_vec(), vec![]),
        (
            One::load(&mut c, "buckets"),
            vec!["rl:{buckets}"],
            vec!["bucket_ms", "100"],
        ),
        (One::load(&mut c, "counter"), vec!["rl:{counter}"], vec![]),
    ];
    let scripts = Arc::new(scripts);
    let barrier = Arc::new(Barrier::new(100));
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let (scripts, barrier, port) = (scripts.clone(), barrier.clone(), redis.port());
            std::thread::spawn(move || {
                let mut c = Resp::connect(port).unwrap();
                barrier.wait();
                scripts
                    .iter()
                    .map(|(s, keys, extra)| {
                        let args: Vec<&str> = ["60", "1000", "1"]
                            .into_iter()
                            .chain(extra.iter().copied())
                            .collect();
                        at(&mut c, s, keys, &args, 5_000)[0]
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut admitted = [0; 3];
    for t in threads {
        for (n, allowed) in admitted.iter_mut().zip(t.join().unwrap()) {
            *n += allowed;
        }
    }
    assert_eq!(
        admitted,
        [60, 60, 60],
        "log, buckets, counter admit exactly the limit"
    );
    // The log holds all 60 in one millisecond: one record, its running sum 60.
    let log = Window::read(&mut c, LOG_KEYS[0]);
    assert_eq!(
        (log.records, log.sum - log.gone),
        (vec![(5_000, 60)], 60),
        "no call of one millisecond was lost"
    );

    // The same with Redis's own clock: 100 pipelined calls land in very few milliseconds.
    let log = &scripts[0].0;
    let calls: Vec<Vec<&str>> = (0..100)
        .map(|_| {
            vec![
                "EVALSHA",
                log.sha(),
                "1",
                "rl:{t}",
                "1",
                "log",
                "1000",
                "60000",
            ]
        })
        .collect();
    let replies = c.pipeline(&calls).unwrap();
    assert!(replies.iter().all(|r| r.ints()[0] == 1));
    let peek = log.script.run(
        &mut c,
        &["rl:{t}"],
        &["0", "log", "1000", "60000", "action", "peek"],
    );
    assert_eq!(peek.ints()[..2], [1, 900]);
}

#[test]
fn buckets_count_costs_not_buckets() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let buckets = One::load(&mut c, "buckets");
    let mut call = |cost: &str, now| {
        at(
            &mut c,
            &buckets,
            &["rl:{b}"],
            &["10", "1000", cost, "bucket_ms", "100"],
            now,
        )
    };
    for i in 0..10 {
        assert_eq!(call("1", 1010), [1, 9 - i, 0, 1089]);
    }
    // Bucket 10 ([1000, 1100)) counts as if at 1099, so it leaves the window at 2099.
    assert_eq!(call("1", 1050), [0, 0, 1049, 1049]);
    assert_eq!(call("1", 2098), [0, 0, 1, 1]);
    assert_eq!(call("3", 2099), [1, 7, 0, 1000]);
    assert_eq!(call("8", 2150), [0, 7, 949, 949]);
    assert_eq!(call("11", 2150), [0, 7, -1, 949]);
}

#[test]
fn buckets_memory_stays_bounded_by_the_window() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let buckets = One::load(&mut c, "buckets");
    // 10 windows of traffic every 7 ms: 11 buckets overlap a window at most, plus 3 marks.
    for now in (0..10_000).step_by(7) {
        at(
            &mut c,
            &buckets,
            &["rl:{m}"],
            &["1000000", "1000", "1", "bucket_ms", "100"],
            now,
        );
        let ring = Window::read(&mut c, "rl:{m}");
        assert!(ring.capacity <= 10, "at {now}: {ring:?}");
    }
    // The window holds the costs of its buckets: the newest running sum minus the sum through
    // the buckets that left ("gone"); the records hold increasing indexes and sums.
    let ring = Window::read(&mut c, "rl:{m}");
    assert!(ring
        .records
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    assert_eq!(ring.oldest, ring.records[0].0, "the oldest bucket");
    assert_eq!(
        (ring.newest, ring.sum),
        *ring.records.last().unwrap(),
        "the newest bucket"
    );
    assert_eq!(
        ring.sum - ring.gone,
        (0..10_000).step_by(7).filter(|t| *t >= 8_900).count() as i64
    );
    let bytes = c.cmd(&["STRLEN", "rl:{m}"]).int();
    assert_eq!(bytes, 64 + 14 * ring.capacity, "a header and the ring");
}

/// A log or bucket window's key as lua/redis/entries.lua keeps it: a header of eight 64-bit
/// words (the newest bucket among them), then a ring of `capacity` records of the other
/// buckets (index and running sum, 56 bits each).
#[derive(Debug)]
struct Window {
    capacity: i64,
    gone: i64,
    oldest: i64,
    newest: i64,
    sum: i64,
    /// (bucket index, running sum through it), oldest first.
    records: Vec<(i64, i64)>,
}

impl Window {
    fn read(c: &mut Resp, key: &str) -> Self {
        let words: Vec<String> = (0..8).map(|i| format!("#{i}")).collect();
        let mut get = vec!["BITFIELD_RO", key];
        for word in &words {
            get.extend(["GET", "i64", word]);
        }
        let h = c.cmd(&get).ints();
        let (capacity, head, count) = (h[0], h[1], h[2]);
        let offsets: Vec<String> = (0..count - 1)
            .flat_map(|j| {
                let bit = 512 + 112 * ((head + j) % capacity);
                [bit.to_string(), (bit + 56).to_string()]
            })
            .collect();
        let mut get = vec!["BITFIELD_RO", key];
        for offset in &offsets {
            get.extend(["GET", "u56", offset]);
        }
        let fields = if count > 1 {
            c.cmd(&get).ints()
        } else {
            vec![]
        };
        Self {
            capacity,
            gone: h[3],
            oldest: h[5],
            newest: h[6],
            sum: h[7],
            records: fields
                .chunks(2)
                .map(|r| (r[0], r[1]))
                .chain([(h[6], h[7])])
                .collect(),
        }
    }
}

/// An hour of 1 s buckets, each holding cost: 14 bytes a bucket and the header (a sorted set
/// took 405 KB, a hash of the buckets 242 KB).
#[test]
fn an_hour_of_one_second_buckets_takes_14_bytes_a_bucket() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let buckets = One::load(&mut c, "buckets");
    let calls: Vec<Vec<String>> = (0..3_600i64)
        .map(|s| {
            let now = (1_700_000_000_000 + s * 1_000).to_string();
            let args = ["1", "buckets", "1000000", "3600000", "1000", "now_ms", &now];
            let mut call = vec!["EVALSHA", buckets.sha(), "1", "rl:{hour}"];
            call.extend(args);
            call.into_iter().map(String::from).collect()
        })
        .collect();
    for reply in c.pipeline(&calls).unwrap() {
        assert_eq!(reply.ints()[0], 1, "{reply:?}");
    }
    let usage = c
        .cmd(&["MEMORY", "USAGE", "rl:{hour}", "SAMPLES", "0"])
        .int();
    assert!(usage < 60_000, "MEMORY USAGE {usage} bytes");
    let ring = Window::read(&mut c, "rl:{hour}");
    assert_eq!((ring.records.len(), ring.sum - ring.gone), (3_600, 3_600));
}

#[test]
fn counter_weights_the_previous_window() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let counter = One::load(&mut c, "counter");
    let mut call = |now| at(&mut c, &counter, &["rl:{c}"], &["3", "1000", "1"], now);
    assert_eq!(call(1010), [1, 2, 0, 1990]);
    assert_eq!(call(1020), [1, 1, 0, 1980]);
    assert_eq!(call(1030), [1, 0, 0, 1970]);
    // Refused until 3 * (1000 - e) / 1000 + 1 <= 3 in the next window: e >= 334.
    assert_eq!(call(1040), [0, 0, 1294, 1960]);
    assert_eq!(call(2000), [0, 0, 334, 1000]);
    assert_eq!(call(2333), [0, 0, 1, 667]);
    assert_eq!(call(2334), [1, 0, 0, 1666]);
}

#[test]
fn refund_gives_cost_back() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let cases = [
        ("log", LOG_KEYS.to_vec(), vec![]),
        ("buckets", vec!["rl:{rb}"], vec!["bucket_ms", "100"]),
        ("counter", vec!["rl:{rc}"], vec![]),
    ];
    for (name, keys, extra) in cases {
        let script = One::load(&mut c, name);
        let args = |cost: &'static str, action: &'static str| -> Vec<&str> {
            ["5", "1000", cost]
                .into_iter()
                .chain(extra.iter().copied())
                .chain(["action", action])
                .collect()
        };
        assert_eq!(
            at(&mut c, &script, &keys, &args("3", "check"), 100)[..2],
            [1, 2],
            "{name}"
        );
        assert_eq!(
            at(&mut c, &script, &keys, &args("2", "check"), 150)[..2],
            [1, 0],
            "{name}"
        );
        assert_eq!(
            at(&mut c, &script, &keys, &args("1", "peek"), 160)[0],
            0,
            "{name}"
        );
        assert_eq!(
            at(&mut c, &script, &keys, &args("3", "refund"), 170)[..2],
            [1, 3],
            "{name}"
        );
        // A peek reports what would remain once recorded, and records nothing.
        assert_eq!(
            at(&mut c, &script, &keys, &args("3", "peek"), 180)[..2],
            [1, 0],
            "{name}"
        );
        assert_eq!(
            at(&mut c, &script, &keys, &args("2", "refund"), 190)[..2],
            [1, 5],
            "{name}"
        );
        assert_eq!(
            c.cmd(&["EXISTS", keys[0]]).int(),
            0,
            "{name}: an empty window leaves no key"
        );
    }
}

#[test]
fn keys_expire_when_the_window_empties() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    for (name, keys, extra) in [
        ("log", LOG_KEYS.to_vec(), vec![]),
        ("buckets", vec!["rl:{eb}"], vec!["bucket_ms", "1000"]),
        ("counter", vec!["rl:{ec}"], vec![]),
    ] {
        let script = One::load(&mut c, name);
        let args: Vec<&str> = ["5", "60000", "1"].into_iter().chain(extra).collect();
        let reset = script.run(&mut c, &keys, &args).ints()[3];
        for key in &keys {
            let ttl = c.cmd(&["PTTL", key]).int();
            assert!(
                ttl > 0 && ttl <= reset && reset <= 120_000,
                "{name} {key}: ttl {ttl}, reset {reset}"
            );
        }
    }
}

#[test]
fn noscript_after_script_flush_is_recovered() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    assert_eq!(at(&mut c, &log, &LOG_KEYS, &["2", "1000", "1"], 0)[0], 1);
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]).text(), "OK");
    let bare = c.cmd(&[
        "EVALSHA",
        log.sha(),
        "1",
        LOG_KEYS[0],
        "1",
        "log",
        "2",
        "1000",
        "now_ms",
        "1",
    ]);
    assert!(
        matches!(&bare, Reply::Error(e) if e.starts_with("NOSCRIPT")),
        "{bare:?}"
    );
    // Falls back to EVAL (which caches it again); the window kept its entry.
    assert_eq!(
        at(&mut c, &log, &LOG_KEYS, &["2", "1000", "1"], 2),
        [1, 0, 0, 1000]
    );
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", log.sha()]).ints(), [1]);
}

#[test]
fn bad_arguments_are_named_with_their_value() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    let buckets = One::load(&mut c, "buckets");
    let error = |reply: Reply| match reply {
        Reply::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["10", "-5", "1"])),
        "ERR window_ms of window 1 must be a positive integer, got -5"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["x", "5", "1"])),
        "ERR limit of window 1 must be a positive integer, got x"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1.5"])),
        "ERR cost must be a non-negative integer, got 1.5"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1", "action", "take"])),
        "ERR action must be check, peek, refund or owe, got take"
    );
    // `mode`, the option's former name, is still read.
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1", "mode", "take"])),
        "ERR mode must be check, peek, refund or owe, got take"
    );
    assert_eq!(
        error(log.run(
            &mut c,
            &LOG_KEYS,
            &["1", "5", "1", "action", "refund", "stamp_ms", "-1"]
        )),
        "ERR stamp_ms must be a non-negative integer below 2^52, got -1"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1", "stamp_ms", "7"])),
        "ERR stamp_ms goes with action refund or owe, got action check"
    );
    assert_eq!(
        error(buckets.run(&mut c, &["k"], &["1", "100000", "1", "bucket_ms", "1"])),
        "ERR bucket_ms of window 1 must be at least window_ms / 65536, got 1"
    );
    assert_eq!(
        error(buckets.run(&mut c, &["k"], &["1", "1000", "1", "bucket_ms", "300"])),
        "ERR bucket_ms of window 1 must be a divisor of window_ms, got 300"
    );
    let rule = &log.script;
    assert_eq!(
        error(rule.run(
            &mut c,
            &["a", "b"],
            &["1", "log", "5", "1000", "tally", "5", "1000"]
        )),
        "ERR algorithm of window 2 must be log, buckets or counter, got tally"
    );
    assert_eq!(
        error(rule.run(&mut c, &[], &["1"])),
        "ERR a rule needs at least one window (one key each), got 0 keys"
    );
}

#[test]
fn log_reads_a_lost_key_as_an_empty_window() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    let call = |c: &mut Resp, now| at(c, &log, &LOG_KEYS, &["3", "1000", "1"], now);
    for now in [1000, 1100, 1200] {
        call(&mut c, now);
    }
    // The sorted set goes (a DEL, or evicted under maxmemory).
    assert_eq!(c.cmd(&["DEL", LOG_KEYS[0]]).int(), 1);
    assert_eq!(call(&mut c, 1300), [1, 2, 0, 1000]);
    assert_eq!(call(&mut c, 1400), [1, 1, 0, 1000]);
    assert_eq!(call(&mut c, 1500), [1, 0, 0, 1000]);
    assert_eq!(call(&mut c, 1600), [0, 0, 700, 900]);
    // Past the new entries' window: the entry at 1300 left.
    assert_eq!(call(&mut c, 2300), [1, 0, 0, 1000]);
    assert_eq!(call(&mut c, 2350), [0, 0, 50, 950]);
}

#[test]
fn a_window_an_earlier_version_kept_as_a_sorted_set_reads_as_empty() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    c.cmd(&["ZADD", "rl:{old}", "3", "1000"]);
    let call = |c: &mut Resp| at(c, &log, &["rl:{old}"], &["3", "1000", "1"], 1_100);
    assert_eq!(call(&mut c), [1, 2, 0, 1000]);
    assert_eq!(c.cmd(&["TYPE", "rl:{old}"]).text(), "string");
}

#[test]
fn log_and_buckets_survive_eviction_under_maxmemory() {
    let redis =
        RedisServer::start_with(&["--maxmemory", "16mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    let buckets = One::load(&mut c, "buckets");
    let users = 60_000;
    // Three rounds over every user, 35 s apart in a 60 s window: a key evicted in one round
    // comes back in the next, and the third round expires the first one's entries.
    let mut errors = Vec::new();
    for round in 0..3i64 {
        let now = (1_700_000_000_000 + round * 35_000).to_string();
        let calls: Vec<Vec<String>> = (0..users)
            .flat_map(|u| {
                let log_call = [
                    "EVALSHA",
                    log.sha(),
                    "1",
                    &format!("e:{{{u}}}"),
                    "1",
                    "log",
                    "3",
                    "60000",
                    "now_ms",
                    &now,
                ]
                .map(String::from)
                .to_vec();
                let buckets_call = [
                    "EVALSHA",
                    buckets.sha(),
                    "1",
                    &format!("eb:{{{u}}}"),
                    "1",
                    "buckets",
                    "3",
                    "60000",
                    "1000",
                    "now_ms",
                    &now,
                ]
                .map(String::from)
                .to_vec();
                [log_call.clone(), log_call, buckets_call]
            })
            .collect();
        for chunk in calls.chunks(3_000) {
            for reply in c.pipeline(chunk).unwrap() {
                if !matches!(reply, Reply::Array(Some(_))) {
                    errors.push(reply);
                }
            }
        }
    }
    let evicted = c.cmd(&["INFO", "stats"]).text();
    let evicted: u64 = evicted
        .lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(evicted > 10_000, "the run must evict: {evicted}");
    assert_eq!(errors.len(), 0, "{:?}", &errors[..errors.len().min(5)]);
}

/// The rule script with `redis.call` wrapped so that every command it sends adds one to the
/// key "calls": the work of a call, counted without timing it.
fn counting_calls(client: &mut Resp, algorithm: &'static str) -> One {
    let prelude = "local redis = setmetatable({call = function(...)
          redis.call('INCR', 'calls')
          return redis.call(...)
        end}, {__index = redis})\n";
    let source = format!("{prelude}{}", slidewin_tests::redis::script_source());
    One::from(Script::from_source(client, source), algorithm)
}

#[test]
fn a_refused_buckets_call_sends_few_commands_at_any_number_of_buckets() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let buckets = counting_calls(&mut c, "buckets");
    let mut calls_per_refusal = Vec::new();
    for n in [60i64, 3_600] {
        // One call in each of n buckets of 1 s: the window is full.
        let (key, limit, window) = (
            format!("rl:{{b{n}}}"),
            n.to_string(),
            (n * 1000).to_string(),
        );
        let call = |c: &mut Resp, now: i64| {
            at(
                c,
                &buckets,
                &[&key],
                &[&limit, &window, "1", "bucket_ms", "1000"],
                now,
            )
        };
        for i in 0..n {
            assert_eq!(call(&mut c, i * 1000)[0], 1);
        }
        c.cmd(&["SET", "calls", "0"]);
        // Refused: the oldest bucket (0) leaves at 999 + window.
        assert_eq!(call(&mut c, n * 1000 - 1), [0, 0, 1000, n * 1000]);
        calls_per_refusal.push(c.cmd(&["GET", "calls"]).int());
    }
    // The front, the newest and the bucket whose leaving frees room: not one per bucket.
    assert!(
        calls_per_refusal.iter().all(|&n| n <= 4),
        "commands per refusal at 60 and 3600 buckets: {calls_per_refusal:?}"
    );
}

/// Remaining after a peek of cost 0 at `now` on a one-window `script` under `rule` (limit
/// window_ms [bucket_ms N]) with `options` (record ...).
fn room(c: &mut Resp, script: &One, key: &str, rule: &[&str], options: &[&str], now: i64) -> i64 {
    let args: Vec<&str> = rule[..2]
        .iter()
        .chain(&["0"])
        .chain(&rule[2..])
        .chain(&["action", "peek"])
        .chain(options)
        .copied()
        .collect();
    at(c, script, &[key], &args, now)[1]
}

#[test]
fn recorded_units_count_in_each_window_for_as_long_as_their_stamps_say() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    // 4 units admitted elsewhere at 4700 and 3 at 4900, told at 5000; limit 10 a second.
    let record = ["record", "300:4 100:3"];
    for (algorithm, rule, times) in [
        // The log: the 4 leave at 5700, the 3 at 5900.
        (
            "log",
            &["10", "1000"][..],
            [(5699, 3), (5700, 7), (5899, 7), (5900, 10)],
        ),
        // Buckets of 100 ms: bucket 47 leaves at 5799, bucket 49 at 5999.
        (
            "buckets",
            &["10", "1000", "bucket_ms", "100"][..],
            [(5798, 3), (5799, 7), (5998, 7), (5999, 10)],
        ),
        // The counter records them at now (5000): the whole current window, then weighted
        // in the next one, ceil(7 * (1000 - e) / 1000).
        (
            "counter",
            &["10", "1000"][..],
            [(5999, 3), (6000, 3), (6500, 6), (7000, 10)],
        ),
    ] {
        let script = One::load(&mut c, algorithm);
        let key = format!("rl:{{record-{algorithm}}}");
        assert_eq!(
            room(&mut c, &script, &key, rule, &record, 5000),
            3,
            "{algorithm}"
        );
        for (now, remaining) in times {
            assert_eq!(
                room(&mut c, &script, &key, rule, &[], now),
                remaining,
                "{algorithm} at {now}"
            );
        }
        // Units older than the window are out of it: nothing recorded.
        let key = format!("rl:{{old-{algorithm}}}");
        assert_eq!(
            room(
                &mut c,
                &script,
                &key,
                rule,
                &["record", "1100:5 2000:5"],
                5000
            ),
            10,
            "{algorithm}"
        );
    }
}

#[test]
fn recorded_units_are_kept_over_the_limit_and_an_earlier_stamp_moves_later() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    // 25 admitted elsewhere just now, limit 10: kept, and this check refused until they leave.
    let over = |c: &mut Resp, now| {
        at(
            c,
            &log,
            &["rl:{over}"],
            &["10", "1000", "1", "record", "0:25"],
            now,
        )
    };
    assert_eq!(over(&mut c, 5000), [0, 0, 1000, 1000]);
    assert_eq!(
        room(&mut c, &log, "rl:{over}", &["10", "1000"], &[], 5999),
        0
    );
    assert_eq!(
        room(&mut c, &log, "rl:{over}", &["10", "1000"], &[], 6000),
        10
    );
    // A stamp (4600) before the window's newest (5000) goes in with the newest: it leaves at
    // 6000, not 5600.
    let mut call = |args: &[&str], now| at(&mut c, &log, &["rl:{late}"], args, now);
    assert_eq!(call(&["10", "1000", "1"], 5000), [1, 9, 0, 1000]);
    assert_eq!(
        call(
            &["10", "1000", "0", "action", "peek", "record", "500:2"],
            5100
        ),
        [1, 7, 0, 900]
    );
    assert_eq!(
        call(&["10", "1000", "0", "action", "peek"], 5999),
        [1, 7, 0, 1]
    );
    assert_eq!(
        call(&["10", "1000", "0", "action", "peek"], 6000),
        [1, 10, 0, 0]
    );
    // With the lease hash (a leasing limiter's calls carry it), and with a check: recorded first.
    let rule = &log.script;
    let reply = rule
        .run(
            &mut c,
            &["rl:{leased}", "rl:{leased}:leases"],
            &["1", "log", "10", "1000", "record", "0:4", "now_ms", "5000"],
        )
        .ints();
    assert_eq!(reply, [1, 5, 0, 1000, 1, 5000]);
}

#[test]
fn a_bad_record_is_named_with_its_entry() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = One::load(&mut c, "log");
    for (record, error) in [
        (
            "5",
            "ERR record must be \"AGE_MS:UNITS ...\" separated by spaces, got 5",
        ),
        (
            "1:2 3:x",
            "ERR UNITS of 3:x in record must be a non-negative integer, got x",
        ),
        (
            "-1:2",
            "ERR AGE_MS of -1:2 in record must be a non-negative integer, got -1",
        ),
        (
            "1:2:3",
            "ERR record must be \"AGE_MS:UNITS ...\" separated by spaces, got 1:2:3",
        ),
    ] {
        match log.run(&mut c, &LOG_KEYS, &["10", "1000", "1", "record", record]) {
            Reply::Error(e) => assert_eq!(e, error),
            other => panic!("{record}: expected an error, got {other:?}"),
        }
    }
    // Nothing was recorded by the calls refused for their arguments.
    assert_eq!(
        room(&mut c, &log, LOG_KEYS[0], &["10", "1000"], &[], 5000),
        10
    );
}
