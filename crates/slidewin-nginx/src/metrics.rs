//! `slidewin_metrics;`: every zone's counters and how full its windows are, as Prometheus
//! text with the families and labels `resty.slidewin`'s `/metrics` uses (one dashboard reads
//! both).
//!
//! The window usage comes from a walk over every set of a zone (the core's [`Walk`]), which a
//! [`Scrape`] does [`STEP`] at a time: the handler lets the worker serve its other events
//! between two steps, so a zone of a million keys (a tenth of a second's walk) keeps no
//! request waiting longer than a step. One walk gives both the usage and the counters.

use core::fmt::Write;
use core::time::Duration;
use std::time::Instant;

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
    zone: Zone<Words, WorkerOwner>,
    walk: Walk,
}

impl Scrape {
    /// A scrape of `zones`: each zone's name, its export and its words (the export's).
    pub fn new<'a>(
        zones: impl Iterator<Item = (&'a str, ZoneExport, Words)>,
    ) -> Result<Self, String> {
        let zones = zones.map(|(name, export, words)| {
            let opened = export
                .rule()
                .and_then(|rule| Zone::open(words, rule, export.max_key_bytes, WorkerOwner));
            Ok(Walking {
                name: name.to_string(),
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
        let seen: Vec<(String, Scan, ZoneStats)> = self
            .zones
            .into_iter()
            .map(|z| {
                let (scan, stats) = z.walk.finish();
                (z.name, scan.unwrap_or_default(), stats)
            })
            .collect();
        text(&seen)
    }
}

const FAMILIES: [(&str, &str, &str); 5] = [
    (
        "slidewin_requests_total",
        "counter",
        "Rate-limit decisions by outcome.",
    ),
    (
        "slidewin_keys",
        "gauge",
        "Keys the store tracks (shdict: keys seen in the current window).",
    ),
    (
        "slidewin_evictions_total",
        "counter",
        "Live keys dropped to make room (store shm).",
    ),
    (
        "slidewin_window_keys_at_limit",
        "gauge",
        "Keys with a full window now: their next request is refused.",
    ),
    (
        "slidewin_window_usage_ratio",
        "histogram",
        "In-window count / limit of the keys whose window holds something (several windows: \
         the one nearest its limit).",
    ),
];

/// Every family of every zone, family by family.
fn text(zones: &[(String, Scan, ZoneStats)]) -> String {
    let mut out = String::new();
    for (i, (family, kind, help)) in FAMILIES.iter().enumerate() {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
        for (name, scan, stats) in zones {
            let _ = match i {
                0 => writeln!(
                    out,
                    "{family}{{limiter=\"{name}\",outcome=\"allowed\"}} {}\n\
                     {family}{{limiter=\"{name}\",outcome=\"rejected\"}} {}",
                    stats.allowed, stats.rejected
                ),
                1 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.keys),
                2 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.evictions),
                3 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", scan.at_limit),
                _ => histogram(&mut out, family, name, scan),
            };
        }
    }
    out
}

/// The usage histogram of zone `name`, as `resty.slidewin.window_metrics` writes it.
fn histogram(out: &mut String, family: &str, name: &str, scan: &Scan) -> core::fmt::Result {
    let series = |le: &dyn core::fmt::Display, n: u64| {
        format!("{family}_bucket{{limiter=\"{name}\",le=\"{le}\"}} {n}\n")
    };
    for (bound, n) in scan.buckets() {
        out.push_str(&series(&bound, n));
    }
    out.push_str(&series(&"+Inf", scan.live));
    writeln!(out, "{family}_sum{{limiter=\"{name}\"}} {}", scan.usage_sum)?;
    writeln!(out, "{family}_count{{limiter=\"{name}\"}} {}", scan.live)
}
