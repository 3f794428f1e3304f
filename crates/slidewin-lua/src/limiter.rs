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

use mlua::{Lua, Result as LuaResult, Value};
use slidewin::{BucketQuota, BucketWindow, Decision, Error, Keyed, KeyedStats, Limiter, Quota};
use slidewin::{SlidingCounter, SlidingLog};

use crate::args::{self, error};
use crate::now_ms;

/// Keys are the bytes of a Lua string (or of a number's decimal form).
type Key = Vec<u8>;

const DEFAULT_MAX_KEYS: u64 = 100_000;
/// Longer keys are kept as a 16-byte digest: with the defaults a store's key text is at most
/// about 100,000 x 256 bytes, whatever the clients send.
const DEFAULT_MAX_KEY_BYTES: u64 = 256;

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
            self.check_bytes_at(key, now_ms, cost)
        } else {
            self.peek_bytes_at(key, now_ms, cost)
        }
    }
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.uncommit_bytes_at(key, now_ms, cost)
    }
    fn reset(&mut self, key: &[u8]) {
        self.reset_bytes(key);
    }
    fn stats(&self) -> KeyedStats {
        Keyed::stats(self)
    }
}

/// What a `slidewin.limiter{...}` object holds (its Lua side is in [`crate::object`]).
pub struct LuaLimiter {
    store: Box<dyn Store>,
    limit: u64,
}

impl LuaLimiter {
    /// Decide at the module's clock; record `cost` when it fits and `commit` is true.
    pub fn decide(&mut self, key: &[u8], cost: u64, commit: bool) -> Result<Decision, Error> {
        self.store.decide(key, now_ms(), cost, commit)
    }

    pub fn uncommit(&mut self, key: &[u8], cost: u64) -> Result<(), Error> {
        self.store.uncommit(key, now_ms(), cost)
    }

    pub fn reset(&mut self, key: &[u8]) {
        self.store.reset(key);
    }

    pub fn stats(&self) -> KeyedStats {
        self.store.stats()
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }
}

const NEW: &str = "slidewin.limiter";

/// `slidewin.limiter{ algorithm, limit, window_ms, bucket_ms, max_keys, max_key_bytes }`.
pub fn new(lua: &Lua, opts: Value) -> LuaResult<Value> {
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
    let max_key_bytes =
        args::field_positive(NEW, &opts, "max_key_bytes")?.unwrap_or(DEFAULT_MAX_KEY_BYTES);
    let max_key_bytes = usize::try_from(max_key_bytes).unwrap_or(usize::MAX);
    // Fits: field_positive admits integers up to 2^53.
    let window_ms = window_ms as i64;
    let algorithm: Value = opts.raw_get("algorithm")?;
    let store = match &algorithm {
        Value::Nil => keyed::<SlidingLog>(Quota::new(limit, window_ms), max_keys, max_key_bytes),
        Value::String(s) if s == "log" => {
            keyed::<SlidingLog>(Quota::new(limit, window_ms), max_keys, max_key_bytes)
        }
        Value::String(s) if s == "counter" => {
            keyed::<SlidingCounter>(Quota::new(limit, window_ms), max_keys, max_key_bytes)
        }
        Value::String(s) if s == "buckets" => {
            let bucket_ms = positive("bucket_ms")? as i64;
            keyed::<BucketWindow>(
                BucketQuota::new(limit, window_ms, bucket_ms),
                max_keys,
                max_key_bytes,
            )
        }
        other => {
            let got = args::describe(other);
            return Err(error(
                NEW,
                format_args!("algorithm must be \"log\", \"buckets\" or \"counter\", got {got}"),
            ));
        }
    };
    let limiter = LuaLimiter {
        store: store.map_err(args::core(NEW))?,
        limit,
    };
    crate::object::push(lua, limiter)
}

/// A keyed store of limiter `L` behind the [`Store`] seam.
fn keyed<L: Limiter + 'static>(
    config: Result<L::Config, Error>,
    max_keys: usize,
    max_key_bytes: usize,
) -> Result<Box<dyn Store>, Error> {
    Ok(Box::new(
        Keyed::<L, Key>::new(config?, max_keys)?.with_max_key_bytes(max_key_bytes)?,
    ))
}
