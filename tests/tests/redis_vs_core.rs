//! The Redis rule script decides exactly like the Rust core's `slidewin::rule` on random traces
//! with explicit now_ms: rules of one to three windows of every algorithm, per-call limits
//! (anywhere up to each window's max_limit, changing from call to call), bursts, idle gaps,
//! costs above a limit, peeks, refunds and give-backs at a stamp (`stamp_ms`: an admitted
//! check's own, or any earlier or later time, as a reservation settles). Compared field by
//! field: decision, remaining, retry_after_ms, reset_after_ms, the window the answer describes
//! and, for an admitted check, the stamp its cost was recorded at.
//!
//! Two oracles: the core's `RuleLimiter` of the whole rule (the clock only moves forward), and,
//! with a clock that also steps back, one one-window rule per window combined all-or-nothing
//! by a naive model (each window's own core state can then be forgotten when it empties, as the
//! script deletes an empty window's key).

use slidewin::reservation::Amend;
use slidewin::rule::{Rule, RuleLimiter, RuleWindow};
use slidewin::{BucketQuota, Decision, Limiter, Quota};
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

/// The most a window's limit becomes in a trace.
const MAX_LIMIT: u64 = 10;

/// A random window of a rule, and its algorithm and lengths as the script takes them (the
/// limit, given per call, goes between the algorithm and the lengths).
fn random_window(rng: &mut Rng) -> (RuleWindow, [String; 2], Option<String>) {
    let limit = 1 + rng.below(MAX_LIMIT);
    let window = [500, 1_000, 3_000][rng.below(3) as usize];
    let (w, algorithm, bucket) = match rng.below(3) {
        0 => (
            RuleWindow::log(Quota::new(limit, window).unwrap()),
            "log",
            None,
        ),
        1 => {
            let bucket = [10, 100, 250][rng.below(3) as usize];
            let quota = BucketQuota::new(limit, window, bucket).unwrap();
            (
                RuleWindow::buckets(quota),
                "buckets",
                Some(bucket.to_string()),
            )
        }
        _ => (
            RuleWindow::counter(Quota::new(limit, window).unwrap()),
            "counter",
            None,
        ),
    };
    let w = w.with_max_limit(MAX_LIMIT).unwrap();
    (w, [algorithm.to_string(), window.to_string()], bucket)
}

/// A trace's next call: the time step, the cost, the action, the limits and, for a refund,
/// the stamp it gives back at (none: the newest).
struct Call {
    now: i64,
    cost: u64,
    action: &'static str,
    limits: Vec<u64>,
    stamp: Option<i64>,
}

/// The stamps of a trace's admitted checks, newest last.
type Stamps = Vec<i64>;

/// A refund's stamp: none (the newest), an admitted check's (mostly a recent one), or any
/// time around `now`, before the window or after the newest time seen too.
fn random_stamp(rng: &mut Rng, now: i64, stamps: &Stamps) -> Option<i64> {
    match rng.below(4) {
        0 => None,
        1 => Some((now - rng.below(4_000) as i64 + 300).max(0)),
        _ if stamps.is_empty() => None,
        _ => {
            let back = 1 + rng.below(stamps.len().min(12) as u64) as usize;
            Some(stamps[stamps.len() - back])
        }
    }
}

impl Call {
    fn next(rng: &mut Rng, now: i64, windows: usize, steps_back: bool, stamps: &Stamps) -> Self {
        let now = now
            + match rng.below(10) {
                0 => rng.below(4_000) as i64, // an idle gap
                1 if steps_back => -(rng.below(300) as i64),
                1..=5 => 0, // a burst in one millisecond
                _ => rng.below(100) as i64,
            };
        let cost = match rng.below(20) {
            0 => MAX_LIMIT + 1,
            1 => rng.below(MAX_LIMIT + 1),
            _ => rng.below(4), // 0 asks without recording
        };
        let actions = ["check", "check", "check", "check", "peek", "refund", "owe"];
        let action = actions[rng.below(7) as usize];
        // Mostly the same limits for a while, sometimes another caller's or a changed one; a
        // debt is cut at twice the windows' max limits, which a store passes with it.
        let limits = match action {
            "owe" => vec![MAX_LIMIT; windows],
            _ => (0..windows).map(|_| 1 + rng.below(MAX_LIMIT)).collect(),
        };
        let stamp = (action == "refund" || action == "owe")
            .then(|| random_stamp(rng, now, stamps))
            .flatten();
        Self {
            now,
            cost,
            action,
            limits,
            stamp,
        }
    }

    /// The script's reply {allowed, remaining, retry_after_ms (-1: never), reset_after_ms,
    /// window[, stamp_ms]} for this call on `keys`, windows `specs`; an admitted check's
    /// stamp joins `stamps`.
    fn run(
        &self,
        c: &mut Resp,
        script: &Script,
        keys: &[String],
        specs: &[([String; 2], Option<String>)],
        stamps: &mut Stamps,
    ) -> Vec<i64> {
        let mut args = vec![self.cost.to_string()];
        for ((spec, bucket), limit) in specs.iter().zip(&self.limits) {
            args.extend([spec[0].clone(), limit.to_string(), spec[1].clone()]);
            args.extend(bucket.clone());
        }
        args.extend([
            "now_ms".into(),
            self.now.to_string(),
            "action".into(),
            self.action.into(),
        ]);
        if let Some(stamp) = self.stamp {
            args.extend(["stamp_ms".into(), stamp.to_string()]);
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = script.run(c, &keys, &args).ints();
        if let [_, _, _, _, _, stamp] = reply[..] {
            stamps.push(stamp);
        }
        reply
    }

    /// `reply` (a core decision's five fields) as the script gives it: an admitted check's
    /// with its stamp, now.
    fn stamped(&self, mut reply: Vec<i64>) -> Vec<i64> {
        if self.action == "check" && reply[0] == 1 {
            reply.push(self.now);
        }
        reply
    }
}

impl Call {
    /// What a refund or an owe changes.
    fn amend(&self) -> Option<Amend> {
        match self.action {
            "refund" => Some(Amend::GiveBack(self.cost)),
            "owe" => Some(Amend::Owe(self.cost)),
            _ => None,
        }
    }

    /// The core rule's answer to this call, as the script gives it.
    fn decide(&self, core: &mut RuleLimiter) -> Vec<i64> {
        let (rule, state) = core.parts_mut();
        let limits = rule.check_limits(&self.limits).unwrap();
        let decision = match self.amend() {
            Some(amend) => {
                RuleLimiter::amend(rule, state, self.now, self.stamp, amend).unwrap();
                rule.decide_with(state, self.now, 0, false, &limits)
            }
            None => rule.decide_with(state, self.now, self.cost, self.action == "check", &limits),
        };
        self.stamped(reply(&decision.unwrap()).to_vec())
    }
}

/// A core decision as the script answers it.
fn reply(d: &Decision) -> [i64; 5] {
    [
        d.allowed as i64,
        d.remaining as i64,
        d.retry_after_ms.map_or(-1, |ms| ms as i64),
        d.reset_after_ms as i64,
        d.window as i64 + 1,
    ]
}

/// One trace's rule: `n` random windows, the script's window arguments and a key per window.
type Trace = (
    Vec<RuleWindow>,
    Vec<([String; 2], Option<String>)>,
    Vec<String>,
);

fn random_rule(rng: &mut Rng, c: &mut Resp, seed: u64) -> Trace {
    let n = 1 + rng.below(3) as usize;
    let (windows, specs): (Vec<_>, Vec<_>) = (0..n)
        .map(|_| {
            let (w, spec, bucket) = random_window(rng);
            (w, (spec, bucket))
        })
        .unzip();
    let keys: Vec<String> = (0..n).map(|k| format!("rl:{{r{seed}}}:{k}")).collect();
    for key in &keys {
        c.cmd(&["DEL", key]);
    }
    (windows, specs, keys)
}

#[test]
fn rules_decide_as_the_core_rule() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let script = Script::rule(&mut c);
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let (windows, specs, keys) = random_rule(&mut rng, &mut c, seed);
        let mut core = RuleLimiter::from_config(Rule::new(windows).unwrap());
        let mut now: i64 = 1_700_000_000_000 + rng.below(1_000) as i64;
        let mut stamps = Stamps::new();
        for step in 0..120 {
            let call = Call::next(&mut rng, now, keys.len(), false, &stamps);
            now = call.now;
            let got = call.run(&mut c, &script, &keys, &specs, &mut stamps);
            assert_eq!(
                got,
                call.decide(&mut core),
                "seed {seed}, step {step}: {} cost {} at {now} (stamp {:?}), limits {:?}, \
                 windows {specs:?}",
                call.action,
                call.cost,
                call.stamp,
                call.limits
            );
        }
    }
}

/// Windows holding hundreds of buckets at once (the log: milliseconds), where the script's ring
/// of buckets grows, wraps and shrinks, its searches take several commands and a give-back at
/// a stamp rewrites hundreds of records (over a thousand, in more than one command): as the
/// core.
#[test]
fn windows_of_hundreds_of_buckets_decide_as_the_core_rule() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let script = Script::rule(&mut c);
    // Each with the most ms a step moves and the odds of an idle gap (1 in `gaps`): the last
    // one holds thousands of milliseconds.
    let windows = [
        (
            Quota::new(400, 2_000).map(RuleWindow::log),
            "log",
            None,
            6,
            200,
        ),
        (
            BucketQuota::new(400, 3_000, 10).map(RuleWindow::buckets),
            "buckets",
            Some("10".to_string()),
            6,
            200,
        ),
        (
            Quota::new(3_000, 4_000).map(RuleWindow::log),
            "log",
            None,
            3,
            3_000,
        ),
    ];
    for (seed, (window, algorithm, bucket, step_ms, gaps)) in windows.into_iter().enumerate() {
        let window = window.unwrap();
        let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B + seed as u64);
        let keys = vec![format!("rl:{{many{seed}}}")];
        let span = window.window_ms().to_string();
        let specs = vec![([algorithm.to_string(), span], bucket)];
        let full = window.limit();
        let mut core = RuleLimiter::from_config(Rule::one(window));
        let (mut now, mut longest): (i64, i64) = (1_700_000_000_000, 0);
        let mut stamps = Stamps::new();
        for step in 0..6_000 {
            // More than the window admits, now and then an idle gap.
            now += match rng.below(gaps) {
                0 => rng.below(3_000) as i64,
                _ => rng.below(step_ms) as i64,
            };
            let mut call = Call {
                now,
                cost: match rng.below(40) {
                    0 => 60,
                    1 => 0,
                    _ => 1,
                },
                action: [
                    "check", "check", "check", "check", "check", "check", "peek", "refund",
                ][rng.below(8) as usize],
                limits: vec![[full, full, full, full / 4][rng.below(4) as usize]],
                stamp: None,
            };
            if call.action == "refund" {
                call.stamp = random_stamp(&mut rng, now, &stamps);
            }
            let got = call.run(&mut c, &script, &keys, &specs, &mut stamps);
            assert_eq!(
                got,
                call.decide(&mut core),
                "{algorithm} {full}, step {step}: {} cost {} at {now} (stamp {:?}), limit {:?}",
                call.action,
                call.cost,
                call.stamp,
                call.limits
            );
            longest = longest.max(c.cmd(&["STRLEN", &keys[0]]).int());
        }
        // The header and a ring of 14-byte records: more than 128 at once.
        assert!(
            longest > 64 + 14 * 128,
            "{algorithm}: {longest} bytes at most"
        );
    }
}

/// The rule's reply from each window's own decision (`rooms`: the cost each still admits), as
/// the script gives it: admitted when all admit; the refusing window that waits longest (a
/// window that never fits wins at once), else the one with the least room.
fn combined(decisions: &[Decision], rooms: &[u64], cost: u64) -> [i64; 5] {
    let allowed = decisions.iter().all(|d| d.allowed);
    let least = (0..rooms.len()).min_by_key(|&i| rooms[i]).unwrap();
    let mut shown = least;
    let mut longest: Option<Option<u64>> = None;
    for (i, d) in decisions.iter().enumerate().filter(|(_, d)| !d.allowed) {
        let longer = match (longest, d.retry_after_ms) {
            (None, _) => true,
            (Some(None), _) => false,
            (Some(Some(_)), None) => true,
            (Some(Some(most)), Some(wait)) => wait > most,
        };
        if longer {
            (longest, shown) = (Some(d.retry_after_ms), i);
        }
    }
    let retry = match longest {
        None => 0,
        Some(wait) => wait.map_or(-1, |ms| ms as i64),
    };
    let remaining = rooms[least] - if allowed { cost } else { 0 };
    [
        allowed as i64,
        remaining as i64,
        retry,
        decisions[shown].reset_after_ms as i64,
        shown as i64 + 1,
    ]
}

/// One window as a one-window core rule.
struct OneWindow(RuleLimiter);

impl OneWindow {
    fn decide(&mut self, now: i64, cost: u64, commit: bool, limit: u64) -> Decision {
        let (rule, state) = self.0.parts_mut();
        let limits = rule.check_limits(&[limit]).unwrap();
        rule.decide_with(state, now, cost, commit, &limits).unwrap()
    }

    /// Forget an empty window, as the script deletes its key.
    fn reset_when_empty(&mut self, now: i64) {
        if self.decide(now, 0, false, 1).reset_after_ms == 0 {
            self.0.reset();
        }
    }
}

#[test]
fn rules_match_their_windows_combined_with_a_clock_stepping_back() {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let script = Script::rule(&mut c);
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let (windows, specs, keys) = random_rule(&mut rng, &mut c, seed);
        let mut cores: Vec<OneWindow> = windows
            .into_iter()
            .map(|w| OneWindow(RuleLimiter::from_config(Rule::one(w))))
            .collect();
        let mut now: i64 = 1_700_000_000_000 + rng.below(1_000) as i64;
        let mut stamps = Stamps::new();
        for step in 0..120 {
            let call = Call::next(&mut rng, now, keys.len(), true, &stamps);
            let (cost, limits) = (call.cost, &call.limits);
            now = call.now;
            let got = call.run(&mut c, &script, &keys, &specs, &mut stamps);
            let expected = if let Some(amend) = call.amend() {
                let decisions: Vec<Decision> = cores
                    .iter_mut()
                    .zip(limits)
                    .map(|(core, &limit)| {
                        let (rule, state) = core.0.parts_mut();
                        RuleLimiter::amend(rule, state, now, call.stamp, amend).unwrap();
                        core.decide(now, 0, false, limit)
                    })
                    .collect();
                let rooms: Vec<u64> = decisions.iter().map(|d| d.remaining).collect();
                combined(&decisions, &rooms, 0)
            } else {
                let peeks: Vec<Decision> = cores
                    .iter_mut()
                    .zip(limits)
                    .map(|(core, &limit)| core.decide(now, cost, false, limit))
                    .collect();
                let room = |d: &Decision| d.remaining + if d.allowed { cost } else { 0 };
                let rooms: Vec<u64> = peeks.iter().map(room).collect();
                let decisions = if call.action == "check" && peeks.iter().all(|d| d.allowed) {
                    cores
                        .iter_mut()
                        .zip(limits)
                        .map(|(core, &limit)| core.decide(now, cost, true, limit))
                        .collect()
                } else {
                    peeks
                };
                combined(&decisions, &rooms, cost)
            };
            assert_eq!(
                got,
                call.stamped(expected.to_vec()),
                "seed {seed}, step {step}: {} cost {cost} at {now} (stamp {:?}), limits {limits:?}, \
                 windows {specs:?}",
                call.action,
                call.stamp
            );
            for core in &mut cores {
                core.reset_when_empty(now);
            }
        }
    }
}
