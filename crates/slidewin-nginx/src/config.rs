//! The directives' arguments, read into plain values before nginx sees any of them: every
//! refusal is an `nginx -t` error naming the directive, the argument and the value.
//!
//! ```nginx
//! slidewin_zone  api size=10m log 10/1s log 50/10s max_limit=100;
//! slidewin_zone  hourly size=1m buckets 1000/1h bucket=1m max_key_bytes=32;
//! slidewin_limit api key=$binary_remote_addr cost=$arg_cost status=429 dry_run headers=draft;
//! slidewin_limit tokens key=$http_x_user cost=$arg_max settle=$upstream_http_x_usage;
//! slidewin_limit_log_level warn;
//! ```
//!
//! A window starts with its algorithm (a name of the core's `Algorithm`: `log`, `buckets`,
//! `counter`) and `LIMIT/SPAN`; the options after it (`bucket=`, `max_limit=`, `name=`) are
//! its own. Spans are in nginx's time syntax: `500ms`, `10s`, `1m`, `1h30m`, `1d`, `1w`,
//! `1M` (30 days), `1y` (365 days).

use slidewin::headers::Style;
use slidewin::reservation::Excess;
use slidewin::rule::{Limits, Rule, MAX_WINDOWS};
use slidewin::shared::{Full, ProcessOwner, Zone};
use slidewin::window_name::{BadName, WindowNames, MAX_NAME_BYTES};
use slidewin::window_spec::{Algorithm, WindowSpec};

/// The smallest zone: nginx's slab header takes its first pages.
const MIN_SIZE: usize = 32 * 1024;
/// The largest zone: a new zone is zeroed word by word when nginx starts (even `nginx -t`),
/// so a typo of a unit must not commit gigabytes.
const MAX_SIZE: usize = 1 << 30;
/// The longest key stored as it is, unless the zone says otherwise (as `resty.slidewin`).
const DEFAULT_KEY_BYTES: usize = 64;

/// A `slidewin_zone`.
#[derive(Debug, Clone)]
pub struct ZoneSpec {
    pub name: String,
    pub size: usize,
    pub max_key_bytes: usize,
    /// What the zone does with a new key when its set is full of keys holding units.
    pub full: Full,
    pub rule: Rule,
    /// Each window's name in the headers, as `resty.slidewin` names it by default.
    pub window_names: Vec<String>,
}

/// How a `slidewin_limit` answers.
#[derive(Debug, Clone)]
pub struct LimitSpec<'a> {
    pub zone: &'a str,
    pub key: &'a [u8],
    pub cost: Cost<'a>,
    /// `settle=`: the cost the call used, read in the log phase; what it did not use of
    /// `cost` (a reservation) goes back at the decision's stamp.
    pub settle: Option<&'a [u8]>,
    /// `above=`: what a settlement above the reservation does (none: said in error.log, the
    /// reservation stays; `clamp`: the same, unsaid; `debt`: the excess is owed at the stamp).
    pub above: Excess,
    /// `limit=`: the key's own limits, one per window ([`limits`]), a constant or a value
    /// with variables.
    pub limit: Option<&'a [u8]>,
    pub status: usize,
    pub dry_run: bool,
    pub style: Style,
}

/// A `slidewin_limit`'s `cost=`: a constant, checked when nginx reads it, or a value with
/// variables, read for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost<'a> {
    Fixed(u64),
    Variable(&'a [u8]),
}

/// An error when `arg` (`name=value`, or a bare word) was given already in `before`: a
/// second `key=` would otherwise hide the first, good or bad.
fn once(directive: &str, before: &[&[u8]], arg: &[u8]) -> Result<(), String> {
    let name_of = |a: &[u8]| -> Vec<u8> { a.split(|&b| b == b'=').next().unwrap_or(a).to_vec() };
    let name = name_of(arg);
    let algorithm = std::str::from_utf8(&name)
        .ok()
        .and_then(Algorithm::named)
        .is_some();
    match !algorithm && before.iter().any(|b| name_of(b) == name) {
        true => Err(invalid(
            directive,
            &String::from_utf8_lossy(&name),
            "given once",
            arg,
        )),
        false => Ok(()),
    }
}

/// `directive: argument must be what, got "value"`.
fn invalid(directive: &str, argument: &str, what: &str, value: &[u8]) -> String {
    format!(
        "{directive}: {argument} must be {what}, got \"{}\"",
        String::from_utf8_lossy(value)
    )
}

fn text(arg: &[u8]) -> &str {
    core::str::from_utf8(arg).unwrap_or("")
}

/// A zone or window name: letters, digits, `_ . -` (what `resty.slidewin` accepts).
fn is_name(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME_BYTES
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `10m`, `64k`, `1g` or bytes.
fn size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits_only(digits)?.checked_mul(unit)
}

/// Bytes as a size to write in the config: whole kilobytes, rounded up.
fn size_text(bytes: usize) -> String {
    format!("{}k", bytes.div_ceil(1024))
}

fn digits_only(s: &str) -> Option<usize> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A span in ms, in nginx's time syntax: values with units from the largest down (`1h30m`,
/// `1d12h`, `500ms`), the units `y` (365 days), `M` (30 days), `w`, `d`, `h`, `m`, `s`,
/// `ms`; bare digits are milliseconds.
fn span_ms(s: &str) -> Option<i64> {
    const UNITS: [(&str, i64); 8] = [
        ("y", 365 * 86_400_000),
        ("M", 30 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("ms", 1),
        ("m", 60_000),
        ("s", 1_000),
    ];
    if let Some(ms) = digits_only(s) {
        return i64::try_from(ms).ok().filter(|&ms| ms > 0);
    }
    let (mut rest, mut total, mut last_unit) = (s, 0_i64, i64::MAX);
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let value = i64::try_from(digits_only(&rest[..digits])?).ok()?;
        let (suffix, unit) = UNITS.iter().find(|(u, _)| rest[digits..].starts_with(u))?;
        // Each unit smaller than the one before, as nginx reads them.
        if *unit >= last_unit {
            return None;
        }
        total = total.checked_add(value.checked_mul(*unit)?)?;
        (rest, last_unit) = (&rest[digits + suffix.len()..], *unit);
    }
    (total > 0).then_some(total)
}

/// One window being read.
struct WindowArgs {
    algorithm: Algorithm,
    limit: u64,
    window_ms: i64,
    bucket_ms: Option<i64>,
    max_limit: Option<u64>,
    name: Option<String>,
}

/// `slidewin_zone NAME size=SIZE [max_key_bytes=N] WINDOW...` (args after the directive).
pub fn zone(args: &[&[u8]]) -> Result<ZoneSpec, String> {
    const D: &str = "slidewin_zone";
    let name = args.first().copied().unwrap_or_default();
    if !is_name(name) {
        return Err(invalid(
            D,
            "the zone name",
            "letters, digits, _ . - (at most 200)",
            name,
        ));
    }
    let mut size_bytes = None;
    let mut max_key_bytes = DEFAULT_KEY_BYTES;
    let mut full = Full::Evict;
    let mut windows: Vec<WindowArgs> = Vec::new();
    for (i, &arg) in args.iter().enumerate().skip(1) {
        let s = text(arg);
        // A window's options are its own: only the zone's are checked across the line.
        let zone_option = ["size=", "max_key_bytes=", "full="]
            .iter()
            .any(|o| s.starts_with(o));
        if windows.is_empty() || zone_option {
            once(D, &args[1..i], arg)?;
        }
        if let Some(v) = s.strip_prefix("size=") {
            let bytes = size(v).filter(|b| (MIN_SIZE..=MAX_SIZE).contains(b));
            size_bytes = Some(bytes.ok_or_else(|| {
                invalid(
                    D,
                    "size",
                    "a size from 32k to 1g (bytes, or with k, m, g)",
                    arg,
                )
            })?);
        } else if let Some(v) = s.strip_prefix("max_key_bytes=") {
            let range = slidewin::shared::KEY_BYTES;
            let what = format!("an integer from {} to {}", range.start(), range.end());
            max_key_bytes = digits_only(v)
                .filter(|n| range.contains(n))
                .ok_or_else(|| invalid(D, "max_key_bytes", &what, arg))?;
        } else if let Some(v) = s.strip_prefix("full=") {
            full = match v {
                "evict" => Full::Evict,
                "refuse" => Full::Refuse,
                _ => return Err(invalid(D, "full", "evict or refuse", arg)),
            };
        } else if let Some(algorithm) = Algorithm::named(s) {
            windows.push(WindowArgs {
                algorithm,
                limit: 0,
                window_ms: 0,
                bucket_ms: None,
                max_limit: None,
                name: None,
            });
        } else if let Some(w) = windows.last_mut() {
            window_option(w, s, arg)?;
        } else {
            let kinds = Algorithm::ALL.map(Algorithm::name).join(", ");
            let what = format!("size=, max_key_bytes=, full= or a window ({kinds})");
            return Err(invalid(D, "an argument", &what, arg));
        }
    }
    let size = size_bytes.ok_or_else(|| invalid(D, "size", "given (size=10m)", b""))?;
    if windows.is_empty() || windows.len() > MAX_WINDOWS {
        let what = format!("1 to {MAX_WINDOWS} windows (log 10/1s)");
        return Err(invalid(
            D,
            "the windows",
            &what,
            windows.len().to_string().as_bytes(),
        ));
    }
    let name = text(name).to_string();
    let mut rule_windows = Vec::new();
    let window_at = |i: usize| {
        let w = &windows[i];
        let (algorithm, limit, span) = (w.algorithm.name(), w.limit, w.window_ms);
        format!("window {} ({algorithm} {limit}/{span}ms)", i + 1)
    };
    for (i, w) in windows.iter().enumerate() {
        let at = window_at(i);
        if w.limit == 0 {
            return Err(invalid(
                D,
                &at,
                "LIMIT/SPAN after its algorithm (log 10/1s)",
                b"",
            ));
        }
        // The core checks every window; bucket= is this directive's word for bucket_ms.
        let core = |e: slidewin::Error| match e {
            slidewin::Error::InvalidArgument {
                name: "bucket_ms",
                expected,
                got,
            } => format!("{D}: {at}: bucket= must be {expected}, got {got}"),
            e => format!("{D}: {at}: {e}"),
        };
        let window = WindowSpec {
            algorithm: w.algorithm,
            limit: w.limit,
            window_ms: w.window_ms,
            bucket_ms: w.bucket_ms,
            max_limit: w.max_limit,
        }
        .build()
        .map_err(core)?;
        rule_windows.push(window);
    }
    let configured = windows.iter().map(|w| (w.name.clone(), w.window_ms));
    let names = WindowNames::new(&name, configured).map_err(|bad| {
        let (i, what, value) = match bad {
            BadName::Repeated(i, value) => (i, "unique in the zone", value),
            BadName::Characters(i, value) => (i, "letters, digits, _ . -", value),
            BadName::TooLong(i, value) => (i, "at most 200 bytes", value),
        };
        invalid(D, &format!("{} name", window_at(i)), what, value.as_bytes())
    })?;
    let window_names = windows
        .iter()
        .enumerate()
        .map(|(i, w)| names.name(i, w.window_ms))
        .collect();
    let rule = Rule::new(rule_windows).map_err(|e| format!("{D}: {e}"))?;
    Zone::<&[core::sync::atomic::AtomicU64], ProcessOwner>::capacity_for(
        &rule,
        max_key_bytes,
        usable_bytes(size),
    )
    .map_err(|e| match e {
        // The core counts the region; the directive's size also holds nginx's slab header.
        slidewin::Error::RegionTooSmall { needed, .. } => {
            let at_least = (needed as usize + 3 * 4096) / 127 * 128 + 128;
            format!(
                "{D} \"{name}\": size must be at least {} (8 keys of these windows and \
                 max_key_bytes), got {size} bytes",
                size_text(at_least.max(MIN_SIZE))
            )
        }
        e => format!("{D} \"{name}\": {e}"),
    })?;
    Ok(ZoneSpec {
        name,
        size,
        max_key_bytes,
        full,
        rule,
        window_names,
    })
}

/// The bytes of a zone of `size` left after nginx's slab header (a page, and a page
/// descriptor per page): a lower bound of what the zone's init finds.
pub fn usable_bytes(size: usize) -> usize {
    size.saturating_sub(3 * 4096 + size / 128)
}

fn window_option(w: &mut WindowArgs, s: &str, arg: &[u8]) -> Result<(), String> {
    const D: &str = "slidewin_zone";
    let given = [
        ("bucket=", w.bucket_ms.is_some()),
        ("max_limit=", w.max_limit.is_some()),
        ("name=", w.name.is_some()),
    ];
    if let Some((option, _)) = given.iter().find(|(o, set)| *set && s.starts_with(o)) {
        let option = option.trim_end_matches('=');
        return Err(invalid(D, option, "given once in a window", arg));
    }
    if let Some(v) = s.strip_prefix("bucket=") {
        w.bucket_ms =
            Some(span_ms(v).ok_or_else(|| invalid(D, "bucket", "a span (1m, 10s, 500ms)", arg))?);
    } else if let Some(v) = s.strip_prefix("max_limit=") {
        let n = digits_only(v).filter(|&n| n > 0);
        w.max_limit =
            Some(n.ok_or_else(|| invalid(D, "max_limit", "a positive integer", arg))? as u64);
    } else if let Some(v) = s.strip_prefix("name=") {
        if !is_name(v.as_bytes()) {
            return Err(invalid(
                D,
                "name",
                "letters, digits, _ . - (at most 200)",
                arg,
            ));
        }
        w.name = Some(v.to_string());
    } else if w.limit == 0 {
        let parsed = s.split_once('/').and_then(|(limit, span)| {
            Some((digits_only(limit).filter(|&n| n > 0)?, span_ms(span)?))
        });
        let (limit, window_ms) = parsed.ok_or_else(|| {
            invalid(
                D,
                &format!("the {} window", w.algorithm.name()),
                "LIMIT/SPAN (10/1s, 1000/1h)",
                arg,
            )
        })?;
        w.limit = limit as u64;
        w.window_ms = window_ms;
    } else {
        return Err(invalid(
            D,
            "a window option",
            "bucket=, max_limit= or name=",
            arg,
        ));
    }
    Ok(())
}

/// `slidewin_limit ZONE key=VALUE [cost=VALUE] [limit=VALUE] [settle=VALUE [above=clamp|debt]]
/// [status=CODE] [dry_run] [headers=STYLE]`.
pub fn limit<'a>(args: &[&'a [u8]]) -> Result<LimitSpec<'a>, String> {
    const D: &str = "slidewin_limit";
    let zone = args.first().copied().unwrap_or_default();
    if !is_name(zone) {
        return Err(invalid(
            D,
            "the zone name",
            "letters, digits, _ . - (at most 200)",
            zone,
        ));
    }
    let mut spec = LimitSpec {
        zone: text(zone),
        key: b"",
        cost: Cost::Fixed(1),
        settle: None,
        above: Excess::Refuse,
        limit: None,
        status: 429,
        dry_run: false,
        style: Style::Draft,
    };
    for (i, &arg) in args.iter().enumerate().skip(1) {
        let s = text(arg);
        once(D, &args[1..i], arg)?;
        if let Some(v) = arg.strip_prefix(b"key=") {
            if v.is_empty() {
                return Err(invalid(D, "key", "a value ($binary_remote_addr)", arg));
            }
            spec.key = v;
        } else if let Some(v) = arg.strip_prefix(b"cost=") {
            if v.is_empty() {
                return Err(invalid(D, "cost", "a value (an integer or $variable)", arg));
            }
            spec.cost = match v.contains(&b'$') {
                true => Cost::Variable(v),
                false => Cost::Fixed(cost(v)?),
            };
        } else if let Some(v) = arg.strip_prefix(b"settle=") {
            if !v.contains(&b'$') {
                let expected = "a value with a variable ($upstream_http_x_usage)";
                return Err(invalid(D, "settle", expected, arg));
            }
            spec.settle = Some(v);
        } else if let Some(v) = arg.strip_prefix(b"limit=") {
            if v.is_empty() {
                let expected = "a value (100,5000 or $plan_limits)";
                return Err(invalid(D, "limit", expected, arg));
            }
            spec.limit = Some(v);
        } else if let Some(v) = s.strip_prefix("above=") {
            spec.above = match v {
                "clamp" => Excess::Clamp,
                "debt" => Excess::Owe,
                _ => return Err(invalid(D, "above", "clamp or debt", arg)),
            };
        } else if let Some(v) = s.strip_prefix("status=") {
            spec.status = digits_only(v)
                .filter(|n| (400..=599).contains(n))
                .ok_or_else(|| invalid(D, "status", "a code from 400 to 599", arg))?;
        } else if s == "dry_run" {
            spec.dry_run = true;
        } else if let Some(v) = s.strip_prefix("headers=") {
            spec.style = Style::from_name(v)
                .ok_or_else(|| invalid(D, "headers", "draft, x-ratelimit or off", arg))?;
        } else {
            return Err(invalid(
                D,
                "an argument",
                "key=, cost=, limit=, settle=, above=, status=, dry_run or headers=",
                arg,
            ));
        }
    }
    if spec.key.is_empty() {
        return Err(invalid(D, "key", "given (key=$binary_remote_addr)", b""));
    }
    if spec.above != Excess::Refuse && spec.settle.is_none() {
        let given = args.iter().find(|a| a.starts_with(b"above=")).copied();
        return Err(invalid(
            D,
            "above",
            "given with settle=",
            given.unwrap_or_default(),
        ));
    }
    Ok(spec)
}

/// A cost as `cost=` gives it: a non-negative integer.
pub fn cost(text: &[u8]) -> Result<u64, String> {
    let parsed = core::str::from_utf8(text).ok().and_then(|s| {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u64>().unwrap_or(u64::MAX))
    });
    parsed.ok_or_else(|| {
        format!(
            "slidewin_limit: cost must be a non-negative integer, got \"{}\"",
            String::from_utf8_lossy(text)
        )
    })
}

/// The limits `limit=` gives `zone` (of `rule`): one per window, comma-separated, each from 1
/// to its window's max_limit.
pub fn limits(zone: &str, rule: &Rule, text: &[u8]) -> Result<Limits, String> {
    let parsed: Option<Vec<u64>> = text.split(|&b| b == b',').map(|v| cost(v).ok()).collect();
    let checked = match parsed {
        Some(values) => rule.check_limits(&values).map_err(|e| e.to_string()),
        None => Err("each must be an integer, comma-separated (100,5000)".to_string()),
    };
    checked.map_err(|e| {
        let got = String::from_utf8_lossy(text);
        let windows = rule.windows().len();
        format!(
            "slidewin_limit: limit must be {windows} limit(s) of zone \"{zone}\", one per \
             window, got \"{got}\": {e}"
        )
    })
}

/// The error.log level of a refusal (`slidewin_limit_log_level`, as `limit_req_log_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Info,
    Notice,
    Warn,
    Error,
}

/// `slidewin_limit_log_level info | notice | warn | error`.
pub fn log_level(args: &[&[u8]]) -> Result<LogLevel, String> {
    let level = match args {
        [b"info"] => LogLevel::Info,
        [b"notice"] => LogLevel::Notice,
        [b"warn"] => LogLevel::Warn,
        [b"error"] => LogLevel::Error,
        _ => {
            return Err(invalid(
                "slidewin_limit_log_level",
                "the level",
                "one of info, notice, warn, error",
                &args.join(&b' '),
            ))
        }
    };
    Ok(level)
}

/// The variable named right after a `$` at the start of `rest` (`name` or `{name}`: letters,
/// digits and `_`, lowercased by nginx; none for a regex capture `$1` or an unclosed brace),
/// and the bytes it takes.
fn variable_after_dollar(rest: &[u8]) -> (Option<&[u8]>, usize) {
    let braced = rest.first() == Some(&b'{');
    let at = usize::from(braced);
    let len = rest[at..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
        .count();
    let name = &rest[at..at + len];
    let closed = !braced || rest.get(at + len) == Some(&b'}');
    let named = closed && !name.is_empty() && !name.iter().all(u8::is_ascii_digit);
    (
        named.then_some(name),
        at + len + usize::from(braced && closed),
    )
}

/// The variable `value` is made of alone (`$name`, `${name}`; not a regex capture), read
/// without nginx's script engine.
pub fn lone_variable(value: &[u8]) -> Option<&[u8]> {
    let rest = value.strip_prefix(b"$")?;
    match variable_after_dollar(rest) {
        (Some(name), used) if used == rest.len() => Some(name),
        _ => None,
    }
}

/// The variables `value` reads (`$name`, `${name}`), lowercased as nginx looks them up;
/// regex captures (`$1`) are left out.
pub fn variables(value: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.iter().position(|&b| b == b'$') {
        let (name, used) = variable_after_dollar(&rest[at + 1..]);
        names.extend(name.map(|n| String::from_utf8_lossy(n).to_ascii_lowercase()));
        rest = &rest[at + 1 + used..];
    }
    names
}
