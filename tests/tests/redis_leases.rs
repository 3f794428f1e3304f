//! Leases in the rule script of lua/redis/ on a real redis-server: the key's lease hash as one
//! key after the windows' keys, `action lease` (want, validity_ms, id) and `settle`; exact
//! answers first, then a property test of the guarantee: nodes that spend their leases within
//! their validity never put more than a limit in any window.

use slidewin_tests::random::Random;
use slidewin_tests::redis::{RedisServer, Script};
use slidewin_tests::resp::{Reply, Resp};

/// One key of a rule: its windows' keys, its lease hash, the windows' arguments to the script.
struct Key {
    keys: Vec<String>,
    windows: Vec<&'static str>,
}

impl Key {
    /// Key `name` of a rule of `windows` (the script's words, e.g. `["log", "10", "1000"]`).
    fn new(name: &str, windows: &[&'static str]) -> Self {
        let count = windows.iter().filter(|a| a.parse::<u64>().is_err()).count();
        let mut keys: Vec<String> = (1..=count).map(|k| format!("l:{{{name}}}:{k}")).collect();
        keys.push(format!("l:{{{name}}}:leases"));
        Self {
            keys,
            windows: windows.to_vec(),
        }
    }

    fn lease_key(&self) -> &str {
        self.keys.last().unwrap()
    }

    /// The script's reply for `cost` at `now_ms` with `options` (name, value pairs), the lease
    /// hash given.
    fn call(&self, c: &mut Resp, s: &Script, cost: u64, now: i64, options: &[&str]) -> Reply {
        self.call_on(c, s, &self.keys, cost, now, options)
    }

    fn call_on(
        &self,
        c: &mut Resp,
        s: &Script,
        keys: &[String],
        cost: u64,
        now: i64,
        options: &[&str],
    ) -> Reply {
        let (cost, now) = (cost.to_string(), now.to_string());
        let mut args = vec![cost.as_str()];
        args.extend(&self.windows);
        args.extend(["now_ms", &now]);
        args.extend(options);
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        s.run(c, &keys, &args)
    }

    /// `{granted, remaining, retry_after_ms, reset_after_ms, window}` of a lease call.
    fn lease(
        &self,
        c: &mut Resp,
        s: &Script,
        cost: u64,
        want: u64,
        id: &str,
        now: i64,
    ) -> Vec<i64> {
        let want = want.to_string();
        let options = [
            "action",
            "lease",
            "want",
            &want,
            "validity_ms",
            "100",
            "id",
            id,
        ];
        self.call(c, s, cost, now, &options).ints()
    }

    /// `{allowed, remaining, retry_after_ms, reset_after_ms, window}` of `action` for `cost`.
    fn act(&self, c: &mut Resp, s: &Script, action: &str, cost: u64, now: i64) -> Vec<i64> {
        self.call(c, s, cost, now, &["action", action]).ints()
    }

    fn settle(&self, c: &mut Resp, s: &Script, list: &str, now: i64) -> Vec<i64> {
        self.call(c, s, 0, now, &["action", "peek", "settle", list])
            .ints()
    }
}

const LOG: [&str; 3] = ["log", "100", "1000"];

/// A redis-server, a connection to it and the rule script loaded.
fn start() -> (RedisServer, Resp, Script) {
    let redis = RedisServer::start();
    let mut c = redis.client();
    let s = Script::rule(&mut c);
    (redis, c, s)
}

#[test]
fn grants_shrink_as_the_window_fills() {
    let (_redis, mut c, s) = start();
    let key = Key::new("sizes", &LOG);
    // Room 100, no holder: half of it.
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "a-1", 1000),
        [50, 50, 0, 1100, 1]
    );
    // Room 50, one holder: a quarter; then a sixth of 38 with two.
    assert_eq!(
        key.lease(&mut c, &s, 1, 80, "b-1", 1000),
        [12, 38, 0, 1100, 1]
    );
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "c-1", 1000),
        [6, 32, 0, 1100, 1]
    );
    // Never more than wanted; never less than the cost.
    assert_eq!(
        key.lease(&mut c, &s, 0, 3, "d-1", 1000),
        [3, 29, 0, 1100, 1]
    );
    assert_eq!(
        key.lease(&mut c, &s, 20, 25, "e-1", 1000),
        [20, 9, 0, 1100, 1]
    );
    // Near the limit: one unit (the cost), then refused until the first grant leaves at
    // 1000 + 100 + 1000.
    for (i, remaining) in (0..9).rev().enumerate() {
        let id = format!("f-{i}");
        assert_eq!(
            key.lease(&mut c, &s, 0, 80, &id, 1000),
            [1, remaining, 0, 1100, 1]
        );
    }
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "g-1", 1050),
        [0, 0, 1050, 1050, 1]
    );
    assert_eq!(
        key.lease(&mut c, &s, 101, 101, "g-2", 1050),
        [0, 0, -1, 1050, 1]
    );
    assert_eq!(c.cmd(&["HLEN", key.lease_key()]).int(), 14);
    // Holders are the grants still spendable: past 1100 none is, so half the room again.
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "h-1", 2100),
        [50, 50, 0, 1100, 1]
    );
}

#[test]
fn a_retried_lease_call_answers_the_same_grant() {
    let (_redis, mut c, s) = start();
    let key = Key::new("retry", &LOG);
    assert_eq!(
        key.lease(&mut c, &s, 2, 80, "n-7", 1000),
        [50, 50, 0, 1100, 1]
    );
    assert_eq!(
        key.lease(&mut c, &s, 2, 80, "n-7", 1030),
        [50, 50, 0, 1070, 1]
    );
    assert_eq!(
        c.cmd(&["HGET", key.lease_key(), "n-7"]).text(),
        "50 1000 100"
    );
    assert_eq!(key.act(&mut c, &s, "peek", 0, 1030), [1, 50, 0, 1070, 1]);
}

#[test]
fn settling_returns_the_unspent_units_and_stamps_the_spent_ones() {
    let (_redis, mut c, s) = start();
    let key = Key::new("settle", &LOG);
    key.lease(&mut c, &s, 0, 80, "a-1", 1000);
    key.lease(&mut c, &s, 0, 80, "b-1", 1000);
    assert_eq!(key.act(&mut c, &s, "peek", 0, 1000), [1, 38, 0, 1100, 1]);
    // a-1 spent nothing: all 50 come back. b-1 spent 10, the last 20 ms after its call was
    // sent: they leave at 1000 + 20 + 1000, not at the grant's end 2100.
    assert_eq!(
        key.settle(&mut c, &s, "a-1:0:0 b-1:10:20", 1050),
        [1, 90, 0, 970, 1]
    );
    assert_eq!(c.cmd(&["EXISTS", key.lease_key()]).int(), 0);
    assert_eq!(key.act(&mut c, &s, "check", 91, 2019), [0, 90, 1, 1, 1]);
    assert_eq!(
        key.act(&mut c, &s, "check", 91, 2020),
        [1, 9, 0, 1000, 1, 2020]
    );
    // Settled again (a retried call), or never granted: nothing happens.
    assert_eq!(
        key.settle(&mut c, &s, "b-1:10:20 z-9:5:5", 2020),
        [1, 9, 0, 1000, 1]
    );
}

#[test]
fn a_check_ahead_records_its_cost_at_the_end_of_its_validity() {
    let (_redis, mut c, s) = start();
    let key = Key::new("ahead", &LOG);
    let ahead = ["ahead_ms", "100"];
    assert_eq!(
        key.call(&mut c, &s, 1, 1000, &ahead).ints(),
        [1, 99, 0, 1100, 1, 1100]
    );
    // Nothing in the hash, nothing to settle: the unit leaves at 1100 + 1000, not 2000.
    assert_eq!(c.cmd(&["EXISTS", key.lease_key()]).int(), 0);
    assert_eq!(key.act(&mut c, &s, "peek", 1, 2099), [1, 98, 0, 1, 1]);
    assert_eq!(key.act(&mut c, &s, "peek", 1, 2100), [1, 99, 0, 0, 1]);
    // A later one at 1050 goes into its own bucket at 1150; one at 1000 again into 1100's.
    // An admitted check's stamp (its sixth field) is where it was recorded: now + ahead_ms.
    let check = |c: &mut Resp, cost: u64, now: i64| key.call(c, &s, cost, now, &ahead).ints();
    assert_eq!(check(&mut c, 2, 2200), [1, 98, 0, 1100, 1, 2300]);
    assert_eq!(check(&mut c, 98, 2200), [1, 0, 0, 1100, 1, 2300]);
    assert_eq!(check(&mut c, 1, 2250), [0, 0, 1050, 1050, 1]);
}

#[test]
fn a_late_stamp_goes_into_the_newest_bucket_and_keeps_the_ring_in_order() {
    let (_redis, mut c, s) = start();
    let key = Key::new("order", &LOG);
    key.lease(&mut c, &s, 0, 4, "a-1", 1000);
    key.lease(&mut c, &s, 0, 4, "b-1", 1000);
    // a-1's spends end at 1090 (ahead of now): a bucket of their own, ahead. b-1's at 1040
    // are older than it: they join it.
    assert_eq!(
        key.settle(&mut c, &s, "a-1:4:90", 1010),
        [1, 92, 0, 1090, 1]
    );
    assert_eq!(
        key.act(&mut c, &s, "check", 1, 1020),
        [1, 91, 0, 1080, 1, 1020]
    );
    assert_eq!(
        key.settle(&mut c, &s, "b-1:3:40", 1030),
        [1, 92, 0, 1060, 1]
    );
    // The window's now is 1031, not 1090 (its reset would read 1000).
    assert_eq!(key.act(&mut c, &s, "peek", 0, 1031), [1, 92, 0, 1059, 1]);
    // All 8 leave at 2090, the check and b-1's units too.
    assert_eq!(key.act(&mut c, &s, "check", 93, 2089), [0, 92, 1, 1, 1]);
    assert_eq!(
        key.act(&mut c, &s, "check", 93, 2090),
        [1, 7, 0, 1000, 1, 2090]
    );
}

#[test]
fn leases_count_in_check_peek_and_refund() {
    let (_redis, mut c, s) = start();
    let key = Key::new("count", &LOG);
    assert_eq!(
        key.act(&mut c, &s, "check", 10, 500),
        [1, 90, 0, 1000, 1, 500]
    );
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "a-1", 1000),
        [45, 45, 0, 1100, 1]
    );
    assert_eq!(
        key.act(&mut c, &s, "check", 30, 1000),
        [1, 15, 0, 1100, 1, 1000]
    );
    assert_eq!(key.act(&mut c, &s, "peek", 5, 1000), [1, 10, 0, 1100, 1]);
    // 16 fit when the 10 at 500 leave at 1500, before the lease (at 2100).
    assert_eq!(
        key.act(&mut c, &s, "check", 16, 1000),
        [0, 15, 500, 1100, 1]
    );
    assert_eq!(key.act(&mut c, &s, "refund", 30, 1000), [1, 45, 0, 1100, 1]);
    // Without the lease hash the script counts the windows alone.
    let windows_only = &key.keys[..1];
    let peek = key.call_on(&mut c, &s, windows_only, 0, 1000, &["action", "peek"]);
    assert_eq!(peek.ints(), [1, 90, 0, 500, 1]);
}

#[test]
fn retry_after_merges_the_buckets_and_the_leases_leaving() {
    let (_redis, mut c, s) = start();
    let key = Key::new("merge", &["log", "10", "1000"]);
    assert_eq!(key.act(&mut c, &s, "check", 2, 0), [1, 8, 0, 1000, 1, 0]);
    // Leases ending at 200 and 350: they leave at 1200 and 1350. At 250 the first is no
    // longer spendable: no holder, half the room.
    assert_eq!(key.lease(&mut c, &s, 0, 4, "a-1", 100), [4, 4, 0, 1100, 1]);
    assert_eq!(key.lease(&mut c, &s, 2, 4, "b-1", 250), [2, 2, 0, 1100, 1]);
    assert_eq!(
        key.act(&mut c, &s, "check", 2, 500),
        [1, 0, 0, 1000, 1, 500]
    );
    // Full. Needs 3: the lease of 4 at 1200 alone.
    assert_eq!(key.act(&mut c, &s, "check", 3, 900), [0, 0, 300, 600, 1]);
    // Needs 7: both leases (at 1350) and the 2 at 0 (at 1000).
    assert_eq!(key.act(&mut c, &s, "check", 7, 900), [0, 0, 450, 600, 1]);
    // Needs 9: the 2 at 500 too, last (at 1500).
    assert_eq!(key.act(&mut c, &s, "check", 9, 900), [0, 0, 600, 600, 1]);
    assert_eq!(key.act(&mut c, &s, "check", 9, 1499), [0, 8, 1, 1, 1]);
    assert_eq!(
        key.act(&mut c, &s, "check", 9, 1500),
        [1, 1, 0, 1000, 1, 1500]
    );
}

#[test]
fn a_dead_nodes_lease_leaves_at_the_end_of_its_validity_plus_the_window() {
    let (_redis, mut c, s) = start();
    let windows = ["log", "100", "1000", "buckets", "120", "10000", "1000"];
    let key = Key::new("dead", &windows);
    // Never settled. The first window counts it until 1100 + 1000; the second in the bucket of
    // its end, 1000..1999: until 11999.
    assert_eq!(
        key.lease(&mut c, &s, 0, 80, "a-1", 1000),
        [50, 50, 0, 1100, 1]
    );
    assert_eq!(key.act(&mut c, &s, "peek", 0, 2099), [1, 50, 0, 1, 1]);
    assert_eq!(key.act(&mut c, &s, "peek", 0, 2100), [1, 70, 0, 9899, 2]);
    assert_eq!(
        key.act(&mut c, &s, "peek", 71, 2100),
        [0, 70, 9899, 9899, 2]
    );
    // The hash lasts until then, plus a window for the caller's clock (now_ms).
    let ttl = c.cmd(&["PTTL", key.lease_key()]).int();
    assert!(ttl > 20_000 && ttl <= 20_999, "{ttl}");
    assert_eq!(key.act(&mut c, &s, "peek", 0, 11998), [1, 70, 0, 1, 2]);
    assert_eq!(key.act(&mut c, &s, "peek", 0, 11999), [1, 100, 0, 0, 1]);
    assert_eq!(c.cmd(&["EXISTS", key.lease_key()]).int(), 0);
}

#[test]
fn bad_lease_arguments_are_named_with_their_value() {
    let (_redis, mut c, s) = start();
    let key = Key::new("bad", &LOG);
    let error = |c: &mut Resp, cost: u64, options: &[&str]| match key.call(c, &s, cost, 0, options)
    {
        Reply::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    let lease = |want: &'static str, validity: &'static str, id: &'static str| {
        vec![
            "action",
            "lease",
            "want",
            want,
            "validity_ms",
            validity,
            "id",
            id,
        ]
    };
    assert_eq!(
        error(&mut c, 3, &lease("2", "100", "a-1")),
        "ERR want must be at least cost (3), got 2"
    );
    assert_eq!(
        error(&mut c, 0, &lease("0", "100", "a-1")),
        "ERR want must be a positive integer, got 0"
    );
    assert_eq!(
        error(&mut c, 0, &lease("1", "1.5", "a-1")),
        "ERR validity_ms must be a positive integer, got 1.5"
    );
    assert_eq!(
        error(&mut c, 0, &lease("1", "100", "a:1")),
        "ERR id must be a non-empty string without spaces or colons, got a:1"
    );
    assert_eq!(
        error(&mut c, 0, &["action", "lease", "want", "1", "id", "a-1"]),
        "ERR action lease needs the option validity_ms"
    );
    assert_eq!(
        error(&mut c, 0, &["want", "1"]),
        "ERR want goes with action lease, got action check"
    );
    assert_eq!(
        error(&mut c, 1, &["action", "peek", "ahead_ms", "100"]),
        "ERR ahead_ms goes with action check, got action peek"
    );
    assert_eq!(
        error(&mut c, 1, &["ahead_ms", "-1"]),
        "ERR ahead_ms must be a non-negative integer, got -1"
    );
    assert_eq!(
        error(&mut c, 0, &["action", "take"]),
        "ERR action must be check, peek, refund, owe or lease, got take"
    );
    assert_eq!(
        error(&mut c, 0, &["settle", "a-1:2"]),
        "ERR settle must be \"ID:SPENT:LAST_MS ...\" separated by spaces, got a-1:2"
    );
    assert_eq!(
        error(&mut c, 0, &["settle", "a-1:0:0 b-1:-1:0"]),
        "ERR SPENT of b-1 in settle must be a non-negative integer, got -1"
    );
    assert_eq!(
        error(&mut c, 0, &["settle", "a-1:1:x"]),
        "ERR LAST_MS of a-1 in settle must be a non-negative integer, got x"
    );
    assert_eq!(key.lease(&mut c, &s, 0, 4, "a-1", 0), [4, 96, 0, 1100, 1]);
    // Spent above the grant: an error, and nothing settled (b-1 neither).
    key.lease(&mut c, &s, 0, 4, "b-1", 0);
    assert_eq!(
        error(&mut c, 0, &["settle", "b-1:0:0 a-1:5:10"]),
        "ERR SPENT of a-1 in settle must be at most its grant (4), got 5"
    );
    assert_eq!(c.cmd(&["HLEN", key.lease_key()]).int(), 2);
    // Without the lease hash: no lease, no settlement; counter windows cannot hold leases.
    let windows_only = &key.keys[..1];
    let reply = key.call_on(&mut c, &s, windows_only, 0, 0, &lease("1", "100", "a-1"));
    assert_eq!(
        reply,
        Reply::Error(
            "ERR action lease needs the lease hash: one key after the windows' keys".into()
        )
    );
    let reply = key.call_on(&mut c, &s, windows_only, 0, 0, &["settle", "a-1:0:0"]);
    assert_eq!(
        reply,
        Reply::Error("ERR settle needs the lease hash: one key after the windows' keys".into())
    );
    let counter = Key::new("bad-counter", &["counter", "10", "1000"]);
    assert_eq!(
        counter.call(&mut c, &s, 1, 0, &[]),
        Reply::Error("ERR leases need log or buckets windows, window 1 is counter".into())
    );
}

/// A grant a node holds: it spends it from the grant's arrival until `validity` ms after it
/// sent the call (by its own clock), never later; `plan` the times it means to spend units at.
struct Held {
    id: String,
    units: u64,
    granted: i64,
    cost: u64,
    plan: Vec<i64>,
    sent: i64,
    validity: i64,
}

/// A simulated node: its grant, its settlements not yet sent (or to be sent again), its calls.
#[derive(Default)]
struct Node {
    held: Option<Held>,
    pending: Vec<String>,
    calls: u64,
    idle_until: i64,
    last_options: Vec<String>,
}

/// Nodes spending leases of one key on the caller's clock, every unit spent kept by its time.
struct Simulation {
    c: Resp,
    s: Script,
    key: Key,
    rng: Random,
    nodes: Vec<Node>,
    spends: Vec<i64>,
    exact_checks: usize,
}

impl Simulation {
    /// The settle list node `n` sends now: some entries lost for good (the key's grant then
    /// expires on its own), some kept to be sent again (a retried call).
    fn settle_list(&mut self, n: usize) -> String {
        let mut sent = Vec::new();
        let mut kept = Vec::new();
        for entry in std::mem::take(&mut self.nodes[n].pending) {
            match self.rng.below(8) {
                0 => {}
                1 | 2 => {
                    sent.push(entry.clone());
                    kept.push(entry);
                }
                _ => sent.push(entry),
            }
        }
        self.nodes[n].pending = kept;
        sent.join(" ")
    }

    /// Node `n` ends its grant at `now`: what it spent until then is spent, the rest of its
    /// plan never happens; the settlement waits for the node's next call.
    fn end_grant(&mut self, n: usize, now: i64) {
        let Some(held) = self.nodes[n].held.take() else {
            return;
        };
        let done: Vec<i64> = held.plan.into_iter().filter(|&t| t <= now).collect();
        let spent = held.cost + done.len() as u64;
        let last = done.iter().copied().max().unwrap_or(held.granted);
        self.spends
            .extend(std::iter::repeat_n(held.granted, held.cost as usize));
        self.spends.extend(done);
        let offset = if spent > 0 { last - held.sent } else { 0 };
        let entry = format!("{}:{spent}:{offset}", held.id);
        self.nodes[n].pending.push(entry);
    }

    /// A lease call of node `n` arriving at Redis at `now`, sent up to 3 ms before; the
    /// cost is spent at once, each other unit granted at a random time the node may spend it.
    fn lease(&mut self, n: usize, now: i64, cost: u64) {
        self.end_grant(n, now);
        let latency = self.rng.below(4) as i64;
        let want = cost.max(1) + self.rng.below(30);
        let validity = self.rng.pick(&[20, 50, 100]);
        self.nodes[n].calls += 1;
        let id = format!("n{n}-{}", self.nodes[n].calls);
        let settle = self.settle_list(n);
        let options: Vec<String> = [
            "action",
            "lease",
            "want",
            &want.to_string(),
            "validity_ms",
            &validity.to_string(),
            "id",
            &id,
            "settle",
            &settle,
        ]
        .map(String::from)
        .to_vec();
        let reply = self.run(now, cost, &options);
        let granted = reply[0] as u64;
        if granted == 0 {
            self.check_retry(now, cost.max(1), &reply);
            return;
        }
        assert!(
            granted >= cost.max(1) && granted <= want,
            "{reply:?} cost {cost} want {want}"
        );
        let sent = now - latency;
        let span = (sent + validity - now + 1) as u64;
        // About three in four of the units are spent, each at a random time of the validity.
        let mut plan = Vec::new();
        for _ in cost..granted {
            if self.rng.below(4) != 0 {
                plan.push(now + self.rng.below(span) as i64);
            }
        }
        plan.sort_unstable();
        self.nodes[n].held = Some(Held {
            id,
            units: granted,
            granted: now,
            cost,
            plan,
            sent,
            validity,
        });
        self.nodes[n].last_options = options;
    }

    /// The same lease call again (its answer lost): the same grant, nothing more.
    fn retry_lease(&mut self, n: usize, now: i64) {
        let node = &self.nodes[n];
        let Some(held) = &node.held else { return };
        if now > held.sent + held.validity {
            return;
        }
        let (units, options, cost) = (held.units, node.last_options.clone(), held.cost);
        let reply = self.run(now, cost, &options);
        assert_eq!(reply[0] as u64, units, "a retried call: {reply:?}");
    }

    /// A per-request check of node `n`, carrying its settlements.
    fn check(&mut self, n: usize, now: i64) {
        let cost = 1 + self.rng.below(2);
        let settle = self.settle_list(n);
        let reply = self.run(now, cost, &["settle".into(), settle]);
        if reply[0] == 1 {
            self.spends.extend(std::iter::repeat_n(now, cost as usize));
        } else {
            self.check_retry(now, cost, &reply);
        }
    }
    fn run(&mut self, now: i64, cost: u64, options: &[String]) -> Vec<i64> {
        let options: Vec<&str> = options.iter().map(String::as_str).collect();
        let reply = self.key.call(&mut self.c, &self.s, cost, now, &options);
        match reply {
            Reply::Array(_) => reply.ints(),
            other => panic!("{options:?} at {now}: {other:?}"),
        }
    }

    /// Now and then, on a copy of the key (nothing else happening to it): `need` does not fit
    /// 1 ms before the refusal's retry_after_ms and fits then.
    fn check_retry(&mut self, now: i64, need: u64, reply: &[i64]) {
        let retry = reply[2];
        if retry <= 0 || self.rng.below(4) != 0 {
            return;
        }
        let copies: Vec<String> = self.key.keys.iter().map(|k| format!("{k}:copy")).collect();
        for (from, to) in self.key.keys.iter().zip(&copies) {
            self.c.cmd(&["DEL", to]);
            self.c.cmd(&["COPY", from, to]);
        }
        let peek = |sim: &mut Self, at: i64| {
            let r = sim
                .key
                .call_on(&mut sim.c, &sim.s, &copies, need, at, &["action", "peek"]);
            r.ints()[0]
        };
        assert_eq!(
            peek(self, now + retry - 1),
            0,
            "{need} fits before {reply:?} at {now}"
        );
        assert_eq!(
            peek(self, now + retry),
            1,
            "{need} does not fit after {reply:?} at {now}"
        );
        self.exact_checks += 1;
    }

    /// The most units spent in any window (a - window_ms, a].
    fn most_in_a_window(&self, window: i64) -> usize {
        let mut times = self.spends.clone();
        times.sort_unstable();
        let mut from = 0;
        (0..times.len())
            .map(|to| {
                while times[from] <= times[to] - window {
                    from += 1;
                }
                to + 1 - from
            })
            .max()
            .unwrap_or(0)
    }
}

/// Simulated calls per seed and rule: about 25 s of the caller's clock.
const STEPS: usize = 10_000;

/// A rule under test: its name, the script's window arguments, each window's (window_ms, limit).
type RuleUnderTest = (&'static str, &'static [&'static str], [(i64, usize); 2]);

#[test]
fn nodes_spending_their_leases_never_exceed_a_window() {
    let redis = RedisServer::start();
    // 100 per second and 500 per 10 s, then windows closer to the leases' validity (100 ms).
    let rules: [RuleUnderTest; 4] = [
        (
            "log",
            &["log", "100", "1000", "log", "500", "10000"],
            [(1000, 100), (10_000, 500)],
        ),
        (
            "buckets",
            &[
                "buckets", "100", "1000", "100", "buckets", "500", "10000", "1000",
            ],
            [(1000, 100), (10_000, 500)],
        ),
        (
            "log-short",
            &["log", "20", "200", "log", "100", "1000"],
            [(200, 20), (1000, 100)],
        ),
        (
            "buckets-short",
            &[
                "buckets", "20", "200", "20", "buckets", "100", "1000", "100",
            ],
            [(200, 20), (1000, 100)],
        ),
    ];
    for (label, windows, limits) in rules {
        for seed in [1u64, 2, 3] {
            let mut c = redis.client();
            let s = Script::rule(&mut c);
            let mut sim = Simulation {
                c,
                s,
                key: Key::new(&format!("{label}-{seed}"), windows),
                rng: Random(seed),
                nodes: (0..3).map(|_| Node::default()).collect(),
                spends: Vec::new(),
                exact_checks: 0,
            };
            let mut now = 1_000i64;
            for _ in 0..STEPS {
                now += sim.rng.below(6) as i64;
                let n = sim.rng.below(3) as usize;
                if now < sim.nodes[n].idle_until {
                    continue;
                }
                let ended = sim.nodes[n]
                    .held
                    .as_ref()
                    .is_none_or(|h| now > h.sent + h.validity);
                let cost = sim.rng.below(3);
                match sim.rng.below(200) {
                    0..=119 if ended => sim.lease(n, now, cost),
                    0..=119 => {}
                    120..=139 => sim.lease(n, now, cost),
                    140..=179 => sim.check(n, now),
                    180..=198 => sim.retry_lease(n, now),
                    // Idle for a while: its last grant stays outstanding until it calls again.
                    _ => {
                        sim.end_grant(n, now);
                        sim.nodes[n].idle_until = now + sim.rng.below(1500) as i64;
                    }
                }
            }
            for n in 0..3 {
                sim.end_grant(n, now);
            }
            for (window, limit) in limits {
                let most = sim.most_in_a_window(window);
                assert!(
                    most <= limit,
                    "{label} seed {seed}: {most} units in a {window} ms window, limit {limit}"
                );
                // The load is above the limits: the windows fill.
                assert!(
                    most * 10 >= limit * 9,
                    "{label} seed {seed}: only {most} in {window} ms"
                );
            }
            assert!(
                sim.exact_checks >= 20,
                "{label} seed {seed}: {} retry checks",
                sim.exact_checks
            );
        }
    }
}
