//! Reading Lua arguments: every failure becomes a Lua error naming the function, the argument
//! and the value ("slidewin.limiter: window_ms must be a positive integer, got -5").

use mlua::{Error as LuaError, Table, Value};

/// A Lua error whose message is exactly `function: message` (no "runtime error:" prefix).
pub fn error(function: &str, message: impl std::fmt::Display) -> LuaError {
    LuaError::external(format!("{function}: {message}"))
}

/// Turns a core error into a Lua error attributed to `function`.
pub fn core(function: &'static str) -> impl Fn(slidewin::Error) -> LuaError {
    move |e| error(function, e)
}

/// A Lua number, or the error "`name` must be a number, got `type`".
pub fn number(function: &str, name: &str, value: &Value) -> Result<f64, LuaError> {
    match value {
        Value::Integer(i) => Ok(*i as f64),
        Value::Number(n) => Ok(*n),
        other => Err(error(
            function,
            format_args!("{name} must be a number, got {}", describe(other)),
        )),
    }
}

/// A Lua value as a non-negative integer (up to 2^53), or the error naming `name` and the value.
pub fn uint(function: &'static str, name: &'static str, value: &Value) -> Result<u64, LuaError> {
    slidewin::arg::uint(name, number(function, name, value)?).map_err(core(function))
}

/// A field of an options table as a positive integer (up to 2^53); `None` when absent.
pub fn field_positive(
    function: &'static str,
    opts: &Table,
    name: &'static str,
) -> Result<Option<u64>, LuaError> {
    positive_in(opts, name)?.map_err(|message| error(function, message))
}

/// [`field_positive`] for a caller that places the message itself: the field's value, or the
/// message naming the field and the value.
pub fn positive_in(
    opts: &Table,
    name: &'static str,
) -> Result<Result<Option<u64>, String>, LuaError> {
    Ok(match opts.raw_get::<Value>(name)? {
        Value::Nil => Ok(None),
        value => positive_value(name, &value).map(Some),
    })
}

/// A Lua value as a positive integer (up to 2^53), or the error naming `name` and the value.
pub fn positive(function: &str, name: &'static str, value: &Value) -> Result<u64, LuaError> {
    positive_value(name, value).map_err(|message| error(function, message))
}

fn positive_value(name: &'static str, value: &Value) -> Result<u64, String> {
    let v = match value {
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        other => return Err(format!("{name} must be a number, got {}", describe(other))),
    };
    match slidewin::arg::uint(name, v) {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(
            slidewin::Error::invalid(name, "a positive integer", slidewin::Value::Float(v))
                .to_string(),
        ),
    }
}

/// A field of an options table that must be a positive integer (up to 2^53).
pub fn field_required_positive(
    function: &'static str,
    opts: &Table,
    name: &'static str,
) -> Result<u64, LuaError> {
    required(
        function,
        name,
        "a positive integer",
        field_positive(function, opts, name)?,
    )
}

/// The `name` field of an options table, a string.
pub fn field_name(function: &str, opts: &Table) -> Result<String, LuaError> {
    match opts.raw_get::<Value>("name")? {
        Value::String(s) => Ok(s.to_string_lossy()),
        other => Err(error(
            function,
            format_args!("name must be a string, got {}", describe(&other)),
        )),
    }
}

/// A required field: `name` must be `expected`, got nil.
pub fn required<T>(
    function: &str,
    name: &str,
    expected: &str,
    value: Option<T>,
) -> Result<T, LuaError> {
    value.ok_or_else(|| error(function, format_args!("{name} must be {expected}, got nil")))
}

/// A value as it appears in messages: strings quoted, numbers as written, other types by name.
pub fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{}\"", s.to_string_lossy()),
        Value::Integer(i) => i.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Boolean(b) => b.to_string(),
        other => other.type_name().to_string(),
    }
}

/// A region's bytes from `opts`: its `size`, or room for `keys` keys (default `default_keys`)
/// as `bytes_for` counts them; both given is an error.
pub fn region_bytes(
    function: &'static str,
    opts: &Table,
    default_keys: u64,
    bytes_for: impl FnOnce(usize) -> Result<usize, LuaError>,
) -> Result<usize, LuaError> {
    match (
        field_positive(function, opts, "size")?,
        field_positive(function, opts, "keys")?,
    ) {
        (Some(_), Some(_)) => Err(error(function, "size and keys: give one of them, got both")),
        (Some(size), None) => Ok(usize::try_from(size).unwrap_or(usize::MAX)),
        (None, keys) => {
            bytes_for(usize::try_from(keys.unwrap_or(default_keys)).unwrap_or(usize::MAX))
        }
    }
}
