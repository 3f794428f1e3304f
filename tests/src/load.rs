//! Load on a real nginx and what its answers say: clients hammering a location, the times the
//! server decided admitted requests at (its `X-T0`/`X-T1` headers), the busiest window, reloads.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::http::Response;
use crate::nginx::Nginx;

/// When the server decided an admitted request: between X-T0 and X-T1 (its now_ms).
pub fn decided(r: &Response) -> (i64, i64) {
    let t = |h| r.header(h).expect("X-T0/X-T1 on a 200").parse().unwrap();
    (t("X-T0"), t("X-T1"))
}

/// `clients` threads sending GET `path` back to back for `for_ms`; every response.
pub fn hammer(nginx: &Nginx, path: &str, clients: usize, for_ms: u64) -> Vec<Response> {
    let deadline = Instant::now() + Duration::from_millis(for_ms);
    thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    while Instant::now() < deadline {
                        out.push(nginx.get(path));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// The most admitted requests certainly inside one window of `window_ms` (both their times
/// in it), over every window that ends at an admission; and the same count for requests that
/// may be inside (either time in it).
pub fn busiest_window(mut admitted: Vec<(i64, i64)>, window_ms: i64) -> (usize, usize) {
    admitted.sort();
    let (mut certain, mut possible) = (0, 0);
    for &(_, end) in &admitted {
        let start = end - window_ms; // the window (start, end]
        let inside = |&&(t0, t1): &&(i64, i64)| t0 > start && t1 <= end;
        let touches = |&&(t0, t1): &&(i64, i64)| t1 > start && t0 <= end;
        certain = certain.max(admitted.iter().filter(inside).count());
        possible = possible.max(admitted.iter().filter(touches).count());
    }
    (certain, possible)
}

/// The decision times of the admitted responses.
pub fn admitted_times(responses: &[Response]) -> Vec<(i64, i64)> {
    responses
        .iter()
        .filter(|r| r.status == 200)
        .map(decided)
        .collect()
}

/// Asserts that refusals in `responses` advertise `policy` (their RateLimit-Policy) and that
/// each of `windows` (policy item names) refused some: their RateLimit reads `"<name>";r=0;t=`.
pub fn assert_each_window_refused(responses: &[Response], policy: &str, windows: &[&str]) {
    for window in windows {
        let described = format!("\"{window}\";r=0;t=");
        assert!(
            responses.iter().any(|r| r.status == 429
                && r.header("RateLimit-Policy") == Some(policy)
                && r.header("RateLimit")
                    .is_some_and(|v| v.starts_with(&described))),
            "a refusal by window {window} advertising {policy}"
        );
    }
}

/// `nginx -s reload`, by SIGHUP to the master.
pub fn reload(nginx: &Nginx) {
    let master = std::fs::read_to_string(nginx.prefix.dir.join("logs/nginx.pid")).unwrap();
    let status = Command::new("kill")
        .args(["-HUP", master.trim()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// One request that may meet a worker killed under it: `None` for a reset connection.
pub fn try_get(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    let started = Instant::now();
    let read = stream.read_to_end(&mut raw);
    assert!(started.elapsed() < Duration::from_secs(5), "a request hung");
    read.ok()?;
    String::from_utf8_lossy(&raw)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// The worker processes of `nginx` now (children of its master).
pub fn worker_pids(nginx: &Nginx) -> Vec<u32> {
    let master = std::fs::read_to_string(nginx.prefix.dir.join("logs/nginx.pid")).unwrap();
    let out = Command::new("pgrep")
        .args(["-P", master.trim()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect()
}
