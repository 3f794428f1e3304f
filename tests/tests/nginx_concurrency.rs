//! Concurrency limits (resty.slidewin.concurrency) inside real nginx with 4 workers
//! (nginx/concurrency.conf): the limit holds exactly across workers, 429 + Retry-After, the
//! slots of a SIGKILLed worker come back, a release that never comes ends with its lease, and
//! the counts leave both out at once, with no request entering the key again.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::load::hammer;
use slidewin_tests::nginx::Nginx;

#[test]
fn sixteen_clients_against_four_workers_never_have_more_than_the_limit_in_flight() {
    let nginx = Nginx::start("concurrency.conf", 4);
    let responses = hammer(&nginx, "/slow/four?ms=100", 16, 2_000);
    let admitted: Vec<_> = responses.iter().filter(|r| r.status == 200).collect();
    let refused: Vec<_> = responses.iter().filter(|r| r.status == 429).collect();
    assert_eq!(admitted.len() + refused.len(), responses.len());
    let most = admitted
        .iter()
        .map(|r| r.header("X-Inflight").unwrap().parse::<u32>().unwrap())
        .max()
        .unwrap();
    assert_eq!(most, 4, "the most in flight at once, across the workers");
    // 2 s of 100 ms requests through 4 slots: about 80 admitted.
    assert!(
        (40..=84).contains(&admitted.len()),
        "admitted {}",
        admitted.len()
    );
    assert!(refused.iter().all(|r| r.header("Retry-After") == Some("1")));
    let stats = nginx.eval(
        "local s = require('resty.slidewin.concurrency').get('four'):stats() \
         return s.inflight .. ' ' .. s.admitted .. ' ' .. s.refused",
    );
    assert_eq!(
        stats.body,
        format!("0 {} {}", admitted.len(), refused.len()),
        "every slot came back"
    );

    // A live limit, for every worker at once.
    let set = nginx.eval(
        "local c = require('resty.slidewin.concurrency').get('four') \
         assert(c:set_limit(8)) local ok, err = c:set_limit(17) return c:limit() .. ' ' .. err",
    );
    assert_eq!(
        set.body,
        "8 slots:set_limit: limit must be a positive integer at most max_limit, got 17"
    );
    let responses = hammer(&nginx, "/slow/four?ms=100", 16, 1_000);
    let most = responses
        .iter()
        .filter_map(|r| r.header("X-Inflight"))
        .map(|n| n.parse::<u32>().unwrap())
        .max();
    assert_eq!(most, Some(8));
}

#[test]
fn bad_configs_are_refused_naming_the_field_and_value() {
    let nginx = Nginx::start("concurrency.conf", 1);
    let in_worker = nginx.eval(
        "local _, err = require('resty.slidewin.concurrency').new{ name = 'x', limit = 1 } return err",
    );
    assert_eq!(
        in_worker.body,
        "a concurrency limit must be made in init_by_lua* (before the workers fork), not in content"
    );
    // The checks run before the phase's in the Rust constructor too.
    let raw = nginx.eval(
        "local ok, err = pcall(require('slidewin').concurrency, { name = 'x', limit = -5, max_hold_ms = 1 }) \
         local ok2, err2 = pcall(require('slidewin').concurrency, { name = 'x', limit = 3, max_limit = 2, max_hold_ms = 1 }) \
         local ok3, err3 = pcall(require('slidewin').concurrency, { name = 'x', limit = 1, max_hold_ms = 1, max_key_bytes = 1e12 }) \
         return err .. '|' .. err2 .. '|' .. err3",
    );
    assert_eq!(
        raw.body,
        "slidewin.concurrency: limit must be a positive integer, got -5|\
         slidewin.concurrency: limit must be a positive integer at most max_limit, got 3|\
         slidewin.concurrency: max_key_bytes must be from 16 to 65536, got 1000000000000"
    );
}

/// Two requests hold the slots of `killed` (limit 2) for 20 s; returns their worker pids.
fn hold_both(nginx: &Nginx) -> Vec<u32> {
    let port = nginx.port();
    for _ in 0..2 {
        thread::spawn(move || {
            let _ = std::net::TcpStream::connect(("127.0.0.1", port)).map(|mut s| {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /slow/killed?ms=20000 HTTP/1.1\r\nHost: x\r\n\r\n");
                let _ = s.read_to_end(&mut Vec::new());
            });
        });
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let held = nginx
            .eval("return require('resty.slidewin.concurrency').get('killed'):inflight('all')");
        if held.body == "2" {
            break;
        }
        assert!(Instant::now() < deadline, "the two holders never entered");
        thread::sleep(Duration::from_millis(20));
    }
    let pids = nginx.get("/holders").body;
    pids.lines().map(|l| l.parse().unwrap()).collect()
}

#[test]
fn a_worker_killed_holding_slots_gives_them_back_within_a_second() {
    let nginx = Nginx::start("concurrency.conf", 4);
    let pids = hold_both(&nginx);
    assert_eq!(pids.len(), 2);
    assert_eq!(
        nginx.get("/slow/killed?ms=1").status,
        429,
        "both slots held"
    );
    for pid in &pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    let killed = Instant::now();
    // Within 1 s a request finds both slots free again (two at once, a third refused).
    let mut statuses = Vec::new();
    while killed.elapsed() < Duration::from_secs(1) {
        let status = nginx.get("/slow/killed?ms=1").status;
        if status == 200 {
            statuses.push(status);
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(statuses, [200], "free again within 1 s of the kill");
    let stats = nginx.eval(
        "local s = require('resty.slidewin.concurrency').get('killed'):stats() \
         return s.inflight .. ' ' .. s.dead_owner",
    );
    assert_eq!(stats.body, "0 2", "both slots freed as their owner's");
    assert!(nginx.error_log().contains("exited on signal 9"));
}

/// `c:inflight('all')`, `c:stats().inflight` and `dead_owner .. expired` of limit `name`.
fn counts(nginx: &Nginx, name: &str) -> String {
    nginx
        .eval(&format!(
            "local c = require('resty.slidewin.concurrency').get('{name}') local s = c:stats() \
             return c:inflight('all') .. ' ' .. s.inflight .. ' ' \
                 .. s.dead_owner .. ' ' .. s.expired"
        ))
        .body
}

/// Whether process `pid` runs (exists and is no zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

#[test]
fn counts_leave_out_killed_workers_slots_with_no_new_enter() {
    let nginx = Nginx::start("concurrency.conf", 4);
    let pids = hold_both(&nginx);
    for pid in &pids {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    // A killed process runs its exit for a moment after the signal; then it is a zombie or gone.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|pid| running(*pid)) {
        assert!(Instant::now() < deadline, "the killed workers never exited");
        thread::sleep(Duration::from_millis(5));
    }
    // Read by a surviving or a new worker, the key never entered again.
    assert_eq!(counts(&nginx, "killed"), "0 0 2 0");
    assert!(nginx.error_log().contains("exited on signal 9"));
}

#[test]
fn a_lease_that_ends_on_an_idle_key_stops_counting() {
    let nginx = Nginx::start("concurrency.conf", 2);
    // /leaky's log phase releases nothing: both slots stay held until their lease (1000 ms).
    assert_eq!(nginx.get("/leaky/lease").status, 200);
    assert_eq!(nginx.get("/leaky/lease").status, 200);
    let entered = Instant::now();
    assert_eq!(counts(&nginx, "lease"), "2 2 0 0");
    thread::sleep(Duration::from_millis(1_100).saturating_sub(entered.elapsed()));
    assert_eq!(counts(&nginx, "lease"), "0 0 0 2", "no request came since");
}

#[test]
fn a_release_that_never_comes_ends_with_the_lease_and_refusals_carry_the_status() {
    let nginx = Nginx::start("concurrency.conf", 2);
    // /leaky's log phase releases nothing: two requests keep both slots (max_hold_ms 1000).
    assert_eq!(nginx.get("/leaky/lease").status, 200);
    let entered = Instant::now();
    assert_eq!(nginx.get("/leaky/lease").status, 200);
    let refused = nginx.get("/leaky/lease");
    assert_eq!(refused.status, 503, "the configured status");
    assert_eq!(
        refused.header("Retry-After"),
        Some("3"),
        "2500 ms, rounded up"
    );
    while entered.elapsed() < Duration::from_millis(800) {
        assert_eq!(
            nginx.get("/leaky/lease").status,
            503,
            "held until the lease ends"
        );
        thread::sleep(Duration::from_millis(100));
    }
    thread::sleep(Duration::from_millis(1_150).saturating_sub(entered.elapsed()));
    assert_eq!(nginx.get("/leaky/lease").status, 200, "the leases ran out");
    assert_eq!(nginx.get("/leaky/lease").status, 200);
    assert_eq!(nginx.get("/leaky/lease").status, 503);
    let stats = nginx.eval(
        "local s = require('resty.slidewin.concurrency').get('lease'):stats() \
         return s.expired .. ' ' .. s.inflight",
    );
    assert_eq!(stats.body, "2 2");
}
