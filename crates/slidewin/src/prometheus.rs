//! Prometheus text (exposition format 0.0.4): the one writer of `# HELP`, `# TYPE` and samples
//! for every `/metrics` of the project (the OpenResty layer's, through the Lua module, and the
//! native nginx module's), so that each family has its HELP and TYPE once, every label value
//! is escaped and every number is written alike.
//!
//! ```
//! use slidewin::prometheus::{Exposition, Family, Kind, Number};
//!
//! let requests = Family::new("slidewin_requests_total", Kind::Counter, "Decisions.")?;
//! let mut out = Exposition::new();
//! out.sample(&requests, &[("limiter", b"api"), ("outcome", b"allowed")], Number::Int(12), "");
//! out.sample(&requests, &[("limiter", b"a\"b"), ("outcome", b"rejected")], Number::Int(3), "");
//! assert_eq!(
//!     out.text(),
//!     "# HELP slidewin_requests_total Decisions.\n# TYPE slidewin_requests_total counter\n\
//!      slidewin_requests_total{limiter=\"api\",outcome=\"allowed\"} 12\n\
//!      slidewin_requests_total{limiter=\"a\\\"b\",outcome=\"rejected\"} 3\n"
//! );
//! # Ok::<(), slidewin::Error>(())
//! ```
//!
//! A family is known by its name: samples of families of one name go under the first's HELP,
//! families in the order first sampled. A label value that is not UTF-8 is read as Latin-1
//! (each byte of 128 and above as its code point), so that any key gives valid text and none
//! is lost.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use crate::{Error, Value};

/// A family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Buckets, a sum and a count.
    Histogram,
    /// Quantiles, a sum and a count.
    Summary,
    /// No type said.
    Untyped,
}

impl Kind {
    const ALL: [Self; 5] = [
        Self::Counter,
        Self::Gauge,
        Self::Histogram,
        Self::Summary,
        Self::Untyped,
    ];

    /// As the format spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Counter => "counter",
            Self::Gauge => "gauge",
            Self::Histogram => "histogram",
            Self::Summary => "summary",
            Self::Untyped => "untyped",
        }
    }

    /// The type `name` spells.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A metric family: its name, type and help text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Family {
    name: String,
    kind: Kind,
    help: String,
}

impl Family {
    /// A family; an error names `name` when it is not a metric name.
    pub fn new(name: &str, kind: Kind, help: &str) -> Result<Self, Error> {
        let mut chars = name.chars();
        let first = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || "_:".contains(c));
        if !first || !chars.all(|c| c.is_ascii_alphanumeric() || "_:".contains(c)) {
            let got = Value::UInt(name.len() as u64);
            return Err(Error::invalid(
                "name",
                "a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)",
                got,
            ));
        }
        Ok(Self {
            name: name.into(),
            kind,
            help: help.replace('\\', "\\\\").replace('\n', "\\n"),
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A sample's value and how it is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// An integer.
    Int(i64),
    /// A float: as an integer when it is one (below 2^53), else to 17 significant digits;
    /// NaN and the infinities as the format spells them.
    Float(f64),
    /// A float to `n` significant digits (C's `%.ng`).
    Significant(f64, usize),
    /// A float with `n` decimals (C's `%.nf`).
    Fixed(f64, usize),
}

impl Number {
    fn write(self, out: &mut String) {
        let special = |x: f64| match x {
            x if x.is_nan() => Some("NaN"),
            f64::INFINITY => Some("+Inf"),
            f64::NEG_INFINITY => Some("-Inf"),
            _ => None,
        };
        let _ = match self {
            Number::Int(n) => write!(out, "{n}"),
            Number::Float(x) | Number::Significant(x, _) | Number::Fixed(x, _)
                if special(x).is_some() =>
            {
                out.push_str(special(x).unwrap_or_default());
                Ok(())
            }
            Number::Float(x) if x % 1.0 == 0.0 && x.abs() < 9_007_199_254_740_992.0 => {
                write!(out, "{}", x as i64)
            }
            Number::Float(x) => {
                out.push_str(&significant(x, 17));
                Ok(())
            }
            Number::Significant(x, n) => {
                out.push_str(&significant(x, n));
                Ok(())
            }
            Number::Fixed(x, n) => write!(out, "{x:.n$}"),
        };
    }
}

/// `x` (finite) as C's `%.<digits>g` writes it: fixed for exponents -4 to digits - 1, else
/// `d.ddde+XX`, trailing zeros dropped either way.
pub fn significant(x: f64, digits: usize) -> String {
    let digits = digits.max(1);
    // Rounded as printf rounds: `d.ddde<exp>`.
    let scientific = alloc::format!("{x:.prec$e}", prec = digits - 1);
    let (mantissa, exp) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |text: String| match text.contains('.') {
        true => String::from(text.trim_end_matches('0').trim_end_matches('.')),
        false => text,
    };
    if (-4..digits as i32).contains(&exp) {
        let decimals = (digits as i32 - 1 - exp).max(0) as usize;
        trim(alloc::format!("{x:.decimals$}"))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        alloc::format!("{}e{sign}{:02}", trim(mantissa.into()), exp.abs())
    }
}

/// `bytes` as a label value: UTF-8 as it is (else each byte as its Latin-1 code point), with
/// backslash, double quote and newline escaped.
pub fn label_value(bytes: &[u8], out: &mut String) {
    let mut push = |c: char| match c {
        '\\' => out.push_str("\\\\"),
        '"' => out.push_str("\\\""),
        '\n' => out.push_str("\\n"),
        c => out.push(c),
    };
    match core::str::from_utf8(bytes) {
        Ok(text) => text.chars().for_each(&mut push),
        Err(_) => bytes.iter().for_each(|&b| push(char::from(b))),
    }
}

/// Families and their samples, written as one text.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<(Family, String)>,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a sample of `family` with `labels` (name, value) and `value`; `suffix` names a
    /// series of the family (a histogram's `_bucket`, `_sum`, `_count`; `""`: none).
    pub fn sample(
        &mut self,
        family: &Family,
        labels: &[(&str, &[u8])],
        value: Number,
        suffix: &str,
    ) {
        let at = match self
            .families
            .iter()
            .position(|(f, _)| f.name == family.name)
        {
            Some(at) => at,
            None => {
                self.families.push((family.clone(), String::new()));
                self.families.len() - 1
            }
        };
        let lines = &mut self.families[at].1;
        lines.push_str(&family.name);
        lines.push_str(suffix);
        for (i, (name, value)) in labels.iter().enumerate() {
            lines.push(if i == 0 { '{' } else { ',' });
            lines.push_str(name);
            lines.push_str("=\"");
            label_value(value, lines);
            lines.push('"');
        }
        if !labels.is_empty() {
            lines.push('}');
        }
        lines.push(' ');
        value.write(lines);
        lines.push('\n');
    }

    /// The text: each family's HELP and TYPE, then its samples.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (f, lines) in &self.families {
            let (name, help, kind) = (&f.name, &f.help, f.kind.name());
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{lines}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn number(n: Number) -> String {
        let mut out = String::new();
        n.write(&mut out);
        out
    }

    #[test]
    fn numbers_are_written_as_c_formats_write_them() {
        assert_eq!(number(Number::Float(3.0)), "3");
        assert_eq!(number(Number::Float(-2.0)), "-2");
        assert_eq!(number(Number::Float(0.1)), "0.10000000000000001");
        assert_eq!(number(Number::Float(1e300)), "1.0000000000000001e+300");
        assert_eq!(number(Number::Float(f64::NAN)), "NaN");
        assert_eq!(number(Number::Float(f64::NEG_INFINITY)), "-Inf");
        assert_eq!(
            number(Number::Significant(0.123456789012, 9)),
            "0.123456789"
        );
        assert_eq!(
            number(Number::Significant(123_456_789_012.0, 9)),
            "1.23456789e+11"
        );
        assert_eq!(number(Number::Significant(0.00001234, 9)), "1.234e-05");
        assert_eq!(number(Number::Significant(2.5, 9)), "2.5");
        assert_eq!(number(Number::Fixed(0.12345, 4)), "0.1235");
        assert_eq!(number(Number::Fixed(7.0, 1)), "7.0");
        assert_eq!(number(Number::Int(-5)), "-5");
    }

    #[test]
    fn label_values_are_escaped_and_latin1_when_not_utf8() {
        let mut out = String::new();
        label_value(b"a\\b\"c\nd", &mut out);
        assert_eq!(out, "a\\\\b\\\"c\\nd");
        let mut out = String::new();
        label_value(b"caf\xe9", &mut out);
        assert_eq!(out, "caf\u{e9}");
    }

    #[test]
    fn a_family_is_written_once_in_the_order_first_sampled() {
        let a = Family::new("a_total", Kind::Counter, "A.\nsecond line").unwrap();
        let b = Family::new("b", Kind::Histogram, "B.").unwrap();
        let mut out = Exposition::new();
        out.sample(&b, &[("le", b"+Inf")], Number::Int(1), "_bucket");
        out.sample(&a, &[], Number::Int(2), "");
        out.sample(&b, &[], Number::Float(0.5), "_sum");
        assert_eq!(
            out.text(),
            "# HELP b B.\n# TYPE b histogram\nb_bucket{le=\"+Inf\"} 1\nb_sum 0.5\n\
             # HELP a_total A.\\nsecond line\n# TYPE a_total counter\na_total 2\n"
        );
        let err = Family::new("9lives", Kind::Gauge, "")
            .unwrap_err()
            .to_string();
        assert!(err.contains("name"), "{err}");
        assert_eq!(Kind::named("gauge"), Some(Kind::Gauge));
        assert_eq!(Kind::named("meter"), None);
    }
}
