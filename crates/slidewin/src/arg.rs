//! Checked conversions of host numbers (Lua and JS numbers are `f64`) to the core's integers,
//! shared by every binding so each argument is judged, and named, the same way everywhere.
//!
//! ```
//! use slidewin::arg;
//! assert_eq!(arg::uint("cost", 3.0), Ok(3));
//! assert_eq!(
//!     arg::uint("cost", 1.5).unwrap_err().to_string(),
//!     "cost must be a non-negative integer, got 1.5"
//! );
//! ```

use crate::{Error, Value};

/// Integers of magnitude up to 2^53 are exact in an `f64`.
pub const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// A whole, non-negative `f64` as a `u64`.
pub fn uint(name: &'static str, v: f64) -> Result<u64, Error> {
    if (0.0..=MAX_EXACT).contains(&v) && v == (v as u64) as f64 {
        Ok(v as u64)
    } else {
        Err(Error::invalid(
            name,
            "a non-negative integer",
            Value::Float(v),
        ))
    }
}

/// A whole `f64` as an `i64`.
pub fn int(name: &'static str, v: f64) -> Result<i64, Error> {
    if v.is_finite() && v.abs() <= MAX_EXACT && v == (v as i64) as f64 {
        Ok(v as i64)
    } else {
        Err(Error::invalid(name, "an integer", Value::Float(v)))
    }
}
