//! A [`Rule`] from a Lua options table: its windows, or the one window its top-level fields
//! describe.
//!
//! ```lua
//! slidewin.limiter{ algorithm = "log", limit = 10, window_ms = 1000, max_limit = 100 }
//! slidewin.limiter{ windows = {
//!     { algorithm = "log", limit = 10, window_ms = 1000 },
//!     { algorithm = "buckets", limit = 1000, window_ms = 3600000, bucket_ms = 60000 },
//! } }
//! ```

use mlua::{Result as LuaResult, Table, Value};
use slidewin::rule::{Rule, RuleWindow, MAX_WINDOWS};
use slidewin::shared::Algorithm;
use slidewin::{BucketQuota, Error, Quota};

use crate::args::{self, error};

/// The rule `opts` describes (`function` names the caller in errors), or the core's error
/// (a config no window can have).
pub fn from_options(function: &'static str, opts: &Table) -> LuaResult<Result<Rule, Error>> {
    let windows: Vec<Table> = match opts.raw_get::<Value>("windows")? {
        Value::Nil => vec![opts.clone()],
        Value::Table(list) => {
            let n = list.raw_len();
            if n == 0 || n > MAX_WINDOWS {
                return Err(error(
                    function,
                    format_args!("windows must be a list of 1 to 8 window tables, got {n} windows"),
                ));
            }
            let mut windows = Vec::with_capacity(n);
            for i in 1..=n {
                match list.raw_get::<Value>(i)? {
                    Value::Table(t) => windows.push(t),
                    other => {
                        let got = args::describe(&other);
                        return Err(error(
                            function,
                            format_args!("windows[{i}] must be a table, got {got}"),
                        ));
                    }
                }
            }
            windows
        }
        other => {
            let got = args::describe(&other);
            return Err(error(
                function,
                format_args!("windows must be a list of window tables, got {got}"),
            ));
        }
    };
    let mut parsed = Vec::with_capacity(windows.len());
    for window in &windows {
        match window_of(function, window)? {
            Ok(w) => parsed.push(w),
            Err(e) => return Ok(Err(e)),
        }
    }
    Ok(Rule::new(parsed))
}

/// One window from its table.
fn window_of(function: &'static str, t: &Table) -> LuaResult<Result<RuleWindow, Error>> {
    let positive = |name| {
        args::required(
            function,
            name,
            "a positive integer",
            args::field_positive(function, t, name)?,
        )
    };
    let (limit, window_ms) = (positive("limit")?, positive("window_ms")?);
    // Fits: field_positive admits integers up to 2^53.
    let window_ms = window_ms as i64;
    let algorithm = match t.raw_get::<Value>("algorithm")? {
        Value::Nil => Algorithm::Log,
        Value::String(s) if s == "log" => Algorithm::Log,
        Value::String(s) if s == "buckets" => Algorithm::Buckets {
            bucket_ms: positive("bucket_ms")? as i64,
        },
        Value::String(s) if s == "counter" => Algorithm::Counter,
        other => {
            let got = args::describe(&other);
            return Err(error(
                function,
                format_args!("algorithm must be \"log\", \"buckets\" or \"counter\", got {got}"),
            ));
        }
    };
    let max_limit = args::field_positive(function, t, "max_limit")?.unwrap_or(limit);
    let window = match algorithm {
        Algorithm::Log => Quota::new(limit, window_ms).map(RuleWindow::log),
        Algorithm::Buckets { bucket_ms } => {
            BucketQuota::new(limit, window_ms, bucket_ms).map(RuleWindow::buckets)
        }
        Algorithm::Counter => Quota::new(limit, window_ms).map(RuleWindow::counter),
    };
    Ok(window.and_then(|w| w.with_max_limit(max_limit)))
}
