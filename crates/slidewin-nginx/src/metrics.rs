//! `slidewin_metrics;`: every zone's counters and how full its windows are, as Prometheus
//! text with the families and labels `resty.slidewin`'s `/metrics` uses (one dashboard reads
//! both).
//!
//! The window usage comes from a walk over every set of a zone (the core's [`Walk`]), which a
//! [`Scrape`] does [`STEP`] at a time: the handler lets the worker serve its other events
//! between two steps, so a zone of a million keys (a tenth of a second's walk) keeps no
//! request waiting longer than a step. One walk gives both the usage and the counters.

use core::time::Duration;
use std::time::Instant;

use slidewin::prometheus::{Exposition, Family, Kind, Number};
use slidewin::shared::{Scan, Walk, Zone, ZoneExport, ZoneStats};
use slidewin::store::Store;
use slidewin::{Clock, SystemClock};

use crate::nginx::process::WorkerOwner;
use crate::zone::Words;

/// How long a scrape walks before the worker serves its other events.
pub const STEP: Duration = Duration::from_millis(1);

/// A scrape under way: every mapped zone, walked in turn.
pub struct Scrape {
    zones: Vec<Walking>,
    /// The zone being walked.
    next: usize,
}

struct Walking {
    name: String,
    /// Some limit dry-runs it: its would-be refusals are shown.
    dry_runs: bool,
    zone: Zone<Words, WorkerOwner>,
    walk: Walk,
}

impl Scrape {
    /// A scrape of `zones`: each zone's name, whether some limit dry-runs it, its export and its
    /// words (the export's).
    pub fn new<'a>(
        zones: impl Iterator<Item = (&'a str, bool, ZoneExport, Words)>,
    ) -> Result<Self, String> {
        let zones = zones.map(|(name, dry_runs, export, words)| {
            let opened = export
                .rule()
                .and_then(|rule| Zone::open(words, rule, export.max_key_bytes, WorkerOwner));
            Ok(Walking {
                name: name.to_string(),
                dry_runs,
                zone: opened.map_err(|e| format!("slidewin_metrics: zone \"{name}\": {e}"))?,
                // The usage alone: no top lists.
                walk: Walk::scan(0),
            })
        });
        Ok(Self {
            zones: zones.collect::<Result<_, String>>()?,
            next: 0,
        })
    }

    /// Walks on for about `budget` (a slice of a zone at least): true once every zone is walked.
    pub fn step(&mut self, budget: Duration) -> Result<bool, String> {
        let started = Instant::now();
        let now_ms = SystemClock.now_ms();
        while let Some(z) = self.zones.get_mut(self.next) {
            let left = budget.saturating_sub(started.elapsed());
            // A zone always lists its keys.
            let over = z
                .zone
                .walk_for(&mut z.walk, now_ms, left)
                .unwrap_or(Ok(true));
            match over {
                Ok(true) => self.next += 1,
                Ok(false) => return Ok(false),
                Err(e) => return Err(format!("slidewin_metrics: zone \"{}\": {e}", z.name)),
            }
        }
        Ok(true)
    }

    /// The text of what the walks saw.
    pub fn text(self) -> String {
        let seen: Vec<Seen> = self
            .zones
            .into_iter()
            .map(|z| {
                let (scan, stats) = z.walk.finish();
                Seen {
                    name: z.name,
                    dry_runs: z.dry_runs,
                    scan: scan.unwrap_or_default(),
                    stats,
                }
            })
            .collect();
        text(&seen)
    }
}

/// The families, as `resty.slidewin`'s `/metrics` names them.
const FAMILIES: [(&str, Kind, &str); 5] = [
    (
        "slidewin_requests_total",
        Kind::Counter,
        "Rate-limit decisions by outcome.",
    ),
    (
        "slidewin_keys",
        Kind::Gauge,
        "Keys the store tracks (shdict: keys seen in the current window).",
    ),
    (
        "slidewin_evictions_total",
        Kind::Counter,
        "Live keys dropped to make room (store shm).",
    ),
    (
        "slidewin_window_keys_at_limit",
        Kind::Gauge,
        "Keys with a full window now: their next request is refused.",
    ),
    (
        "slidewin_window_usage_ratio",
        Kind::Histogram,
        "In-window count / limit of the keys whose window holds something (several windows: \
         the one nearest its limit).",
    ),
];

/// What the walk of one zone saw.
struct Seen {
    name: String,
    dry_runs: bool,
    scan: Scan,
    stats: ZoneStats,
}

/// Every family of every zone, family by family.
fn text(zones: &[Seen]) -> String {
    let mut out = Exposition::new();
    for (i, (name, kind, help)) in FAMILIES.into_iter().enumerate() {
        let family = Family::new(name, kind, help).expect("a metric name");
        for seen in zones {
            let limiter = [("limiter", seen.name.as_bytes())];
            let int = |n: u64| Number::Int(n as i64);
            match i {
                0 => requests(&mut out, &family, seen),
                1 => out.sample(&family, &limiter, int(seen.stats.keys), ""),
                2 => out.sample(&family, &limiter, int(seen.stats.evictions), ""),
                3 => out.sample(&family, &limiter, int(seen.scan.at_limit), ""),
                _ => histogram(&mut out, &family, seen),
            }
        }
    }
    out.text()
}

/// The decisions of a zone by outcome: a dry run's refusal let the request through and is
/// `would_reject` (as a Lua limiter's with `dry_run`), shown where some limit dry-runs.
fn requests(out: &mut Exposition, family: &Family, seen: &Seen) {
    let mut line = |outcome: &str, n: u64| {
        let labels = [
            ("limiter", seen.name.as_bytes()),
            ("outcome", outcome.as_bytes()),
        ];
        out.sample(family, &labels, Number::Int(n as i64), "");
    };
    line("allowed", seen.stats.allowed);
    line("rejected", seen.stats.rejected);
    if seen.dry_runs {
        line("would_reject", seen.stats.would_reject);
    }
}

/// The usage histogram of a zone, as `resty.slidewin.window_metrics` writes it.
fn histogram(out: &mut Exposition, family: &Family, seen: &Seen) {
    let (name, scan) = (seen.name.as_bytes(), &seen.scan);
    let mut bucket = |le: &str, n: u64| {
        out.sample(
            family,
            &[("limiter", name), ("le", le.as_bytes())],
            Number::Int(n as i64),
            "_bucket",
        );
    };
    for (bound, n) in scan.buckets() {
        bucket(&bound.to_string(), n);
    }
    bucket("+Inf", scan.live);
    let sum = Number::Significant(scan.usage_sum, 9);
    out.sample(family, &[("limiter", name)], sum, "_sum");
    out.sample(
        family,
        &[("limiter", name)],
        Number::Int(scan.live as i64),
        "_count",
    );
}
