//! The open-loop load generator of `scripts/bench-adaptive.sh` (`slidewin_tests::load`): prints
//! one line per second (offered, admitted, goodput, refusals, timeouts, p50/p99 of the admitted
//! requests, the probed limit), then a summary of seconds FROM..TO as `key=value` pairs.
//!
//! usage: slidewin-load --port N --path P --rate R --seconds S [--timeout-ms 1000] [--clients 256]
//!        [--probe-path /metrics --probe-metric 'NAME{LABELS}'] [--at SEC:PORT:PATH ...]
//!        [--measure FROM:TO]

use std::sync::Arc;
use std::time::Duration;

use slidewin_tests::http;
use slidewin_tests::openloop::{metric, quantile, Load, Outcome, Second};

fn main() {
    let mut load = Load::default();
    let (mut probe_path, mut probe_metric, mut measure) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--port" => load.port = number(&flag, &value),
            "--path" => load.path = value,
            "--rate" => load.rate = number(&flag, &value),
            "--seconds" => load.seconds = number(&flag, &value),
            "--timeout-ms" => load.timeout = Duration::from_millis(number(&flag, &value)),
            "--clients" => load.clients = number(&flag, &value),
            "--probe-path" => probe_path = Some(value),
            "--probe-metric" => probe_metric = Some(value),
            "--at" => {
                let mut parts = value.splitn(3, ':');
                let (Some(sec), Some(port), Some(path)) =
                    (parts.next(), parts.next(), parts.next())
                else {
                    usage("--at takes SEC:PORT:PATH")
                };
                let action = (number(&flag, sec), number(&flag, port), path.to_string());
                load.actions.push(action);
            }
            "--measure" => {
                let (from, to) = value
                    .split_once(':')
                    .unwrap_or_else(|| usage("--measure takes FROM:TO"));
                measure = Some((number(&flag, from), number(&flag, to)));
            }
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    if load.port == 0 {
        usage("--port is missing");
    }
    if let (Some(path), Some(name)) = (probe_path, probe_metric) {
        let port = load.port;
        load.probe = Some(Arc::new(move || {
            metric(&http::get(port, &path).body, &name)
        }));
    }
    println!(
        "{:>4} {:>7} {:>8} {:>7} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7}",
        "t",
        "offered",
        "admitted",
        "goodput",
        "refused",
        "timeout",
        "failed",
        "unsent",
        "p50_ms",
        "p99_ms",
        "limit"
    );
    let run = load.run();
    for (t, second) in run.seconds.iter().enumerate() {
        println!("{:>4} {}", t, line(second));
    }
    let (from, to) = measure.unwrap_or((0, run.seconds.len()));
    let all = run.merged(from, to);
    let span = (to.min(run.seconds.len()) - from.min(to)).max(1) as f64;
    let limits: Vec<f64> = run.seconds[from.min(run.seconds.len())..to.min(run.seconds.len())]
        .iter()
        .filter_map(|s| s.probe)
        .collect();
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    println!(
        "summary from={from} to={to} offered={:.1} admitted={:.1} goodput={:.1} refused={:.1} \
         timeout={:.1} refused_ratio={:.5} p50={} p99={} limit_min={} limit_max={} limit_mean={} \
         limit_last={}",
        all.offered() as f64 / span,
        all.admitted() as f64 / span,
        all.count(Outcome::Good) as f64 / span,
        all.count(Outcome::Refused) as f64 / span,
        (all.count(Outcome::TimedOut) + all.count(Outcome::Unsent)) as f64 / span,
        all.count(Outcome::Refused) as f64 / all.offered().max(1) as f64,
        fmt(quantile(&all.admitted_ms, 0.5)),
        fmt(quantile(&all.admitted_ms, 0.99)),
        fmt(limits.iter().copied().reduce(f64::min)),
        fmt(limits.iter().copied().reduce(f64::max)),
        fmt((!limits.is_empty()).then(|| limits.iter().sum::<f64>() / limits.len() as f64)),
        fmt(limits.last().copied()),
    );
}

fn line(s: &Second) -> String {
    let ms = |q| quantile(&s.admitted_ms, q).map_or("-".into(), |v| format!("{v:.1}"));
    format!(
        "{:>7} {:>8} {:>7} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7}",
        s.offered(),
        s.admitted(),
        s.count(Outcome::Good),
        s.count(Outcome::Refused),
        s.count(Outcome::TimedOut),
        s.count(Outcome::Failed),
        s.count(Outcome::Unsent),
        ms(0.5),
        ms(0.99),
        s.probe.map_or("-".into(), |v| format!("{v:.0}")),
    )
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| usage(&format!("{flag} takes a number, got {value:?}")))
}

fn usage(problem: &str) -> ! {
    eprintln!(
        "slidewin-load: {problem}\nusage: slidewin-load --port N --path P --rate R --seconds S \
         [--timeout-ms 1000] [--clients 256] [--probe-path /metrics --probe-metric NAME] \
         [--at SEC:PORT:PATH] [--measure FROM:TO]"
    );
    std::process::exit(2);
}
