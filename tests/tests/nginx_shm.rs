//! The shared-memory store (the default) inside real nginx with several workers
//! (nginx/shm.conf): exact limits across workers, workers SIGKILLed under load, reloads, and
//! a flood of distinct keys against a bounded region.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::http::Response;
use slidewin_tests::load::{admitted_times, busiest_window, hammer, reload, try_get, worker_pids};
use slidewin_tests::nginx::Nginx;

#[test]
fn four_workers_admit_exactly_the_limit_in_every_window() {
    let nginx = Nginx::start("shm.conf", 4);
    for (limiter, exact) in [("log", true), ("buckets", false)] {
        let responses = hammer(&nginx, &format!("/limit/{limiter}?user=hot"), 16, 2_500);
        assert!(responses.iter().all(|r| r.status == 200 || r.status == 429));
        let pids: std::collections::BTreeSet<_> = responses
            .iter()
            .filter_map(|r| r.header("X-Worker-Pid"))
            .collect();
        assert!(
            pids.len() >= 2,
            "{limiter}: several workers served: {pids:?}"
        );
        let (certain, _) = busiest_window(admitted_times(&responses), 1_000);
        assert!(
            certain <= 100,
            "{limiter}: {certain} admitted in one window"
        );
        if exact {
            assert_eq!(
                certain, 100,
                "{limiter}: a saturated window holds exactly the limit"
            );
        }
    }
    // Many keys at once: each holds its own limit.
    let responses: Vec<(usize, Response)> = thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|key| {
                let nginx = &nginx;
                s.spawn(move || {
                    let path = format!("/limit/log?user=many-{key}");
                    let out = hammer(nginx, &path, 2, 1_500);
                    out.into_iter().map(|r| (key, r)).collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    for key in 0..8 {
        let of_key: Vec<_> = responses
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, r)| r.clone())
            .collect();
        let (certain, _) = busiest_window(admitted_times(&of_key), 1_000);
        assert!(certain <= 100, "key {key}: {certain}");
        assert!(
            of_key.iter().any(|r| r.status == 429),
            "key {key} was saturated"
        );
    }
    let metrics = nginx.get("/metrics").body;
    assert!(
        metrics.contains("slidewin_keys{limiter=\"log\"} 9\n"),
        "{metrics}"
    );
}

#[test]
fn workers_killed_under_load_leave_no_deadlock_and_the_limits_hold() {
    let nginx = Nginx::start("shm.conf", 4);
    let port = nginx.port();
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut kills, mut answered) = (0, 0);
    thread::scope(|s| {
        let load: Vec<_> = (0..8)
            .map(|c| {
                s.spawn(move || {
                    let mut n = 0;
                    while Instant::now() < deadline {
                        let path = format!("/limit/log?user=storm-{}", c % 3);
                        n += try_get(port, &path).is_some() as usize;
                    }
                    n
                })
            })
            .collect();
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(250));
            if let Some(&pid) = worker_pids(&nginx).first() {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                kills += 1;
            }
        }
        answered = load.into_iter().map(|h| h.join().unwrap()).sum::<usize>();
    });
    assert!(
        kills >= 40 && answered > 1_000,
        "kills {kills}, answered {answered}"
    );
    // The master restarts the last one; then a fresh key gets exactly its limit across the
    // (restarted) workers.
    thread::sleep(Duration::from_millis(500));
    let statuses: Vec<u16> = hammer(&nginx, "/limit/slow?user=after", 8, 800)
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 50);
    let log = nginx.error_log();
    assert!(log.contains("exited on signal 9"), "workers were killed");
    for crash in ["signal 11", "signal 6", "signal 7"] {
        assert!(!log.contains(crash), "a worker crashed by itself: {log}");
    }
}

#[test]
fn a_reload_keeps_every_window_and_a_changed_layout_starts_afresh_saying_so() {
    let nginx = Nginx::start("shm.conf", 2);
    // limit 50 per 4 s: 30 before the reload, then traffic through it.
    let before = (0..30)
        .filter(|_| nginx.get("/limit/slow?user=r").status == 200)
        .count();
    assert_eq!(before, 30);
    reload(&nginx);
    let during = hammer(&nginx, "/limit/slow?user=r", 4, 1_500);
    let admitted = during.iter().filter(|r| r.status == 200).count();
    assert_eq!(admitted, 20, "the reload is not a free burst");
    assert!(!nginx.error_log().contains("layout changed"));

    // Same name, another limit: a new region, one line in error.log.
    let conf = nginx.prefix.dir.join("conf/shm.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let changed = text.replace(
        "limit = 50, window_ms = 4000",
        "limit = 60, window_ms = 4000",
    );
    assert_ne!(text, changed);
    std::fs::write(&conf, changed).unwrap();
    reload(&nginx);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !nginx.error_log().contains("layout changed") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    let log = nginx.error_log();
    assert_eq!(
        log.matches("shared limiter \"slow\": its layout changed")
            .count(),
        1,
        "{log}"
    );
    thread::sleep(Duration::from_millis(500)); // the old workers drain
    let after = (0..70)
        .filter(|_| nginx.get("/limit/slow?user=r").status == 200)
        .count();
    assert_eq!(after, 60, "afresh, with the new limit");
}

fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_flood_of_distinct_long_keys_stays_in_the_region_and_counts_evictions() {
    let nginx = Nginx::start("shm.conf", 1);
    // Keys of 1 to 8000 bytes, made inside the worker (a million over HTTP would take minutes).
    let flood = |from: u32, to: u32| {
        let lua = format!(
            r#"local lim = require("limits"):get("tiny").store.lim
            local prefixes = {{}}
            for i = 1, 64 do prefixes[i] = string.rep(string.char(64 + i), (i * 125) % 8000) end
            for i = {from}, {to} do
                assert(lim:decide(prefixes[i % 64 + 1] .. i, 1, true))
            end
            collectgarbage()
            return ngx.worker.pid()"#
        );
        let r = nginx.eval(&lua);
        assert_eq!(r.status, 200, "{}", r.body);
        r.body.parse::<u32>().unwrap()
    };
    let pid = flood(1, 100_000);
    let rss_before = rss_kb(pid);
    assert_eq!(flood(100_001, 1_000_000), pid);
    let rss_after = rss_kb(pid);
    assert!(
        rss_after <= rss_before + 2_048,
        "RSS grew from {rss_before} kB to {rss_after} kB"
    );
    let stats = nginx.eval(
        "local s = require('limits'):get('tiny').store:stats() \
         return s.keys .. ' ' .. s.capacity .. ' ' .. s.evictions",
    );
    let v: Vec<u64> = stats.body.split(' ').map(|x| x.parse().unwrap()).collect();
    assert!(
        v[0] <= v[1] && v[1] > 100,
        "keys {} of capacity {}",
        v[0],
        v[1]
    );
    assert!(v[2] >= 1_000_000 - v[1], "evictions {}", v[2]);
    let metrics = nginx.get("/metrics").body;
    assert!(
        metrics.contains(&format!(
            "slidewin_evictions_total{{limiter=\"tiny\"}} {}\n",
            v[2]
        )),
        "{metrics}"
    );
    // A config too large for its size is refused, naming size.
    let err = nginx.eval("return require('limits').errors.huge");
    assert!(
        err.body
            .starts_with("slidewin.limiter: size must be at least ")
            && err.body.ends_with(", got 1048576"),
        "{}",
        err.body
    );
}

/// 8 clients on 50 keys in turn for `ms` on limiter `name`: each key's admissions.
fn fifty_keys(nginx: &Nginx, name: &str, ms: u64) -> Vec<Vec<(i64, i64)>> {
    let deadline = Instant::now() + Duration::from_millis(ms);
    let answers: Vec<(usize, Response)> = thread::scope(|s| {
        let clients: Vec<_> = (0..8)
            .map(|client| {
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mut key = client;
                    while Instant::now() < deadline {
                        let path = format!("/limit/{name}?user=k{}", key % 50);
                        out.push((key % 50, nginx.get(&path)));
                        key += 1;
                    }
                    out
                })
            })
            .collect();
        clients
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    (0..50)
        .map(|key| {
            let of_key: Vec<Response> = answers
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, r)| r.clone())
                .collect();
            admitted_times(&of_key)
        })
        .collect()
}

#[test]
fn a_region_too_small_warns_and_with_full_refuse_admits_no_key_past_its_limit() {
    let nginx = Nginx::start("shm.conf", 4);
    let capacity = nginx.eval("return require('limits'):get('tight').store:stats().capacity");
    let capacity: usize = capacity.body.parse().unwrap();
    assert!(capacity < 50, "capacity {capacity}");
    let tight = fifty_keys(&nginx, "tight", 2_500);
    for (key, times) in tight.iter().enumerate() {
        let (certain, _) = busiest_window(times.clone(), 1_000);
        assert!(certain <= 10 && times.len() <= 50, "k{key}: {times:?}");
    }
    let admitted = tight.iter().filter(|t| !t.is_empty()).count();
    assert!(
        admitted >= capacity,
        "{admitted} keys admitted of {capacity} ways"
    );
    let stats = nginx.eval(
        "local s = require('limits'):get('tight').store:stats() \
         return s.evictions .. ' ' .. s.full_refusals",
    );
    let refusals = stats
        .body
        .strip_prefix("0 ")
        .map(|n| n.parse::<u64>().unwrap());
    assert!(refusals.is_some_and(|n| n > 0), "{}", stats.body);

    let small = fifty_keys(&nginx, "small", 2_500);
    let over = small
        .iter()
        .filter(|t| busiest_window(t.to_vec(), 1_000).0 > 10);
    assert!(over.count() > 0, "evictions forget windows");
    let log = nginx.error_log();
    let warning = log.lines().find(|l| l.contains("slidewin small is full: "));
    let warning = warning.unwrap_or_else(|| panic!("{log}"));
    assert!(warning.contains("[warn]"), "{warning}");
    let tail = format!("it holds {capacity} keys: raise size or set full = \"refuse\"");
    assert!(warning.contains(&tail), "{warning}");
    assert!(!log.contains("slidewin tight is full"), "{log}");
}

#[test]
fn a_shm_store_made_after_the_fork_is_refused_naming_the_phase() {
    let nginx = Nginx::start("shm.conf", 1);
    let r = nginx.eval(
        "local sw, err = require('resty.slidewin').new{ name = 'late', limit = 1, window_ms = 1000 } \
         return tostring(sw) .. ' ' .. err",
    );
    assert_eq!(
        r.body,
        "nil store \"shm\" must be made in init_by_lua* (before the workers fork), not in content"
    );
}
