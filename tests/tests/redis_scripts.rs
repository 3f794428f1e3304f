//! The Redis scripts in lua/redis/ run directly on a real redis-server, on their edge cases.

use slidewin_tests::redis::{RedisServer, Script};
use slidewin_tests::resp::{Reply, Resp};
use std::sync::{Arc, Barrier};

/// `{allowed, remaining, retry_after_ms, reset_after_ms}` of one call at `now_ms`.
fn at(client: &mut Resp, script: &Script, keys: &[&str], args: &[&str], now_ms: i64) -> [i64; 4] {
    let now = now_ms.to_string();
    let args: Vec<&str> = args.iter().copied().chain(["now_ms", &now]).collect();
    script
        .run(client, keys, &args)
        .ints()
        .try_into()
        .expect("four integers")
}

const LOG_KEYS: [&str; 2] = ["rl:{log}", "rl:{log}:m"];

#[test]
fn log_admits_the_limit_and_retry_after_is_exact() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let log = Script::load(&mut c, "log");
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
    let log = Script::load(&mut c, "log");
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
    let scripts: Vec<(Script, Vec<&str>, Vec<&str>)> = vec![
        (Script::load(&mut c, "log"), LOG_KEYS.to_vec(), vec![]),
        (
            Script::load(&mut c, "buckets"),
            vec!["rl:{buckets}"],
            vec!["bucket_ms", "100"],
        ),
        (
            Script::load(&mut c, "counter"),
            vec!["rl:{counter}"],
            vec![],
        ),
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
    assert_eq!(
        c.cmd(&["ZCARD", LOG_KEYS[0]]).int(),
        60,
        "no two log members collided"
    );
    assert_eq!(c.cmd(&["HGET", LOG_KEYS[1], "sum"]).int(), 60);

    // The same with Redis's own clock: 100 pipelined calls land in very few milliseconds.
    let log = &scripts[0].0;
    let calls: Vec<Vec<&str>> = (0..100)
        .map(|_| {
            vec![
                "EVALSHA",
                log.sha(),
                "2",
                "rl:{t}",
                "rl:{t}:m",
                "1000",
                "60000",
                "1",
            ]
        })
        .collect();
    let replies = c.pipeline(&calls).unwrap();
    assert!(replies.iter().all(|r| r.ints()[0] == 1));
    assert_eq!(c.cmd(&["ZCARD", "rl:{t}"]).int(), 100);
}

#[test]
fn buckets_count_costs_not_buckets() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let buckets = Script::load(&mut c, "buckets");
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
    let buckets = Script::load(&mut c, "buckets");
    // 10 windows of traffic every 7 ms: 11 buckets overlap a window at most, plus 4 fields.
    for now in (0..10_000).step_by(7) {
        at(
            &mut c,
            &buckets,
            &["rl:{m}"],
            &["1000000", "1000", "1", "bucket_ms", "100"],
            now,
        );
        assert!(c.cmd(&["HLEN", "rl:{m}"]).int() <= 15, "at {now}");
    }
    // The total is the sum of the buckets' counts, not their number.
    let fields = match c.cmd(&["HGETALL", "rl:{m}"]) {
        Reply::Array(Some(items)) => items.iter().map(Reply::text).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    let pairs: Vec<(&str, i64)> = fields
        .chunks(2)
        .map(|p| (p[0].as_str(), p[1].parse().unwrap()))
        .collect();
    let sum: i64 = pairs
        .iter()
        .filter(|(f, _)| f.parse::<i64>().is_ok())
        .map(|(_, n)| n)
        .sum();
    let total = pairs.iter().find(|(f, _)| *f == "t").unwrap().1;
    assert_eq!(total, sum);
    assert_eq!(
        total,
        (0..10_000).step_by(7).filter(|t| *t >= 8_900).count() as i64
    );
}

#[test]
fn counter_weights_the_previous_window() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let counter = Script::load(&mut c, "counter");
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
        let script = Script::load(&mut c, name);
        let args = |cost: &'static str, mode: &'static str| -> Vec<&str> {
            ["5", "1000", cost]
                .into_iter()
                .chain(extra.iter().copied())
                .chain(["mode", mode])
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
        let script = Script::load(&mut c, name);
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
    let log = Script::load(&mut c, "log");
    assert_eq!(at(&mut c, &log, &LOG_KEYS, &["2", "1000", "1"], 0)[0], 1);
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]).text(), "OK");
    let bare = c.cmd(&[
        "EVALSHA",
        log.sha(),
        "2",
        LOG_KEYS[0],
        LOG_KEYS[1],
        "2",
        "1000",
        "1",
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
    let log = Script::load(&mut c, "log");
    let buckets = Script::load(&mut c, "buckets");
    let error = |reply: Reply| match reply {
        Reply::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["10", "-5", "1"])),
        "ERR window_ms must be a positive integer, got -5"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["x", "5", "1"])),
        "ERR limit must be a positive integer, got x"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1.5"])),
        "ERR cost must be a non-negative integer, got 1.5"
    );
    assert_eq!(
        error(log.run(&mut c, &LOG_KEYS, &["1", "5", "1", "mode", "take"])),
        "ERR mode must be check, peek or refund, got take"
    );
    assert_eq!(
        error(buckets.run(&mut c, &["k"], &["1", "100000", "1", "bucket_ms", "1"])),
        "ERR bucket_ms must be at least window_ms / 65536, got 1"
    );
    assert_eq!(
        error(buckets.run(&mut c, &["k"], &["1", "1000", "1", "bucket_ms", "300"])),
        "ERR bucket_ms must be a divisor of window_ms, got 300"
    );
}
