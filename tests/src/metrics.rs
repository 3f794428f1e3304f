//! Prometheus text in tests: a sample's value, and `promtool check metrics` (the text as
//! Prometheus itself reads it).

use std::io::Write;
use std::process::{Command, Stdio};

/// Panics with promtool's words unless `text` passes `promtool check metrics` silently.
pub fn promtool_check(text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (scripts/deps.sh promtool)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{text}"
    );
}

/// The value of the first sample of `text` that starts with `metric` (a name and its labels,
/// e.g. `slidewin_store_errors_total{limiter="log"}`).
pub fn sample(text: &str, metric: &str) -> u64 {
    value(text, metric).parse().unwrap()
}

/// As [`sample`], for a gauge with a fraction (seconds).
pub fn sample_f64(text: &str, metric: &str) -> f64 {
    value(text, metric).parse().unwrap()
}

fn value<'a>(text: &'a str, metric: &str) -> &'a str {
    let line = text
        .lines()
        .find(|l| l.starts_with(metric))
        .unwrap_or_else(|| panic!("{metric} in {text}"));
    line.rsplit(' ').next().unwrap()
}
