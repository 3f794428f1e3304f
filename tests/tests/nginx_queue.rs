//! A rate limit tied to a Redis Stream's consumers (resty.slidewin.queue, nginx/queue.conf):
//! one consumer acking 200 messages/s, producers offering 500 requests/s through nginx; the
//! limit follows the consumer (XINFO GROUPS), so the admitted rate settles at its rate and the
//! backlog near its target.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use slidewin_tests::nginx::Nginx;
use slidewin_tests::openloop::Load;
use slidewin_tests::redis::RedisServer;
use slidewin_tests::resp::{Reply, Resp};

fn start(redis: &RedisServer) -> Nginx {
    Nginx::start_with_env(
        "queue.conf",
        2,
        &[("SLIDEWIN_REDIS_PORT", redis.port().to_string())],
    )
}

/// The id of the one message an XREADGROUP ... COUNT 1 reply holds, if any.
fn message_id(reply: &Reply) -> Option<String> {
    let Reply::Array(Some(streams)) = reply else {
        return None;
    };
    let Reply::Array(Some(stream)) = streams.first()? else {
        return None;
    };
    let Reply::Array(Some(messages)) = stream.get(1)? else {
        return None;
    };
    let Reply::Array(Some(message)) = messages.first()? else {
        return None;
    };
    Some(message.first()?.text())
}

/// A consumer of group "workers" that processes (reads and acks) at most `per_second`
/// messages a second, until `stop`; never ahead of its pace, and it banks no time while idle.
fn consume(mut client: Resp, per_second: u32, stop: Arc<AtomicBool>) -> u64 {
    let pace = Duration::from_secs(1) / per_second;
    let mut next = Instant::now();
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            thread::sleep(next - now);
        }
        let reply = client.cmd(&[
            "XREADGROUP",
            "GROUP",
            "workers",
            "c1",
            "COUNT",
            "1",
            "STREAMS",
            "orders",
            ">",
        ]);
        match message_id(&reply) {
            Some(id) => {
                assert_eq!(client.cmd(&["XACK", "orders", "workers", &id]).int(), 1);
                done += 1;
                next += pace;
            }
            None => {
                thread::sleep(Duration::from_millis(1));
                next = next.max(Instant::now());
            }
        }
    }
    done
}

/// lag + pending of group "workers" (XINFO GROUPS).
fn backlog(client: &mut Resp) -> i64 {
    let Reply::Array(Some(groups)) = client.cmd(&["XINFO", "GROUPS", "orders"]) else {
        panic!("XINFO GROUPS orders: not an array");
    };
    let Reply::Array(Some(fields)) = &groups[0] else {
        panic!("a group: not an array");
    };
    let field = |name: &str| {
        let at = fields
            .iter()
            .position(|f| matches!(f, Reply::Bulk(Some(b)) if b == name.as_bytes()));
        fields[at.expect(name) + 1].int()
    };
    field("lag") + field("pending")
}

#[test]
fn producers_are_admitted_at_the_consumers_rate() {
    let redis = RedisServer::start();
    let mut client = redis.client();
    let created = client.cmd(&["XGROUP", "CREATE", "orders", "workers", "$", "MKSTREAM"]);
    assert_eq!(created.text(), "OK");
    let nginx = start(&redis);
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (client, stop) = (redis.client(), stop.clone());
        thread::spawn(move || consume(client, 200, stop))
    };
    let run = Load {
        port: nginx.port(),
        path: "/produce".into(),
        rate: 500.0,
        seconds: 16,
        timeout: Duration::from_secs(1),
        ..Load::default()
    }
    .run();
    let backlog_at_end = backlog(&mut client);
    stop.store(true, Ordering::Relaxed);
    let consumed = consumer.join().unwrap();

    let settled = run.merged(10, 16);
    let admitted = settled.admitted() as f64 / 6.0;
    let live = nginx.eval("return require('limits'):get('orders'):limits()[1]");
    let live: f64 = live.body.parse().expect(&live.body);
    println!("seconds 10..16: admitted {admitted}/s, backlog at the end {backlog_at_end}, live limit {live}/s");
    assert!(
        (180.0..=220.0).contains(&admitted),
        "admitted {admitted}/s after 10 s, want 200 +-10%"
    );
    assert_eq!(
        settled.count(slidewin_tests::openloop::Outcome::Good),
        settled.admitted(),
        "every admitted request was added to the stream"
    );
    assert!(
        (0..=200).contains(&backlog_at_end),
        "backlog {backlog_at_end}, target 100"
    );
    assert!((170.0..=240.0).contains(&live), "live limit {live}/s");
    assert!(consumed > 2_500, "consumed {consumed} in 16 s");
}

#[test]
fn bad_options_are_named() {
    let redis = RedisServer::start();
    let nginx = start(&redis);
    let errors = nginx.eval("return table.concat(package.loaded.queue_errors, '\\n')");
    let errors: Vec<&str> = errors.body.lines().collect();
    assert_eq!(
        errors,
        [
            "limiter must be a resty.slidewin limiter, got orders",
            "limiter must keep its live limits for every worker (store shm or redis), got store local",
            "window must be a window's index or name of limiter orders, got 2",
            "interval_ms must be an integer of at least 10, got 1",
            "redis.port must be a positive integer, got 0",
            "slidewin.queue_limit: target_backlog must be a positive integer, got 0",
            "stream must be a string, got 5",
        ]
    );
}

#[test]
fn a_lag_redis_cannot_tell_is_counted_from_entries_added() {
    let redis = RedisServer::start();
    let mut client = redis.client();
    client.cmd(&["XGROUP", "CREATE", "orders", "workers", "$", "MKSTREAM"]);
    let ids: Vec<String> = (0..5)
        .map(|_| client.cmd(&["XADD", "orders", "*", "n", "1"]).text())
        .collect();
    assert_eq!(client.cmd(&["XDEL", "orders", &ids[2]]).int(), 1);
    let nginx = start(&redis);
    let read = "local r = assert(require('resty.slidewin.queue').get('orders'):read()) \
                return tostring(r.lag) .. ' ' .. r.backlog .. ' ' .. r.processed";
    // Nothing delivered: lag = entries-added (5, the deleted one too) - 0 read.
    assert_eq!(nginx.eval(read).body, "5 5 0");
    // Two delivered and one acked, before the deleted entry: Redis cannot count entries-read
    // now (XINFO GROUPS says nil), so the limit holds, and says why.
    client.cmd(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "c1",
        "COUNT",
        "2",
        "STREAMS",
        "orders",
        ">",
    ]);
    client.cmd(&["XACK", "orders", "workers", &ids[0]]);
    let r = nginx.eval(read);
    assert_eq!(r.status, 500);
    assert!(
        r.body.ends_with(
            "group workers of stream orders: Redis cannot count what it has read \
             (entries-read nil), the limit holds"
        ),
        "{}",
        r.body
    );
}
