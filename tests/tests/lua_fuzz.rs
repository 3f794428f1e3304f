//! The Lua API fuzzed inside a real nginx worker (tests/lua/fuzz.lua): random values of every
//! type for every public function and method, called with ':' and '.'. Every failure must be a
//! Lua error (or nil, err) naming the argument, and the worker must survive: the same PID
//! before and after, no "exited on signal" in error.log.
//!
//! `make test` runs 50,000 calls (a few seconds); `make fuzz` runs more (`FUZZ_ITERATIONS`).
//! `FUZZ_SEED` replays a run (each run prints its seed).

use std::time::{SystemTime, UNIX_EPOCH};

use slidewin_tests::nginx::{repo_root, Nginx};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn random_calls_never_crash_a_worker_and_every_failure_names_its_argument() {
    let iterations = env_or("FUZZ_ITERATIONS", 50_000);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let seed = env_or("FUZZ_SEED", now.as_millis() as u64 % 1_000_000_007);
    println!("FUZZ_SEED={seed} FUZZ_ITERATIONS={iterations}");
    let script = std::fs::read_to_string(repo_root().join("tests/lua/fuzz.lua")).unwrap();
    let nginx = Nginx::start("test.conf", 1);
    let pid_before = nginx.eval("return ngx.worker.pid()").body;

    // In chunks, so no request runs for long and a crash is seen near its cause.
    let chunk = 5_000;
    let mut done = 0;
    while done < iterations {
        let n = chunk.min(iterations - done);
        let out = nginx.eval(&format!(
            "ITERATIONS, SEED = {n}, {}\n{script}",
            seed + done
        ));
        assert_eq!(out.status, 200, "calls {done}..: {}", out.body);
        let summary = out.body.lines().next().unwrap_or_default();
        println!("{summary}");
        let calls: u64 = summary
            .strip_prefix("calls=")
            .and_then(|rest| rest.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        assert!(
            calls >= n && summary.ends_with(" bad=0"),
            "seed {}: {}",
            seed + done,
            out.body
        );
        if done == 0 {
            println!("{}", out.body);
        }
        done += n;
    }

    assert_eq!(
        nginx.eval("return ngx.worker.pid()").body,
        pid_before,
        "the worker was replaced"
    );
    let log = nginx.error_log();
    assert!(!log.contains("exited on signal"), "{log}");
    assert_eq!(nginx.get("/ok").status, 200);
}
