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

use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use mlua::{Lua, Result as LuaResult, Value};
use slidewin::rule::{Limits, Rule, RuleLimiter};
use slidewin::shared::{KeyWindow, LiveLimits, Scan, Usage, Walk, Zone, ZoneStats};
use slidewin::{Decision, Error, Keyed};

use crate::args::{self, error};
use crate::mapping::WorkerOwner;
use crate::now_ms;
use crate::rules;
use crate::shared::{self, Region, Spec};

/// Keys are the bytes of a Lua string (or of a number's decimal form).
type Key = Vec<u8>;

const DEFAULT_MAX_KEYS: u64 = 100_000;
/// Sets walked between two looks at the clock: tens of microseconds.
const WALK_SLICE_SETS: usize = 16;
/// Longer keys are kept as a 16-byte digest (in shared memory: a 128-bit keyed digest), so a
/// store's key text is bounded by its keys x this, whatever the clients send.
const DEFAULT_MAX_KEY_BYTES: u64 = 64;

/// The operations the Lua object needs over a rule's keys, in this worker ([`Keyed`]) or in
/// shared memory ([`crate::shared`]).
pub trait Store {
    /// Decide under a caller's `limits` (checked against the rule), or the live limits.
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error>;
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error>;
    fn reset(&mut self, key: &[u8]);
    fn stats(&self) -> ZoneStats;
    /// The rule decided with (its windows; their live limits are [`Store::limits`]).
    fn rule(&self) -> &Rule;
    /// The live limits.
    fn limits(&self) -> Limits;
    /// Sets window `window`'s live limit (0-based).
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error>;
    /// Moves to the rule in force when it can be replaced while the limiter lives (a zone's
    /// rule put again with other windows); decisions do it themselves.
    fn follow(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Changes whenever the rule decided with or one of its live limits does: what is derived
    /// from them (a header) is rebuilt when it moves.
    fn version(&self) -> u64;
    /// Walks up to `sets` more sets of `walk` (the heaviest keys, the window usage and the
    /// counters) in a store that can list its keys (a region), else `None`: true once over.
    fn walk_step(
        &self,
        _walk: &mut Walk,
        _now_ms: i64,
        _sets: usize,
    ) -> Option<Result<bool, Error>> {
        None
    }
    /// `key`'s windows as the next call of `cost` finds them, and whether the store counts
    /// refusals per key. This default knows only the decision's window (its count is the
    /// limit less the room the peek found).
    fn window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(KeyWindow, bool), Error> {
        let d = self.decide(key, now_ms, cost, false, None)?;
        let usage = Usage {
            window: d.window,
            count: d.used(cost),
            limit: d.limit,
        };
        let window = KeyWindow {
            decision: d,
            windows: vec![usage],
            refused: 0,
        };
        Ok((window, false))
    }
}

/// A rule's keys in this worker, with live limits in a small region of their own (shared by
/// the workers when made in the master).
struct Local {
    keyed: Keyed<RuleLimiter, Key>,
    live: LiveLimits<Region>,
}

impl Store for Local {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        let rule = self.keyed.config();
        let limits = match limits {
            Some(limits) => rule.check_limits(limits)?,
            None => self.live.get(rule),
        };
        self.keyed
            .decide_bytes_by(key, now_ms, commit, |rule, state, commit| {
                rule.decide_with(state, now_ms, cost, commit, &limits)
            })
    }
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.keyed.uncommit_bytes_at(key, now_ms, cost)
    }
    fn reset(&mut self, key: &[u8]) {
        self.keyed.reset_bytes(key);
    }
    fn stats(&self) -> ZoneStats {
        let stats = self.keyed.stats();
        ZoneStats {
            keys: stats.keys as u64,
            capacity: self.keyed.max_keys() as u64,
            evictions: stats.evictions,
            reclaimed: stats.reclaimed,
            repairs: 0,
            allowed: stats.allowed,
            rejected: stats.rejected,
        }
    }
    fn rule(&self) -> &Rule {
        self.keyed.config()
    }
    fn limits(&self) -> Limits {
        self.live.get(self.keyed.config())
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        self.live.set(self.keyed.config(), window, limit)
    }
    fn version(&self) -> u64 {
        self.live.version()
    }
}

impl<R: AsRef<[AtomicU64]>> Store for Zone<R, WorkerOwner> {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        let limits = match limits {
            Some(limits) => self.rule().check_limits(limits)?,
            None => Zone::limits(self),
        };
        self.decide_at(key, now_ms, cost, commit, &limits)
    }
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        self.uncommit_at(key, now_ms, cost)
    }
    fn reset(&mut self, key: &[u8]) {
        Zone::reset(self, key);
    }
    fn stats(&self) -> ZoneStats {
        Zone::stats(self)
    }
    fn rule(&self) -> &Rule {
        Zone::rule(self)
    }
    fn limits(&self) -> Limits {
        Zone::limits(self)
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        Zone::set_limit(self, window, limit)
    }
    fn version(&self) -> u64 {
        Zone::limits_version(self)
    }
    fn walk_step(&self, walk: &mut Walk, now_ms: i64, sets: usize) -> Option<Result<bool, Error>> {
        Some(Zone::walk_step(self, walk, now_ms, sets))
    }
    fn window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(KeyWindow, bool), Error> {
        Ok((self.window_at(key, now_ms, cost)?, true))
    }
}

/// What a `slidewin.limiter{...}` object holds (its Lua side is in [`crate::object`]).
pub struct LuaLimiter {
    store: Box<dyn Store>,
}

impl LuaLimiter {
    pub fn new(store: Box<dyn Store>) -> Self {
        Self { store }
    }

    /// Decide at the module's clock under `limits` (a caller's, unchecked) or the live ones;
    /// record `cost` when it fits and `commit` is true.
    pub fn decide(
        &mut self,
        key: &[u8],
        cost: u64,
        commit: bool,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        self.store.decide(key, now_ms(), cost, commit, limits)
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

    /// The live limits of the rule in force.
    pub fn limits(&mut self) -> Result<Limits, Error> {
        self.store.follow()?;
        Ok(self.store.limits())
    }

    pub fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        self.store.set_limit(window, limit)
    }

    /// Moves to the rule in force; its version.
    pub fn follow(&mut self) -> Result<u64, Error> {
        self.store.follow()?;
        Ok(self.store.version())
    }

    /// The rule of the last decision (or follow), its live limits and its version, which
    /// that decision answered with.
    pub fn rule(&self) -> (&Rule, Limits, u64) {
        (self.store.rule(), self.store.limits(), self.store.version())
    }

    /// See [`Store::version`].
    pub fn version(&self) -> u64 {
        self.store.version()
    }

    /// The heaviest keys and the window usage in one go (a store that cannot list its keys:
    /// `None`).
    pub fn scan(&self, top: usize) -> Option<Result<Scan, Error>> {
        let mut walk = Walk::scan(top);
        let over = self.store.walk_step(&mut walk, now_ms(), usize::MAX)?;
        Some(over.map(|_| walk.finish().0.unwrap_or_default()))
    }

    /// Walks `walk` for about `budget` (whole slices of [`WALK_SLICE_SETS`] sets, at least
    /// one): true once over, `None` for a store that cannot list its keys.
    pub fn walk_for(&self, walk: &mut Walk, budget: Duration) -> Option<Result<bool, Error>> {
        let started = Instant::now();
        loop {
            match self.store.walk_step(walk, now_ms(), WALK_SLICE_SETS) {
                Some(Ok(false)) if started.elapsed() < budget => continue,
                over => return over,
            }
        }
    }

    pub fn window(&mut self, key: &[u8], cost: u64) -> Result<(KeyWindow, bool), Error> {
        self.store.window(key, now_ms(), cost)
    }
}

const NEW: &str = "slidewin.limiter";

/// `slidewin.limiter{ algorithm, limit, window_ms, bucket_ms, max_limit, max_keys, max_key_bytes,
/// name }` or `{ windows = { {...}, ... }, ... }`, or with `shared = "name", size` in shared
/// memory: the object, and for a shared limiter whose region was replaced (its layout
/// changed) a note saying so.
pub fn new(lua: &Lua, opts: Value) -> LuaResult<(Value, Option<String>)> {
    let Value::Table(opts) = opts else {
        let got = args::describe(&opts);
        return Err(error(
            NEW,
            format_args!("options must be a table, got {got}"),
        ));
    };
    let (rule, windows) = rules::from_options(NEW, &opts)?;
    let max_key_bytes =
        args::field_positive(NEW, &opts, "max_key_bytes")?.unwrap_or(DEFAULT_MAX_KEY_BYTES);
    let max_key_bytes = usize::try_from(max_key_bytes).unwrap_or(usize::MAX);
    let name = |field: &'static str| -> LuaResult<Option<String>> {
        match opts.raw_get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::String(s) => Ok(Some(s.to_string_lossy())),
            other => {
                let got = args::describe(&other);
                Err(error(
                    NEW,
                    format_args!("{field} must be a region name (a string), got {got}"),
                ))
            }
        }
    };
    let spec = |name: String, size: usize| Spec {
        name,
        windows: windows.clone(),
        size,
        max_key_bytes,
    };
    let (store, note) = match name("shared")? {
        None => {
            let max_keys =
                args::field_positive(NEW, &opts, "max_keys")?.unwrap_or(DEFAULT_MAX_KEYS);
            let max_keys = usize::try_from(max_keys).unwrap_or(usize::MAX);
            // Named: the live limits are kept by that name across reloads.
            let limits_spec = name("name")?.map(|n| spec(format!("{n} (limits)"), LIMITS_BYTES));
            (local(rule, max_keys, max_key_bytes, limits_spec)?, None)
        }
        Some(shared_name) => {
            if !opts.raw_get::<Value>("max_keys")?.is_nil() {
                return Err(error(
                    NEW,
                    "max_keys must be nil with shared (size bounds the keys), got a number",
                ));
            }
            let size = args::required(
                NEW,
                "size",
                "a positive integer",
                args::field_positive(NEW, &opts, "size")?,
            )?;
            let spec = spec(shared_name, usize::try_from(size).unwrap_or(usize::MAX));
            in_region(&spec, rule)?
        }
    };
    let limiter = LuaLimiter::new(store.map_err(args::core(NEW))?);
    Ok((crate::object::push(lua, limiter)?, note))
}

type Made = (Result<Box<dyn Store>, Error>, Option<String>);

/// Bytes of a local rule's live limits region.
const LIMITS_BYTES: usize = LiveLimits::<Region>::WORDS * 8;

/// A rule's keys in this worker; its live limits in the region kept for `limits_spec`, or in
/// one of its own.
fn local(
    rule: Rule,
    max_keys: usize,
    max_key_bytes: usize,
    limits_spec: Option<Spec>,
) -> LuaResult<Result<Box<dyn Store>, Error>> {
    let region = match limits_spec {
        Some(spec) => shared::region(&spec).map(|(region, _)| region),
        None => Region::new(LIMITS_BYTES),
    }
    .map_err(|e| error(NEW, e))?;
    let keyed = Keyed::<RuleLimiter, Key>::new(rule.clone(), max_keys)
        .and_then(|k| k.with_max_key_bytes(max_key_bytes));
    Ok(keyed.map(|keyed| {
        let live = LiveLimits::attach(region, &rule);
        Box::new(Local { keyed, live }) as Box<dyn Store>
    }))
}

/// A shared rule for `spec`, in the region made for it.
fn in_region(spec: &Spec, rule: Rule) -> LuaResult<Made> {
    // A config that cannot fit is refused before any memory is mapped.
    if let Err(e) = Zone::<Region, WorkerOwner>::capacity_for(&rule, spec.max_key_bytes, spec.size)
    {
        return Ok((Err(e), None));
    }
    let (region, note) = shared::region(spec).map_err(|e| error(NEW, e))?;
    Ok((shared::store(rule, region, spec.max_key_bytes), note))
}
