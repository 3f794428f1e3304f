//! Reservations inside real nginx (`/reserve/` of nginx/shm.conf and nginx/redis.conf):
//! `sw:reserve` in the access phase, `sw:settle` in the log phase, on store `shm` shared by two
//! workers, and on store `redis` (a real redis-server) shared by two workers, where the log
//! phase settles from a timer.

use std::thread;
use std::time::Duration;

use slidewin_tests::http::Response;
use slidewin_tests::nginx::Nginx;
use slidewin_tests::redis::RedisServer;

/// `n` requests of `user` to `limiter`, one at a time, each reserving `cost` and settling
/// `actual`.
fn reserve(
    (nginx, limiter): (&Nginx, &str),
    user: &str,
    cost: u64,
    actual: u64,
    n: usize,
) -> Vec<Response> {
    (0..n)
        .map(|_| {
            let response = nginx.get(&format!(
                "/reserve/{limiter}?user={user}&cost={cost}&actual={actual}"
            ));
            // The log phase settles after the response is sent: let it run.
            thread::sleep(Duration::from_millis(50));
            response
        })
        .collect()
}

fn statuses(responses: &[Response]) -> Vec<u16> {
    responses.iter().map(|r| r.status).collect()
}

/// `limiter` of `nginx` (log 20 a minute, buckets 30 a minute) keeps what the calls used,
/// exactly.
fn settled_reservations_keep_only_what_the_calls_used(nginx: &Nginx, limiter: &str) {
    let at = (nginx, limiter);
    // 20 a minute: each call reserves 10 and uses 2. Before the k-th call the window holds
    // 2 (k - 1), so it fits while 2 (k - 1) + 10 <= 20: six calls, then refusals.
    let settled = reserve(at, "a", 10, 2, 8);
    assert_eq!(statuses(&settled), [200, 200, 200, 200, 200, 200, 429, 429]);
    let sixth = &settled[5];
    let rate = sixth.header("RateLimit").unwrap();
    assert!(rate.starts_with(&format!("\"{limiter}\";r=0;t=")), "{rate}");
    // The seventh waits for the first call's 2 units to leave, a minute after they came.
    let wait: u64 = settled[6].header("Retry-After").unwrap().parse().unwrap();
    assert!((59..=60).contains(&wait), "{wait}");
    // Calls that use all they reserve: two fit.
    assert_eq!(statuses(&reserve(at, "b", 10, 10, 3)), [200, 200, 429]);
    // A cost above the rule's second window (30 by buckets) never fits.
    assert_eq!(statuses(&reserve(at, "c", 31, 0, 1)), [429]);
}

#[test]
fn a_settled_reservation_keeps_only_what_the_call_used() {
    settled_reservations_keep_only_what_the_calls_used(&Nginx::start("shm.conf", 2), "tokens");
}

#[test]
fn store_redis_settles_at_the_stamp_from_the_log_phase() {
    let redis = RedisServer::start();
    let port = redis.port().to_string();
    let nginx = Nginx::start_with_env("redis.conf", 2, &[("SLIDEWIN_REDIS_PORT", port)]);
    // Per request, and with leases (a reservation is then a per-request check too).
    for limiter in ["tokens", "tokens-lease"] {
        settled_reservations_keep_only_what_the_calls_used(&nginx, limiter);
        // Reserved 6 x 10 + 2 x 10; used 6 x 2 + 2 x 10, the rest given back from the log
        // phase's timers (counted node-wide: redis.conf's metrics_dict).
        let metrics = nginx.get("/metrics").body;
        for (kind, units) in [("reserved", 80), ("used", 32), ("given_back", 48)] {
            let line = format!(
                "slidewin_reservation_units_total{{limiter=\"{limiter}\",kind=\"{kind}\"}} {units}\n"
            );
            assert!(metrics.contains(&line), "{line}{metrics}");
        }
        // Redis holds what was used: "a"'s six calls' 2 units each, 8 left of the first window.
        let peek = format!(
            "local allowed, remaining = require('limits'):get('{limiter}'):decide('a', 0, false) \
             return tostring(allowed) .. ' ' .. remaining"
        );
        assert_eq!(nginx.eval(&peek).body, "true 8", "{limiter}");
        // Debt mode: a call of 2 that used 45 owes 43 at its stamp, from the log phase's
        // timer: the log of 20 holds 40 (twice its limit), the buckets of 30 all 45.
        let owing = format!("/reserve/{limiter}?user=o&cost=2&actual=45&above=debt");
        assert_eq!(nginx.get(&owing).status, 200);
        thread::sleep(Duration::from_millis(300));
        let line =
            format!("slidewin_reservation_units_total{{limiter=\"{limiter}\",kind=\"owed\"}} 43\n");
        let metrics = nginx.get("/metrics").body;
        assert!(
            metrics.contains(&line),
            "{line}{metrics}{}",
            nginx.error_log()
        );
        let refused = reserve((&nginx, limiter), "o", 1, 1, 1);
        assert_eq!(statuses(&refused), [429]);
        // Until the stamp leaves: a minute, and up to a second more for its 1 s bucket.
        let wait: u64 = refused[0].header("Retry-After").unwrap().parse().unwrap();
        assert!((59..=61).contains(&wait), "{wait}");
    }
    // The ticket's stamp is the check's reply: Redis's time (this machine's clock) in ms. In
    // the content phase, settling calls Redis at once.
    let body = nginx
        .eval(
            "local slidewin = require('slidewin') \
             local sw = require('limits'):get('tokens') \
             local before = slidewin.now_ms() \
             local t = sw:reserve('d', 5) \
             local after = slidewin.now_ms() \
             local ok = sw:settle(t, 1) \
             local _, remaining = sw:decide('d', 0, false) \
             return table.concat({ tostring(ok), t.cost, remaining, \
                 tostring(t.stamp_ms % 1 == 0 and t.stamp_ms >= before and t.stamp_ms <= after) }, ' ')",
        )
        .body;
    assert_eq!(body, "true 5 19 true");
    assert!(!nginx.error_log().contains("refund failed"));
}

#[test]
fn a_ticket_settles_once_and_bad_settlements_are_errors() {
    let nginx = Nginx::start("shm.conf", 1);
    let eval = |lua: &str| nginx.eval(lua).body;
    let body = eval(
        "local sw = require('limits'):get('tokens') \
         local t = sw:reserve('e', 5) \
         local ok1 = sw:settle(t, 1) \
         local ok2 = sw:settle(t, 0) \
         local lim = sw.store.lim \
         return table.concat({ tostring(ok1), tostring(ok2), t.cost, \
             lim:window('e', 1).windows[1].count }, ' ')",
    );
    // Settled for 1 of 5; the second settlement changes nothing.
    assert_eq!(body, "true true 5 1");
    let err = |lua: &str| {
        eval(&format!(
            "local sw = require('limits'):get('tokens') \
             local ok, err = pcall(function() {lua} end) return tostring(err)"
        ))
    };
    let above = err("sw:settle(sw:reserve('f', 3), 4)");
    assert!(
        above.ends_with(
            "sw:settle: actual must be an integer from 0 to the cost reserved (3), got 4"
        ),
        "{above}"
    );
    assert!(err("sw:settle({}, 1)")
        .contains("sw:settle: ticket must be what sw:reserve returned, got table: "));
    assert!(err("sw:settle(sw:reserve('g', 3), -1)").ends_with("got -1"));
    // Reserved 5 + 3 + 3; of the one settled, 1 used and 4 given back. Limiters that never
    // reserved show no such family.
    let metrics = nginx.get("/metrics").body;
    for (kind, units) in [
        ("reserved", 11),
        ("used", 1),
        ("given_back", 4),
        ("kept", 0),
    ] {
        let line = format!(
            "slidewin_reservation_units_total{{limiter=\"tokens\",kind=\"{kind}\"}} {units}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
    assert!(!metrics.contains("slidewin_reservation_units_total{limiter=\"log\""));
    let stats = eval("return require('limits'):stats_json()");
    assert!(
        stats.contains(r#""tokens":{"allowed":3,"rejected":0,"store_errors":0,"keys":3,"reservation_units":{"reserved":11,"used":1,"given_back":4,"kept":0,"over":0,"owed":0}}"#),
        "{stats}"
    );
}

#[test]
fn an_unknown_use_keeps_the_reservation_and_an_excess_is_clamped_or_owed() {
    let nginx = Nginx::start("shm.conf", 1);
    let body = nginx
        .eval(
            "local sw = require('limits'):get('tokens') \
             local kept, clamped, owed = sw:reserve('k', 4), sw:reserve('m', 3), sw:reserve('d', 2) \
             assert(sw:settle(kept, nil)) assert(sw:settle(clamped, 5, 'clamp')) \
             assert(sw:settle(owed, 45, 'debt')) \
             local bad = select(2, pcall(sw.settle, sw, sw:reserve('n', 1), 1, 'owe')) \
             local lim, refused = sw.store.lim, (sw:decide('d', 1, false)) \
             local d = lim:window('d', 1).windows \
             return table.concat({ lim:window('k', 1).windows[1].count, \
                 lim:window('m', 1).windows[1].count, d[1].count, d[2].count, \
                 tostring(refused), bad }, ' ')",
        )
        .body;
    // Kept whole; recorded at the reservation, 2 above it counted; 43 owed at the stamp, the
    // log of 20 holding 40 of them (twice its limit), the buckets of 30 all 45: refused.
    assert!(
        body.starts_with("4 3 40 45 false ")
            && body.ends_with(r#"sw:settle: above must be nil, "clamp" or "debt", got "owe""#),
        "{body}"
    );
    let metrics = nginx.get("/metrics").body;
    for (kind, units) in [
        ("reserved", 10),
        ("used", 5),
        ("given_back", 0),
        ("kept", 4),
        ("over", 2),
        ("owed", 43),
    ] {
        let line = format!(
            "slidewin_reservation_units_total{{limiter=\"tokens\",kind=\"{kind}\"}} {units}\n"
        );
        assert!(metrics.contains(&line), "{line}{metrics}");
    }
}

#[test]
fn stores_elsewhere_and_limiters_with_switches_cannot_reserve() {
    let nginx = Nginx::start("test.conf", 1);
    let err = |lua: &str| {
        let chunk = format!("local ok, err = pcall(function() {lua} end) return tostring(err)");
        nginx.eval(&chunk).body
    };
    let shdict = err("require('limits'):get('shared'):reserve('k', 1)");
    assert!(
        shdict.ends_with(
            "sw:reserve: store \"shdict\" cannot give cost back at a reservation's stamp \
             (stores local, shm, zone, nginx and redis can)"
        ),
        "{shdict}"
    );
    let dry_run = err(
        "local sw = assert(require('resty.slidewin').new{ name = 'dry', limit = 5, \
         window_ms = 1000, store = 'local', mode = 'dry_run' }) sw:reserve('k', 1)",
    );
    assert!(
        dry_run.ends_with(
            "sw:reserve: a limiter with switches (mode, exempt, headers, delay, ...) cannot reserve"
        ),
        "{dry_run}"
    );
}
