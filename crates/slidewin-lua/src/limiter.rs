//! `slidewin.limiter{...}`: a keyed rate limiter, one per Lua VM (so one per nginx worker).
//!
//! ```lua
//! local lim = slidewin.limiter{ algorithm = "log", limit = 30, window_ms = 5000 }
//! local delay, remaining_or_err, retry_after_ms = lim:incoming(ngx.var.remote_addr, true)
//! if not delay then ngx.exit(429) end
//! ```
//!
//! `incoming(key, commit, cost)` follows lua-resty-limit-traffic (`0, remaining` when admitted,
//! `nil, "rejected", retry_after_ms` when refused), so these objects compose with
//! `resty.limit.traffic.combine`. `retry_after_ms` is nil when `cost` exceeds the limit (never).

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::{BucketQuota, BucketWindow, Decision, Error, Keyed, KeyedStats, Limiter, Quota};
use slidewin::{SlidingCounter, SlidingLog};

use crate::args::{self, error};
use crate::now_ms;

/// Keys are the bytes of a Lua string (or of a number's decimal form).
type Key = Vec<u8>;

const DEFAULT_MAX_KEYS: u64 = 100_000;

/// The operations the Lua object needs, over any of the three keyed algorithms.
trait Store {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error>;
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error>;
    fn reset(&mut self, key: &[u8]);
    fn stats(&self) -> KeyedStats;
}

impl<L: Limiter> Store for Keyed<L, Key> {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error> {
        if commit {
            self.check_at(key, now_ms, cost)
        } else {
            self.peek_at(key, now_ms, cost)
        }
    }
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.uncommit_at(key, now_ms, cost)
    }
    fn reset(&mut self, key: &[u8]) {
        Keyed::reset(self, key);
    }
    fn stats(&self) -> KeyedStats {
        Keyed::stats(self)
    }
}

/// The userdata behind `slidewin.limiter{...}`.
pub struct LuaLimiter {
    store: Box<dyn Store>,
    limit: u64,
}

const NEW: &str = "slidewin.limiter";

/// `slidewin.limiter{ algorithm, limit, window_ms, bucket_ms, max_keys }`.
pub fn new(_: &Lua, opts: Value) -> LuaResult<LuaLimiter> {
    let Value::Table(opts) = opts else {
        let got = args::describe(&opts);
        return Err(error(
            NEW,
            format_args!("options must be a table, got {got}"),
        ));
    };
    let positive = |name| {
        args::required(
            NEW,
            name,
            "a positive integer",
            args::field_positive(NEW, &opts, name)?,
        )
    };
    let (limit, window_ms) = (positive("limit")?, positive("window_ms")?);
    let max_keys = args::field_positive(NEW, &opts, "max_keys")?.unwrap_or(DEFAULT_MAX_KEYS);
    let max_keys = usize::try_from(max_keys).unwrap_or(usize::MAX);
    // Fits: field_positive admits integers up to 2^53.
    let window_ms = window_ms as i64;
    let algorithm: Value = opts.raw_get("algorithm")?;
    let store = match &algorithm {
        Value::Nil => keyed::<SlidingLog>(Quota::new(limit, window_ms), max_keys),
        Value::String(s) if s == "log" => {
            keyed::<SlidingLog>(Quota::new(limit, window_ms), max_keys)
        }
        Value::String(s) if s == "counter" => {
            keyed::<SlidingCounter>(Quota::new(limit, window_ms), max_keys)
        }
        Value::String(s) if s == "buckets" => {
            let bucket_ms = positive("bucket_ms")? as i64;
            keyed::<BucketWindow>(BucketQuota::new(limit, window_ms, bucket_ms), max_keys)
        }
        other => {
            let got = args::describe(other);
            return Err(error(
                NEW,
                format_args!("algorithm must be \"log\", \"buckets\" or \"counter\", got {got}"),
            ));
        }
    };
    Ok(LuaLimiter {
        store: store.map_err(args::core(NEW))?,
        limit,
    })
}

/// A keyed store of limiter `L` behind the [`Store`] seam.
fn keyed<L: Limiter + 'static>(
    config: Result<L::Config, Error>,
    max_keys: usize,
) -> Result<Box<dyn Store>, Error> {
    Ok(Box::new(Keyed::<L, Key>::new(config?, max_keys)?))
}

/// Runs `f` on a key's bytes: a string's own bytes (borrowed, no copy), a number's decimal
/// form (so 42 and "42" are one key).
fn with_key<R>(function: &str, key: &Value, f: impl FnOnce(&[u8]) -> LuaResult<R>) -> LuaResult<R> {
    match key {
        Value::String(s) => f(&s.as_bytes()),
        Value::Integer(i) => f(i.to_string().as_bytes()),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => {
            f((*n as i64).to_string().as_bytes())
        }
        Value::Number(n) if n.is_finite() => f(n.to_string().as_bytes()),
        other => Err(error(
            function,
            format_args!(
                "key must be a string or a finite number, got {}",
                args::describe(other)
            ),
        )),
    }
}

fn retry(decision: &Decision) -> Value {
    decision
        .retry_after_ms
        .map_or(Value::Nil, |ms| Value::Number(ms as f64))
}

impl LuaLimiter {
    fn decide(
        &mut self,
        function: &'static str,
        key: &Value,
        cost: &Value,
        commit: bool,
    ) -> LuaResult<Decision> {
        let cost = args::uint_or(function, "cost", cost, 1)?;
        with_key(function, key, |key| {
            self.store
                .decide(key, now_ms(), cost, commit)
                .map_err(args::core(function))
        })
    }
}

impl UserData for LuaLimiter {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // lua-resty-limit-traffic's contract: 0, remaining | nil, "rejected", retry_after_ms.
        methods.add_method_mut(
            "incoming",
            |lua, this, (key, commit, cost): (Value, Value, Value)| {
                let commit = !matches!(commit, Value::Nil | Value::Boolean(false));
                let d = this.decide("lim:incoming", &key, &cost, commit)?;
                Ok(if d.allowed {
                    (
                        Value::Integer(0),
                        Value::Number(d.remaining as f64),
                        Value::Nil,
                    )
                } else {
                    (
                        Value::Nil,
                        Value::String(lua.create_string("rejected")?),
                        retry(&d),
                    )
                })
            },
        );
        // The store seam's form: allowed, remaining, retry_after_ms, reset_after_ms.
        methods.add_method_mut(
            "decide",
            |_, this, (key, cost, commit): (Value, Value, Value)| {
                let commit = !matches!(commit, Value::Nil | Value::Boolean(false));
                let d = this.decide("lim:decide", &key, &cost, commit)?;
                Ok((
                    d.allowed,
                    d.remaining as f64,
                    retry(&d),
                    d.reset_after_ms as f64,
                ))
            },
        );
        methods.add_method_mut("check", |lua, this, (key, cost): (Value, Value)| {
            let d = this.decide("lim:check", &key, &cost, true)?;
            decision_table(lua, &d)
        });
        methods.add_method_mut("uncommit", |_, this, (key, cost): (Value, Value)| {
            let function = "lim:uncommit";
            let cost = args::uint_or(function, "cost", &cost, 1)?;
            with_key(function, &key, |key| {
                this.store
                    .uncommit(key, now_ms(), cost)
                    .map_err(args::core(function))
            })?;
            Ok(true)
        });
        methods.add_method_mut("reset", |_, this, key: Value| {
            with_key("lim:reset", &key, |key| {
                this.store.reset(key);
                Ok(())
            })
        });
        methods.add_method("stats", |lua, this, ()| {
            let s = this.store.stats();
            let t = lua.create_table()?;
            t.set("keys", s.keys as f64)?;
            t.set("evictions", s.evictions as f64)?;
            t.set("allowed", s.allowed as f64)?;
            t.set("rejected", s.rejected as f64)?;
            Ok(t)
        });
        methods.add_method("limit", |_, this, ()| Ok(this.limit as f64));
    }
}

fn decision_table(lua: &Lua, d: &Decision) -> LuaResult<Table> {
    let t = lua.create_table_with_capacity(0, 5)?;
    t.set("allowed", d.allowed)?;
    t.set("limit", d.limit as f64)?;
    t.set("remaining", d.remaining as f64)?;
    t.set("retry_after_ms", retry(d))?;
    t.set("reset_after_ms", d.reset_after_ms as f64)?;
    Ok(t)
}
