//! Each Redis script decides exactly like its limiter in the Rust core: the same decision,
//! remaining, retry_after_ms and reset_after_ms on random traces with explicit now_ms
//! (bursts, idle gaps, costs above the limit, peeks, refunds, a clock stepping back).

use slidewin::{BucketWindow, Decision, Limiter, SlidingCounter, SlidingLog};
use slidewin_tests::redis::{RedisServer, Script};
use slidewin_tests::resp::Resp;

/// A small deterministic generator, so a failing trace is named by its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The script's reply for `decision` (`retry_after_ms` never -> -1).
fn reply_of(d: &Decision) -> [i64; 4] {
    let retry = d.retry_after_ms.map_or(-1, |ms| ms as i64);
    [
        d.allowed as i64,
        d.remaining as i64,
        retry,
        d.reset_after_ms as i64,
    ]
}

/// Run `traces` random traces through `script` (with `extra` arguments) and a fresh `new_limiter()`.
fn compare<L: Limiter>(name: &str, keys: &[&str], extra: &[&str], new_limiter: impl Fn() -> L) {
    let redis = RedisServer::start();
    let mut c: Resp = redis.client();
    let script = Script::load(&mut c, name);
    let (limit, window) = (new_limiter_limit(&new_limiter), 1_000);
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut limiter = new_limiter();
        for key in keys {
            c.cmd(&["DEL", key]);
        }
        let mut now: i64 = 1_700_000_000_000 + rng.below(window) as i64;
        for step in 0..120 {
            now += match rng.below(10) {
                0 => rng.below(3 * window) as i64,    // an idle gap
                1 => -(rng.below(window / 4) as i64), // the clock steps back
                2..=5 => 0,                           // a burst in one millisecond
                _ => rng.below(window / 10) as i64,
            };
            let cost = if rng.below(20) == 0 {
                limit + 1
            } else {
                rng.below(4) // 0 asks without recording
            };
            let mode =
                ["check", "check", "check", "check", "peek", "refund"][rng.below(6) as usize];
            let (now_s, cost_s, limit_s, window_s) = (
                now.to_string(),
                cost.to_string(),
                limit.to_string(),
                window.to_string(),
            );
            let mut args = vec![
                limit_s.as_str(),
                &window_s,
                &cost_s,
                "now_ms",
                &now_s,
                "mode",
                mode,
            ];
            args.extend_from_slice(extra);
            let got: [i64; 4] = script.run(&mut c, keys, &args).ints().try_into().unwrap();
            let context = format!("{name}: seed {seed}, step {step}, {mode} cost {cost} at {now}");
            match mode {
                "refund" => limiter.uncommit_at(now, cost).unwrap(),
                "peek" => assert_eq!(
                    got,
                    reply_of(&limiter.peek_at(now, cost).unwrap()),
                    "{context}"
                ),
                _ => assert_eq!(
                    got,
                    reply_of(&limiter.check_at(now, cost).unwrap()),
                    "{context}"
                ),
            }
            // A script deletes a key whose window holds nothing, as the keyed store drops idle state.
            if limiter.peek_at(now, 1).unwrap().reset_after_ms == 0 {
                limiter.reset();
            }
        }
    }
}

fn new_limiter_limit<L: Limiter>(new_limiter: &impl Fn() -> L) -> u64 {
    let mut probe = new_limiter();
    probe.peek_at(0, 1).unwrap().limit
}

#[test]
fn counter_script_matches_sliding_counter() {
    compare("counter", &["rl:{c}"], &[], || {
        SlidingCounter::new(7, 1_000).unwrap()
    });
}

#[test]
fn log_script_matches_sliding_log() {
    let keys = ["rl:{l}", "rl:{l}:m"];
    compare("log", &keys, &[], || SlidingLog::new(7, 1_000).unwrap());
}

#[test]
fn buckets_script_matches_bucket_window() {
    let options = ["bucket_ms", "100"];
    compare("buckets", &["rl:{b}"], &options, || {
        BucketWindow::new(7, 1_000, 100).unwrap()
    });
}
