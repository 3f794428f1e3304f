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
use slidewin::shared::{SharedLimiter, Zone, ZoneStats};
use slidewin::{BucketQuota, BucketWindow, Decision, Error, Keyed, Limiter, Quota};
use slidewin::{SlidingCounter, SlidingLog};

use crate::args::{self, error};
use crate::mapping::WorkerOwner;
use crate::now_ms;
use crate::shared::{self, Region, Spec};

/// Keys are the bytes of a Lua string (or of a number's decimal form).
type Key = Vec<u8>;

const DEFAULT_MAX_KEYS: u64 = 100_000;
/// Longer keys are kept as a 16-byte digest (in shared memory: a 128-bit keyed digest), so a
/// store's key text is bounded by its keys x this, whatever the clients send.
const DEFAULT_MAX_KEY_BYTES: u64 = 64;

/// The operations the Lua object needs, over any of the three keyed algorithms, in this
/// worker ([`Keyed`]) or in shared memory ([`crate::shared`]).
pub trait Store {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
    ) -> Result<Decision, Error>;
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error>;
    fn reset(&mut self, key: &[u8]);
    fn stats(&self) -> ZoneStats;
}

/// Implements [`Store`] for a keyed type over byte keys, given its methods for a check, a
/// peek, an uncommit and a reset, and how to read its stats.
macro_rules! keyed_store {
    (
        impl<L: $bound:path> for $ty:ty,
        $check:ident, $peek:ident, $uncommit:ident, $reset:ident,
        stats: |$this:ident| $stats:expr
    ) => {
        impl<L: $bound> Store for $ty {
            fn decide(
                &mut self,
                key: &[u8],
                now_ms: i64,
                cost: u64,
                commit: bool,
            ) -> Result<slidewin::Decision, slidewin::Error> {
                if commit {
                    self.$check(key, now_ms, cost)
                } else {
                    self.$peek(key, now_ms, cost)
                }
            }
            fn uncommit(
                &mut self,
                key: &[u8],
                now_ms: i64,
                cost: u64,
            ) -> Result<(), slidewin::Error> {
                self.$uncommit(key, now_ms, cost)
            }
            fn reset(&mut self, key: &[u8]) {
                <$ty>::$reset(self, key);
            }
            fn stats(&self) -> ZoneStats {
                let $this = self;
                $stats
            }
        }
    };
}
pub(crate) use keyed_store;

keyed_store!(impl<L: Limiter> for Keyed<L, Key>, check_bytes_at, peek_bytes_at, uncommit_bytes_at, reset_bytes, stats: |keyed| {
    let stats = keyed.stats();
    ZoneStats {
        keys: stats.keys as u64,
        capacity: keyed.max_keys() as u64,
        evictions: stats.evictions,
        reclaimed: stats.reclaimed,
        repairs: 0,
        allowed: stats.allowed,
        rejected: stats.rejected,
    }
});

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

    pub fn stats(&self) -> ZoneStats {
        self.store.stats()
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }
}

const NEW: &str = "slidewin.limiter";

/// `slidewin.limiter{ algorithm, limit, window_ms, bucket_ms, max_keys, max_key_bytes }`, or with
/// `shared = "name", size, max_key_bytes` in shared memory: the object, and for a shared
/// limiter whose region was replaced (its layout changed) a note saying so.
pub fn new(lua: &Lua, opts: Value) -> LuaResult<(Value, Option<String>)> {
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
    // Fits: field_positive admits integers up to 2^53.
    let window_ms = window_ms as i64;
    let algorithm = match opts.raw_get::<Value>("algorithm")? {
        Value::Nil => "log",
        Value::String(s) if s == "log" => "log",
        Value::String(s) if s == "counter" => "counter",
        Value::String(s) if s == "buckets" => "buckets",
        other => {
            let got = args::describe(&other);
            return Err(error(
                NEW,
                format_args!("algorithm must be \"log\", \"buckets\" or \"counter\", got {got}"),
            ));
        }
    };
    let bucket_ms = match algorithm {
        "buckets" => positive("bucket_ms")? as i64,
        _ => 0,
    };
    let max_key_bytes =
        args::field_positive(NEW, &opts, "max_key_bytes")?.unwrap_or(DEFAULT_MAX_KEY_BYTES);
    let max_key_bytes = usize::try_from(max_key_bytes).unwrap_or(usize::MAX);
    let (store, note) = match opts.raw_get::<Value>("shared")? {
        Value::Nil => {
            let max_keys =
                args::field_positive(NEW, &opts, "max_keys")?.unwrap_or(DEFAULT_MAX_KEYS);
            let max_keys = usize::try_from(max_keys).unwrap_or(usize::MAX);
            let store = match algorithm {
                "log" => keyed::<SlidingLog>(Quota::new(limit, window_ms), max_keys, max_key_bytes),
                "counter" => {
                    keyed::<SlidingCounter>(Quota::new(limit, window_ms), max_keys, max_key_bytes)
                }
                _ => keyed::<BucketWindow>(
                    BucketQuota::new(limit, window_ms, bucket_ms),
                    max_keys,
                    max_key_bytes,
                ),
            };
            (store, None)
        }
        Value::String(name) => {
            if !opts.raw_get::<Value>("max_keys")?.is_nil() {
                return Err(error(
                    NEW,
                    "max_keys must be nil with shared (size bounds the keys), got a number",
                ));
            }
            let size = positive("size")?;
            let spec = Spec {
                name: name.to_string_lossy(),
                algorithm,
                config: [limit, window_ms as u64, bucket_ms as u64],
                size: usize::try_from(size).unwrap_or(usize::MAX),
                max_key_bytes,
            };
            in_region(&spec)?
        }
        other => {
            let got = args::describe(&other);
            return Err(error(
                NEW,
                format_args!("shared must be a region name (a string), got {got}"),
            ));
        }
    };
    let limiter = LuaLimiter {
        store: store.map_err(args::core(NEW))?,
        limit,
    };
    Ok((crate::object::push(lua, limiter)?, note))
}

type Made = (Result<Box<dyn Store>, Error>, Option<String>);

/// A shared limiter for `spec`, in the region made for it.
fn in_region(spec: &Spec) -> LuaResult<Made> {
    let (limit, window_ms, bucket_ms) =
        (spec.config[0], spec.config[1] as i64, spec.config[2] as i64);
    // A config that cannot fit is refused before any memory is mapped.
    let needed = match spec.algorithm {
        "log" => Quota::new(limit, window_ms).and_then(|q| per_key::<SlidingLog>(q, spec)),
        "counter" => Quota::new(limit, window_ms).and_then(|q| per_key::<SlidingCounter>(q, spec)),
        _ => BucketQuota::new(limit, window_ms, bucket_ms)
            .and_then(|c| per_key::<BucketWindow>(c, spec)),
    };
    if let Err(e) = needed {
        return Ok((Err(e), None));
    }
    let (region, note) = shared::region(spec).map_err(|e| error(NEW, e))?;
    let store = match spec.algorithm {
        "log" => Quota::new(limit, window_ms)
            .and_then(|q| shared::store::<SlidingLog>(q, region, spec.max_key_bytes)),
        "counter" => Quota::new(limit, window_ms)
            .and_then(|q| shared::store::<SlidingCounter>(q, region, spec.max_key_bytes)),
        _ => BucketQuota::new(limit, window_ms, bucket_ms)
            .and_then(|c| shared::store::<BucketWindow>(c, region, spec.max_key_bytes)),
    };
    Ok((store, note))
}

/// Checks that `spec.size` holds one set of keys of `L`.
fn per_key<L: SharedLimiter>(config: L::Config, spec: &Spec) -> Result<(), Error> {
    Zone::<Region, L, WorkerOwner>::capacity_for(&config, spec.max_key_bytes, spec.size).map(drop)
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
