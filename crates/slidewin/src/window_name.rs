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
//!
//! // A rule's names: a window keeps its configured name while it keeps its configured length.
//! use slidewin::window_name::WindowNames;
//! let names = WindowNames::new("api", [(None, 1_000), (Some("hourly".into()), 3_600_000)]).unwrap();
//! assert_eq!(names.name(0, 1_000), "api");
//! assert_eq!(names.name(1, 3_600_000), "hourly");
//! assert_eq!(names.name(1, 60_000), "api-1m"); // the rule was put again with another window
//! ```

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// The longest name a window goes by, so that a header's values always fit their buffer.
pub const MAX_NAME_BYTES: usize = 200;

/// Why a window's name was refused: the 0-based window and the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BadName {
    /// Not letters, digits, `_`, `.` or `-` (or empty): what a header item and a metric label
    /// carry as they are.
    Characters(usize, String),
    /// Longer than [`MAX_NAME_BYTES`].
    TooLong(usize, String),
    /// Another window of the rule goes by it.
    Repeated(usize, String),
}

/// The names of a rule's windows, derived once for every door: each window keeps the name its
/// config gave the window at its place while the window there keeps the configured length, and
/// goes by [`default_name`] otherwise (a rule put again with other windows is a new rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowNames {
    rule: String,
    /// Per configured window: the name given (if any) and the window's length.
    configured: Vec<(Option<String>, i64)>,
}

impl WindowNames {
    /// The names of the rule `rule` whose windows were configured as `configured` (a name
    /// given or not, and the window's length), checked: each name of letters, digits, `_ . -`,
    /// no two alike.
    pub fn new(
        rule: &str,
        configured: impl IntoIterator<Item = (Option<String>, i64)>,
    ) -> Result<Self, BadName> {
        let names = Self {
            rule: rule.into(),
            configured: configured.into_iter().collect(),
        };
        let mut seen: Vec<String> = Vec::with_capacity(names.configured.len());
        for (i, &(_, window_ms)) in names.configured.iter().enumerate() {
            let name = names.name(i, window_ms);
            if name.is_empty() || !name.bytes().all(is_name_byte) {
                return Err(BadName::Characters(i, name));
            }
            if name.len() > MAX_NAME_BYTES {
                return Err(BadName::TooLong(i, name));
            }
            if seen.contains(&name) {
                return Err(BadName::Repeated(i, name));
            }
            seen.push(name);
        }
        Ok(names)
    }

    /// The name of window `index` (0-based) when it is `window_ms` long.
    pub fn name(&self, index: usize, window_ms: i64) -> String {
        match self.configured.get(index) {
            Some((Some(name), configured_ms)) if *configured_ms == window_ms => name.clone(),
            _ => default_name(&self.rule, index, window_ms),
        }
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')
}

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

    #[test]
    fn names_are_checked_and_follow_the_configured_lengths() {
        let named = |n: &str| Some(String::from(n));
        let names = WindowNames::new("r", [(named("fast"), 1_000), (None, 60_000)]).unwrap();
        assert_eq!(
            [
                names.name(0, 1_000),
                names.name(0, 2_000),
                names.name(1, 60_000)
            ],
            ["fast", "r", "r-1m"]
        );
        assert_eq!(
            names.name(2, 1_000),
            "r-1s",
            "a window the config never had"
        );
        assert_eq!(
            WindowNames::new("r", [(named("a b"), 1_000)]),
            Err(BadName::Characters(0, "a b".into()))
        );
        assert_eq!(
            WindowNames::new("r", [(None, 1_000), (named("r"), 2_000)]),
            Err(BadName::Repeated(1, "r".into()))
        );
        let long = "n".repeat(MAX_NAME_BYTES + 1);
        assert_eq!(
            WindowNames::new(&long, [(None, 1_000)]),
            Err(BadName::TooLong(0, long))
        );
    }
}
