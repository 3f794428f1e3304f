//! A window described once: its [`Algorithm`] (name and number), a [`WindowSpec`] of
//! key/values that nginx directive arguments and Lua tables both fill and one builder checks,
//! and one encoding to words ([`RuleWindow::words`], [`RuleWindow::from_words`]) for shared
//! memory and exports. A new window kind is added here, and nowhere in the bindings.
//!
//! ```
//! use slidewin::window_spec::{Algorithm, WindowSpec};
//! use slidewin::rule::RuleWindow;
//!
//! let spec = WindowSpec {
//!     bucket_ms: Some(100),
//!     max_limit: Some(50),
//!     ..WindowSpec::new(Algorithm::named("buckets").unwrap(), 10, 1_000)
//! };
//! let window = spec.build()?;
//! assert_eq!(window.algorithm().name(), "buckets");
//! assert_eq!(window.words(), [2, 10, 1_000, 100, 50]);
//! assert_eq!(RuleWindow::from_words(window.words())?, window);
//! assert_eq!(WindowSpec::of(&window), spec);
//! # Ok::<(), slidewin::Error>(())
//! ```

use crate::rule::{RuleWindow, WindowConfig};
use crate::{BucketQuota, Error, Quota, Value};

/// How a window counts. Its number ([`Algorithm::code`]) is what shared memory and exports
/// hold; 0 is never one, so zeroed words are no window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// An exact sliding log.
    Log,
    /// Buckets of `bucket_ms`.
    Buckets,
    /// A sliding-window counter (an estimate).
    Counter,
}

impl Algorithm {
    /// Every algorithm, in the order of their numbers.
    pub const ALL: [Self; 3] = [Self::Log, Self::Buckets, Self::Counter];

    /// What configs call it: `log`, `buckets`, `counter`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Buckets => "buckets",
            Self::Counter => "counter",
        }
    }

    /// The algorithm a config names.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// What an error says was expected: `"log", "buckets" or "counter"`.
    pub const EXPECTED: &'static str = "\"log\", \"buckets\" or \"counter\"";

    /// What an error says a number in words must be: `1, 2 or 3`.
    pub const CODES: &'static str = "1, 2 or 3";

    /// Its number in shared memory and exports: 1, 2, 3.
    pub const fn code(self) -> u64 {
        match self {
            Self::Log => 1,
            Self::Buckets => 2,
            Self::Counter => 3,
        }
    }

    /// Whether it counts every unit where it was spent (a counter estimates from two counts):
    /// only an exact window can be leased ([`crate::lease::check_windows`]).
    pub const fn exact(self) -> bool {
        match self {
            Self::Log | Self::Buckets => true,
            Self::Counter => false,
        }
    }

    /// The algorithm numbered `code`.
    pub fn from_code(code: u64) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.code() == code)
    }
}

/// Words of a window: algorithm, limit, window_ms, bucket_ms (0: none), max_limit.
pub const WINDOW_WORDS: usize = 5;

/// A window as a config gives it, before it is checked: the one builder of a [`RuleWindow`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    /// How it counts.
    pub algorithm: Algorithm,
    /// The configured limit.
    pub limit: u64,
    /// The window's length.
    pub window_ms: i64,
    /// A bucket's length: given for buckets, for them alone.
    pub bucket_ms: Option<i64>,
    /// The most the limit may be raised to (default: the limit).
    pub max_limit: Option<u64>,
}

impl WindowSpec {
    /// A window of `algorithm`, `limit` per `window_ms`, nothing else given.
    pub const fn new(algorithm: Algorithm, limit: u64, window_ms: i64) -> Self {
        Self {
            algorithm,
            limit,
            window_ms,
            bucket_ms: None,
            max_limit: None,
        }
    }

    /// The window, checked; errors name the option and the value.
    pub fn build(&self) -> Result<RuleWindow, Error> {
        let (limit, window_ms) = (self.limit, self.window_ms);
        let window = match (self.algorithm, self.bucket_ms) {
            (Algorithm::Buckets, Some(bucket_ms)) => {
                RuleWindow::buckets(BucketQuota::new(limit, window_ms, bucket_ms)?)
            }
            (Algorithm::Buckets, None) => {
                // None reads as 0: no bucket.
                let expected = "a positive integer for a buckets window";
                return Err(Error::invalid("bucket_ms", expected, Value::UInt(0)));
            }
            (_, Some(bucket_ms)) => {
                let expected = "given for a buckets window alone";
                return Err(Error::invalid("bucket_ms", expected, Value::Int(bucket_ms)));
            }
            (Algorithm::Log, None) => RuleWindow::log(Quota::new(limit, window_ms)?),
            (Algorithm::Counter, None) => RuleWindow::counter(Quota::new(limit, window_ms)?),
        };
        window.with_max_limit(self.max_limit.unwrap_or(limit))
    }

    /// The spec `window` was built from (`max_limit` always given).
    pub fn of(window: &RuleWindow) -> Self {
        Self {
            algorithm: window.algorithm(),
            limit: window.limit(),
            window_ms: window.window_ms(),
            bucket_ms: window.bucket_ms(),
            max_limit: Some(window.max_limit()),
        }
    }
}

impl RuleWindow {
    /// How it counts.
    pub const fn algorithm(&self) -> Algorithm {
        match self.config() {
            WindowConfig::Log(_) => Algorithm::Log,
            WindowConfig::Buckets(_) => Algorithm::Buckets,
            WindowConfig::Counter(_) => Algorithm::Counter,
        }
    }

    /// A bucket's length, for buckets.
    pub const fn bucket_ms(&self) -> Option<i64> {
        match self.config() {
            WindowConfig::Buckets(b) => Some(b.bucket_ms()),
            _ => None,
        }
    }

    /// As words: algorithm, limit, window_ms, bucket_ms (0: none), max_limit.
    pub fn words(&self) -> [u64; WINDOW_WORDS] {
        [
            self.algorithm().code(),
            self.limit(),
            self.window_ms() as u64,
            self.bucket_ms().unwrap_or(0) as u64,
            self.max_limit(),
        ]
    }

    /// The window of [`RuleWindow::words`]; an error names what does not fit.
    pub fn from_words(
        [code, limit, window_ms, bucket_ms, max_limit]: [u64; WINDOW_WORDS],
    ) -> Result<Self, Error> {
        let algorithm = Algorithm::from_code(code)
            .ok_or_else(|| Error::invalid("algorithm", Algorithm::CODES, Value::UInt(code)))?;
        let int = |name, word: u64| {
            i64::try_from(word).map_err(|_| Error::invalid(name, "below 2^63", Value::UInt(word)))
        };
        WindowSpec {
            algorithm,
            limit,
            window_ms: int("window_ms", window_ms)?,
            bucket_ms: (bucket_ms != 0)
                .then(|| int("bucket_ms", bucket_ms))
                .transpose()?,
            max_limit: Some(max_limit),
        }
        .build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn names_and_numbers_go_both_ways() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::named(a.name()), Some(a));
            assert_eq!(Algorithm::from_code(a.code()), Some(a));
        }
        assert_eq!(Algorithm::named("token_bucket"), None);
        assert_eq!(Algorithm::from_code(0), None, "zeroed words are no window");
    }

    #[test]
    fn the_error_words_list_every_algorithm() {
        for a in Algorithm::ALL {
            let name = alloc::format!("\"{}\"", a.name());
            assert!(Algorithm::EXPECTED.contains(&name), "{name}");
            assert!(Algorithm::CODES.contains(&a.code().to_string()), "{a:?}");
        }
    }

    #[test]
    fn every_window_comes_back_from_its_words_and_spec() {
        let specs = [
            WindowSpec::new(Algorithm::Log, 10, 1_000),
            WindowSpec {
                bucket_ms: Some(250),
                ..WindowSpec::new(Algorithm::Buckets, 10, 1_000)
            },
            WindowSpec {
                max_limit: Some(99),
                ..WindowSpec::new(Algorithm::Counter, 10, 1_000)
            },
        ];
        for spec in specs {
            let w = spec.build().unwrap();
            assert_eq!(RuleWindow::from_words(w.words()).unwrap(), w);
            assert_eq!(WindowSpec::of(&w).build().unwrap(), w);
        }
    }

    #[test]
    fn a_bad_spec_names_its_option_and_value() {
        let err = |spec: WindowSpec| spec.build().unwrap_err().to_string();
        let buckets = WindowSpec::new(Algorithm::Buckets, 10, 1_000);
        assert!(err(buckets).contains("bucket_ms"));
        let log = WindowSpec {
            bucket_ms: Some(100),
            ..WindowSpec::new(Algorithm::Log, 10, 1_000)
        };
        assert!(err(log).contains("bucket_ms") && err(log).contains("100"));
        let low = WindowSpec {
            max_limit: Some(5),
            ..WindowSpec::new(Algorithm::Log, 10, 1_000)
        };
        assert!(err(low).contains("max_limit") && err(low).contains('5'));
        let words = RuleWindow::from_words([9, 10, 1_000, 0, 10]).unwrap_err();
        assert!(words.to_string().contains("algorithm"), "{words}");
    }
}
