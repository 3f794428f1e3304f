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

/// What the walk of one zone saw.
struct Seen {
    name: String,
    dry_runs: bool,
    scan: Scan,
    stats: ZoneStats,
}

/// Every family of every zone, family by family.
fn text(zones: &[Seen]) -> String {
    let mut out = String::new();
    for (i, (family, kind, help)) in FAMILIES.iter().enumerate() {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
        for Seen {
            name,
            dry_runs,
            scan,
            stats,
        } in zones
        {
            let _ = match i {
                0 => requests(&mut out, family, name, *dry_runs, stats),
                1 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.keys),
                2 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.evictions),
                3 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", scan.at_limit),
                _ => histogram(&mut out, family, name, scan),
            };
        }
    }
    out
}

/// The decisions of zone `name` by outcome: a dry run's refusal let the request through and
/// is `would_reject` (as a Lua limiter's with `dry_run`), shown where some limit dry-runs.
fn requests(
    out: &mut String,
    family: &str,
    name: &str,
    dry_runs: bool,
    stats: &ZoneStats,
) -> core::fmt::Result {
    let line = |out: &mut String, outcome: &str, n: u64| {
        writeln!(
            out,
            "{family}{{limiter=\"{name}\",outcome=\"{outcome}\"}} {n}"
        )
    };
    line(out, "allowed", stats.allowed)?;
    line(out, "rejected", stats.rejected)?;
    if dry_runs {
        line(out, "would_reject", stats.would_reject)?;
    }
    Ok(())
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
    let sum = significant_9(scan.usage_sum);
    writeln!(out, "{family}_sum{{limiter=\"{name}\"}} {sum}")?;
    writeln!(out, "{family}_count{{limiter=\"{name}\"}} {}", scan.live)
}

/// `x` as C's `%.9g` writes it, the text the Lua layer's `/metrics` gives the same sum (nine
/// significant digits hide the float's last bits): fixed for exponents -4 to 8, else
/// `d.ddde+XX`, trailing zeros dropped either way.
fn significant_9(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    // Nine significant digits, rounded as printf rounds: `d.dddddddde<exp>`.
    let scientific = format!("{x:.8e}");
    let (mantissa, exp) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |digits: String| match digits.contains('.') {
        true => digits
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string(),
        false => digits,
    };
    if (-4..9).contains(&exp) {
        let decimals = (8 - exp) as usize;
        trim(format!("{x:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mantissa.to_string()), exp.abs())
    }
}
