//! The name a window of a rule goes by in `RateLimit-Policy` and `RateLimit` when its config
//! gives none: one derivation for every door (the OpenResty layer's config, the native nginx
//! module's `slidewin_zone`), so the same rule sends the same names wherever it is answered.
//!
//! ```
//! use slidewin::window_name::default_name;
//!
//! assert_eq!(default_name("api", 0, 1_000), "api");
//! assert_eq!(default_name("api", 1, 3_600_000), "api-1h");
//! assert_eq!(default_name("api", 2, 1_500), "api-1500ms");
//! ```

use alloc::format;
use alloc::string::String;

/// The name of window `index` (0-based) of the rule named `rule`, of length `window_ms`: the
/// rule's own for the first window, with the window's length after it for the others (the
/// first is the one most clients read; the others are told apart by their length).
pub fn default_name(rule: &str, index: usize, window_ms: i64) -> String {
    match index {
        0 => rule.into(),
        _ => format!("{rule}-{}", span(window_ms)),
    }
}

/// A window's length in its largest whole unit: 1d, 1h, 10m, 10s, else milliseconds (1500ms).
fn span(ms: i64) -> String {
    const UNITS: [(i64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    match UNITS.iter().find(|(unit, _)| ms % unit == 0) {
        Some((unit, suffix)) => format!("{}{suffix}", ms / unit),
        None => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_names_the_length_it_divides_whole() {
        let names =
            [86_400_000, 7_200_000, 600_000, 10_000, 1_500, 1].map(|ms| default_name("r", 1, ms));
        assert_eq!(
            names,
            ["r-1d", "r-2h", "r-10m", "r-10s", "r-1500ms", "r-1ms"]
        );
        assert_eq!(default_name("r", 0, 1_500), "r");
    }
}
