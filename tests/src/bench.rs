//! What the benchmark programs (src/bin/slidewin-*-bench.rs) share: wrk runs, the CPU time
//! of nginx's workers and of servers per request, medians.

use crate::nginx::Nginx;

/// One wrk run: requests per second and requests completed.
pub struct Run {
    pub rate: f64,
    pub requests: f64,
}

/// wrk on `path` (2 threads, 32 connections, `seconds`), each request for a random one of
/// 10000 users (scripts/wrk-random-user.lua).
pub fn wrk(port: u16, path: &str, seconds: u32) -> Run {
    wrk_with(port, path, seconds, true)
}

/// wrk on `path` as [`wrk`] does, for random users or for `path` as it is (one key).
pub fn wrk_with(port: u16, path: &str, seconds: u32, random_users: bool) -> Run {
    let mut command = std::process::Command::new("wrk");
    command.args(["-t2", "-c32", &format!("-d{seconds}s")]);
    if random_users {
        command
            .arg("-s")
            .arg(crate::nginx::repo_root().join("scripts/wrk-random-user.lua"));
    }
    let out = command
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("run wrk (scripts/deps.sh nginx installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("Non-2xx"),
        "{path}: refused or failed requests\n{text}"
    );
    let rate = text.lines().find_map(|l| l.strip_prefix("Requests/sec:"));
    let requests = text.lines().find_map(|l| {
        l.trim()
            .split_once(" requests in ")
            .map(|(n, _)| n.to_string())
    });
    Run {
        rate: rate
            .unwrap_or_else(|| panic!("no Requests/sec in {text}"))
            .trim()
            .parse()
            .unwrap(),
        requests: requests
            .unwrap_or_else(|| panic!("no request count in {text}"))
            .parse()
            .unwrap(),
    }
}

/// CPU time (user + system) of `pids` so far, in µs (clock ticks of 10 ms).
pub fn cpu_us(pids: &[u32]) -> f64 {
    let ticks: u64 = pids
        .iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .map(|stat| {
            // Fields after the ")" closing the command name: utime and stime are the 12th and 13th.
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .unwrap()
                .1
                .split_whitespace()
                .collect();
            fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
        })
        .sum();
    ticks as f64 * 10_000.0
}

/// The worker processes of the nginx whose master is `master`.
pub fn children(master: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1));
            ppid == Some(master.to_string().as_str())
        })
        .collect()
}

/// wrk on `path`, with the CPU that nginx's workers and the redis-servers spent per request (µs).
pub fn measured(port: u16, path: &str, workers: &[u32], redis: &[u32]) -> (Run, f64, f64) {
    measured_with(port, path, true, workers, redis)
}

/// [`measured`] for random users or for `path` as it is (one key).
pub fn measured_with(
    port: u16,
    path: &str,
    random_users: bool,
    workers: &[u32],
    redis: &[u32],
) -> (Run, f64, f64) {
    let (nginx_before, redis_before) = (cpu_us(workers), cpu_us(redis));
    let run = wrk_with(port, path, 3, random_users);
    let nginx_cpu = (cpu_us(workers) - nginx_before) / run.requests;
    let redis_cpu = (cpu_us(redis) - redis_before) / run.requests;
    (run, nginx_cpu, redis_cpu)
}

/// The worker processes of a running nginx.
pub fn workers_of(nginx: &Nginx) -> Vec<u32> {
    let master: u32 = std::fs::read_to_string(nginx.prefix.dir.join("logs/nginx.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    children(master)
}

/// The median of `values`.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
