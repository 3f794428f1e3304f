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

use mlua::{Lua, Result as LuaResult, Table, Value};
use slidewin::rule::{Rule, RuleWindow, MAX_WINDOWS};
use slidewin::window_name::{BadName, WindowNames, MAX_NAME_BYTES};
use slidewin::window_spec::{Algorithm, WindowSpec};
use slidewin::Error;

use crate::args::{self, error};

/// The rule `opts` describes (`function` names the caller in errors).
pub fn from_options(function: &'static str, opts: &Table) -> LuaResult<Rule> {
    parse(opts)?.map_err(|message| error(function, message))
}

/// The rule `opts` describes, or why not: the message names the
/// field (with its window's place when the windows are listed: "windows[2].limit") and the
/// value. The one check of a rule's windows, for the limiters and zones of this module and for
/// the Lua layer's configs of every store.
pub fn parse(opts: &Table) -> LuaResult<Result<Rule, String>> {
    match rule_of(opts) {
        Ok(parsed) => Ok(Ok(parsed)),
        Err(Bad::Field(message)) => Ok(Err(message)),
        Err(Bad::Lua(e)) => Err(e),
    }
}

/// The names of the windows of `rule` (which `opts` describes), the rule named `rule_name`:
/// each `windows[i].name`, else the core's default; or why not (the message names the field).
pub fn names(opts: &Table, rule_name: &str, rule: &Rule) -> LuaResult<Result<WindowNames, String>> {
    let listed = match opts.raw_get::<Value>("windows")? {
        Value::Table(list) => Some(list),
        _ => None,
    };
    let mut configured = Vec::with_capacity(rule.windows().len());
    for (i, window) in rule.windows().iter().enumerate() {
        let given = match &listed {
            Some(list) => list.raw_get::<Table>(i + 1)?.raw_get::<Value>("name")?,
            None => Value::Nil,
        };
        let name = match given {
            Value::Nil => None,
            Value::String(s) => Some(s.to_string_lossy()),
            other => {
                return Ok(Err(format!(
                    "windows[{}].name {CHARACTERS}, got {}",
                    i + 1,
                    args::describe(&other)
                )))
            }
        };
        configured.push((name, window.window_ms()));
    }
    let given: Vec<bool> = configured.iter().map(|(name, _)| name.is_some()).collect();
    // A name the config gave, else the rule's (which a default name starts with).
    let field = |i: usize| match given[i] {
        true => format!("windows[{}].name", i + 1),
        false => "name".to_string(),
    };
    Ok(match WindowNames::new(rule_name, configured) {
        Ok(names) => Ok(names),
        Err(BadName::Characters(i, name)) => {
            Err(format!("{} {CHARACTERS}, got \"{name}\"", field(i)))
        }
        Err(BadName::Repeated(i, name)) => Err(format!(
            "{} must be unique in the rule, got \"{name}\"",
            field(i)
        )),
        Err(BadName::TooLong(i, name)) => Err(format!(
            "{} must be at most {MAX_NAME_BYTES} bytes, got \"{name}\"",
            field(i)
        )),
    })
}

const CHARACTERS: &str = "must be a string of letters, digits, _ . -";

/// `rule`'s windows as Lua tables, `{ algorithm, limit, window_ms, bucket_ms, max_limit, name }`
/// (`limit` from `limits`; `name` when `names` are given): what the layer holds of a rule.
pub fn windows_table(
    lua: &Lua,
    rule: &Rule,
    limits: &[u64],
    names: Option<&WindowNames>,
) -> LuaResult<Table> {
    let list = lua.create_table_with_capacity(rule.windows().len(), 0)?;
    for (i, window) in rule.windows().iter().enumerate() {
        let t = lua.create_table_with_capacity(0, 6)?;
        t.raw_set("algorithm", window.algorithm().name())?;
        t.raw_set("limit", limits[i])?;
        t.raw_set("window_ms", window.window_ms())?;
        t.raw_set("bucket_ms", window.bucket_ms())?;
        t.raw_set("max_limit", window.max_limit())?;
        if let Some(names) = names {
            t.raw_set("name", names.name(i, window.window_ms()))?;
        }
        list.raw_push(t)?;
    }
    Ok(list)
}

/// Why a table is no rule: a field's value (the message), or Lua itself failing.
enum Bad {
    Field(String),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Bad {
    fn from(e: mlua::Error) -> Self {
        Bad::Lua(e)
    }
}

impl From<Error> for Bad {
    fn from(e: Error) -> Self {
        Bad::Field(e.to_string())
    }
}

fn rule_of(opts: &Table) -> Result<Rule, Bad> {
    let listed = match opts.raw_get::<Value>("windows")? {
        Value::Nil => None,
        Value::Table(list) => Some(list),
        other => {
            let got = args::describe(&other);
            return Err(Bad::Field(format!(
                "windows must be a list of window tables, got {got}"
            )));
        }
    };
    let Some(list) = listed else {
        return Ok(Rule::one(window_of(opts)?));
    };
    let n = list.raw_len();
    if n == 0 || n > MAX_WINDOWS {
        return Err(Bad::Field(format!(
            "windows must be a list of 1 to 8 window tables, got {n} windows"
        )));
    }
    let mut windows = Vec::with_capacity(n);
    for i in 1..=n {
        let in_list = |message: String| Bad::Field(format!("windows[{i}].{message}"));
        let made = match list.raw_get::<Value>(i)? {
            Value::Table(t) => window_of(&t),
            other => {
                let got = args::describe(&other);
                return Err(Bad::Field(format!(
                    "windows[{i}] must be a table, got {got}"
                )));
            }
        };
        windows.push(made.map_err(|bad| match bad {
            Bad::Field(message) => in_list(message),
            lua => lua,
        })?);
    }
    Ok(Rule::new(windows)?)
}

/// A field of a window table as a positive integer (up to 2^53); `None` when absent.
fn positive(t: &Table, name: &'static str) -> Result<Option<u64>, Bad> {
    args::positive_in(t, name)?.map_err(Bad::Field)
}

/// A field that must be there.
fn required(t: &Table, name: &'static str) -> Result<u64, Bad> {
    positive(t, name)?
        .ok_or_else(|| Bad::Field(format!("{name} must be a positive integer, got nil")))
}

/// One window from its table.
fn window_of(t: &Table) -> Result<RuleWindow, Bad> {
    let (limit, window_ms) = (required(t, "limit")?, required(t, "window_ms")?);
    // Fits: positive admits integers up to 2^53.
    let window_ms = window_ms as i64;
    let algorithm = match t.raw_get::<Value>("algorithm")? {
        Value::Nil => Algorithm::Log,
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| Algorithm::named(&s))
            .ok_or_else(|| {
                let got = args::describe(&Value::String(s));
                Bad::Field(format!(
                    "algorithm must be {}, got {got}",
                    Algorithm::EXPECTED
                ))
            })?,
        other => {
            let got = args::describe(&other);
            return Err(Bad::Field(format!(
                "algorithm must be {}, got {got}",
                Algorithm::EXPECTED
            )));
        }
    };
    let bucket_ms = match algorithm {
        Algorithm::Buckets => Some(required(t, "bucket_ms")? as i64),
        _ => None,
    };
    let window = WindowSpec {
        algorithm,
        limit,
        window_ms,
        bucket_ms,
        max_limit: positive(t, "max_limit")?,
    }
    .build()?;
    Ok(window)
}
