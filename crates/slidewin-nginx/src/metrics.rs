//! `slidewin_metrics;`: every zone's counters as Prometheus text, with the families and
//! labels `resty.slidewin`'s `/metrics` uses (one dashboard reads both).

use core::fmt::Write;

use crate::zone::ZoneState;

/// The text for `zones` (a zone not mapped yet is left out).
pub fn text<'a>(zones: impl Iterator<Item = &'a ZoneState> + Clone) -> String {
    let mut out = String::new();
    let families: [(&str, &str, &str); 3] = [
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
    ];
    for (i, (family, kind, help)) in families.iter().enumerate() {
        let _ = writeln!(out, "# HELP {family} {help}\n# TYPE {family} {kind}");
        for zone in zones.clone() {
            let Some(stats) = zone.stats() else { continue };
            let name = &zone.spec.name;
            let _ = match i {
                0 => writeln!(
                    out,
                    "{family}{{limiter=\"{name}\",outcome=\"allowed\"}} {}\n\
                     {family}{{limiter=\"{name}\",outcome=\"rejected\"}} {}",
                    stats.allowed, stats.rejected
                ),
                1 => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.keys),
                _ => writeln!(out, "{family}{{limiter=\"{name}\"}} {}", stats.evictions),
            };
        }
    }
    out
}
