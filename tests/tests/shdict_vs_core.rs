//! Store shdict (lua/resty/slidewin/store/shdict.lua, its counts in a lua_shared_dict) answers
//! exactly as the core's `SlidingCounter` on random traces: several limits and windows, keys,
//! costs from 0 to above the limit, commits, peeks and give-backs, bursts within a
//! millisecond and idle gaps of several windows. Compared call by call: allowed, remaining,
//! retry_after_ms and reset_after_ms. The store runs under LuaJIT with the module
//! (tests/lua/shdict_trace.lua, the dict and clock of tests/lua/fake_ngx.lua).

use std::collections::HashMap;
use std::io::Write;
use std::process::{Command, Stdio};

use slidewin::{Decision, Limiter, SlidingCounter};
use slidewin_tests::nginx::{lua_module, repo_root};
use slidewin_tests::random::Random;

/// (limit, window_ms) of the stores a trace mixes.
const CONFIGS: [(u64, i64); 4] = [(1, 1_000), (5, 1_000), (100, 1_000), (7, 13)];
const KEYS: [&str; 3] = ["alice", "bob", "carol"];

/// One call of a trace: a line of shdict_trace.lua's input.
struct Call {
    config: (u64, i64),
    op: char,
    key: &'static str,
    cost: u64,
    now_ms: i64,
}

fn trace(seed: u64, calls: usize) -> Vec<Call> {
    let mut random = Random(seed);
    let mut now_ms = 1_700_000_000_000 + random.below(1_000) as i64;
    (0..calls)
        .map(|_| {
            let config = random.pick(&CONFIGS);
            let window_ms = config.1 as u64;
            now_ms += match random.below(20) {
                0..=7 => 0,
                8..=16 => random.below(window_ms / 4 + 1),
                17..=18 => random.below(window_ms),
                _ => random.below(3 * window_ms),
            } as i64;
            let op = match random.below(10) {
                0..=6 => 'c',
                7..=8 => 'p',
                _ => 'u',
            };
            let cost = match random.below(10) {
                0 => 0,
                1 => config.0 + 1 + random.below(3),
                _ => 1 + random.below(config.0.div_ceil(2)),
            };
            Call {
                config,
                op,
                key: random.pick(&KEYS),
                cost,
                now_ms,
            }
        })
        .collect()
}

/// What the core's counter answers to each call, as shdict_trace.lua writes answers.
fn core_answers(calls: &[Call]) -> Vec<String> {
    let mut counters: HashMap<((u64, i64), &str), SlidingCounter> = HashMap::new();
    calls
        .iter()
        .map(|call| {
            let counter = counters
                .entry((call.config, call.key))
                .or_insert_with(|| SlidingCounter::new(call.config.0, call.config.1).unwrap());
            let decision = match call.op {
                'c' => counter.check_at(call.now_ms, call.cost),
                'p' => counter.peek_at(call.now_ms, call.cost),
                _ => {
                    counter.uncommit_at(call.now_ms, call.cost).unwrap();
                    return "true".to_string();
                }
            };
            let Decision {
                allowed,
                remaining,
                retry_after_ms,
                reset_after_ms,
                ..
            } = decision.unwrap();
            let retry = retry_after_ms.map_or("nil".to_string(), |ms| ms.to_string());
            format!("{allowed} {remaining} {retry} {reset_after_ms}")
        })
        .collect()
}

/// What store shdict answers to each call.
fn shdict_answers(calls: &[Call]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(lua_module(), dir.path().join("slidewin.so")).expect("copy module");
    let root = repo_root();
    let mut child = Command::new("luajit")
        .arg(root.join("tests/lua/shdict_trace.lua"))
        .env("LUA_PATH", format!("{}/lua/?.lua;;", root.display()))
        .env("LUA_CPATH", format!("{}/?.so;;", dir.path().display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run luajit (scripts/deps.sh nginx installs it)");
    let mut input = String::new();
    for c in calls {
        let (limit, window_ms) = c.config;
        input += &format!(
            "{limit} {window_ms} {} {} {} {}\n",
            c.op, c.key, c.cost, c.now_ms
        );
    }
    // Written from a thread: the child's answers fill its pipe while it still reads.
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("luajit output");
    writer.join().expect("writer").expect("write the trace");
    assert!(
        out.status.success(),
        "shdict_trace.lua failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn shdict_store_answers_as_the_core_counter_on_random_traces() {
    for seed in [1, 7, 42, 2024, 0x5eed] {
        let calls = trace(seed, 20_000);
        let want = core_answers(&calls);
        let got = shdict_answers(&calls);
        assert_eq!(got.len(), want.len(), "seed {seed}: one answer per call");
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            let c = &calls[i];
            assert_eq!(
                got, want,
                "seed {seed}, call {i}: {} {} cost {} at {} under {:?}",
                c.op, c.key, c.cost, c.now_ms, c.config
            );
        }
        // The trace reaches every kind of answer, so the comparison is not of one case.
        for kind in ["true 0 0", "false 0 nil", "false 0 ", "true"] {
            assert!(
                want.iter().any(|a| a.starts_with(kind)),
                "seed {seed}: no answer like {kind:?}"
            );
        }
    }
}
