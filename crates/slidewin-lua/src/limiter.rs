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

use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use mlua::ffi;
use mlua::ffi::lua_State;
use mlua::{Lua, Result as LuaResult, Table, Value};
use slidewin::headers::Policy;
use slidewin::reservation::Amend;
use slidewin::rule::{Limits, Rule, RuleLimiter};
use slidewin::shared::{
    EvictionWatch, Full, KeyWindow, LiveLimits, RegionKind, Scan, Walk, Zone, ZoneStats,
};
use slidewin::store::{LocalRule, Store};
use slidewin::window_name::WindowNames;
use slidewin::{Call, Decision, Error, Keyed};

use crate::args::{self, error};
use crate::cdefs::opaque;
use crate::mapping::WorkerOwner;
use crate::now_ms;
use crate::region::{self, Region, Spec};
use crate::rules;
use crate::stack::raise;

/// Keys are the bytes of a Lua string (or of a number's decimal form).
type Key = Vec<u8>;

const DEFAULT_MAX_KEYS: u64 = 100_000;
/// Longer keys are kept as a 16-byte digest (in shared memory: a 128-bit keyed digest), so a
/// store's key text is bounded by its keys x this, whatever the clients send.
const DEFAULT_MAX_KEY_BYTES: u64 = 64;

/// The metatable of the limiter objects, which holds their methods.
pub const METATABLE: &CStr = c"slidewin.limiter";

/// What a `slidewin.limiter{...}` object holds: a store of the core behind the module's clock.
pub struct LuaLimiter {
    store: Box<dyn Store>,
    /// What its windows are called (a named rule), for `lim:rule()`.
    names: Option<WindowNames>,
    /// What this worker told error.log of the store's evictions.
    evictions: EvictionWatch,
}

impl LuaLimiter {
    pub fn new(store: Box<dyn Store>, names: Option<WindowNames>) -> Self {
        Self {
            store,
            names,
            evictions: EvictionWatch::new(),
        }
    }

    /// What the windows of the rule are called; `None` for an unnamed limiter.
    pub fn names(&self) -> Option<&WindowNames> {
        self.names.as_ref()
    }

    /// Decide at the module's clock under `limits` (a caller's, unchecked) or the live ones;
    /// record `cost` when it fits and `call` commits.
    /// The decision and its time (where a check recorded `cost`).
    pub fn decide(
        &mut self,
        key: &[u8],
        cost: u64,
        call: Call,
        limits: Option<&[u64]>,
    ) -> Result<(Decision, i64), Error> {
        let now = now_ms();
        let decision = self.store.decide(key, now, cost, call, limits)?;
        Ok((decision, now))
    }

    /// Changes what was recorded at `stamp_ms` (`None`: the newest), as [`Store::amend`].
    pub fn amend(&mut self, key: &[u8], amend: Amend, stamp_ms: Option<i64>) -> Result<(), Error> {
        self.store.amend(key, now_ms(), stamp_ms, amend)
    }

    pub fn reset(&mut self, key: &[u8]) {
        self.store.reset(key);
    }

    pub fn stats(&self) -> ZoneStats {
        self.store.stats()
    }

    /// Keys evicted with units since this worker last told, at most every `every_ms` (the
    /// first look only counts from there): the line for error.log.
    pub fn evictions_to_tell(&mut self, every_ms: i64) -> Option<String> {
        let evicted = self
            .evictions
            .poll(self.store.evictions(), now_ms(), every_ms)?;
        let capacity = self.store.stats().capacity;
        Some(format!("{evicted}; it holds {capacity} keys"))
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

    /// The `RateLimit-Policy` of [`LuaLimiter::rule`] under its live limits, its windows named:
    /// what a header style answers decisions of [`LuaLimiter::version`] with (`None`: an
    /// unnamed limiter, whose caller sets the policy).
    pub fn policy(&self) -> Option<Policy> {
        let names = self.names.as_ref()?;
        Some(Policy::of_rule(
            self.store.rule(),
            &self.store.limits(),
            names,
        ))
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

    /// See [`Store::walk_for`], at the module's clock: `None` for a store that cannot list
    /// its keys.
    pub fn walk_for(&self, walk: &mut Walk, budget: Duration) -> Option<Result<bool, Error>> {
        self.store.walk_for(walk, now_ms(), budget)
    }

    /// `key`'s windows as the next call of `cost` finds them, and whether the store counts
    /// refusals per key.
    pub fn window(&mut self, key: &[u8], cost: u64) -> Result<(KeyWindow, bool), Error> {
        let window = self.store.key_window(key, now_ms(), cost)?;
        Ok((window, self.store.counts_refusals()))
    }
}

/// What the userdata block holds: the limiter until `__gc` takes it.
pub type Block = Option<LuaLimiter>;
opaque!(Block);

/// A new object owning `limiter`.
pub fn push(lua: &Lua, limiter: LuaLimiter) -> LuaResult<Value> {
    let mut limiter = Some(limiter);
    // SAFETY: the userdata block is sized and (8-byte) aligned for Block, written once here;
    // __gc takes the limiter out, leaving None, which owns nothing.
    unsafe {
        lua.exec_raw::<Value>((), |state| {
            let block = ffi::lua_newuserdata(state, size_of::<Block>()) as *mut Block;
            block.write(Some(limiter.take().expect("pushed once")));
            ffi::luaL_getmetatable(state, METATABLE.as_ptr());
            ffi::lua_setmetatable(state, -2);
        })
    }
}

/// Runs `body` on `self` (argument 1); raises its error, or "internal error" if it panicked.
pub unsafe fn with_self<T>(
    state: *mut lua_State,
    function: &str,
    body: impl FnOnce(&mut LuaLimiter) -> Result<T, String>,
) -> T {
    let block = ffi::luaL_checkudata(state, 1, METATABLE.as_ptr()) as *mut Block;
    match on_block(&mut *block, function, body) {
        Ok(value) => value,
        Err(message) => raise(state, message),
    }
}

/// Runs `body` on the limiter `block` holds: its error, "collected" once `__gc` ran, or
/// "internal error" if it panicked (so no panic crosses into Lua).
pub fn on_block<T>(
    block: &mut Block,
    function: &str,
    body: impl FnOnce(&mut LuaLimiter) -> Result<T, String>,
) -> Result<T, String> {
    match block {
        None => Err(format!(
            "{function}: the limiter was collected (its __gc ran)"
        )),
        Some(this) => match catch_unwind(AssertUnwindSafe(|| body(this))) {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("{function}: internal error")),
        },
    }
}

/// A decision, the version of the rule it was made under, and its time (where a check
/// recorded its cost: a reservation's stamp).
pub struct Decided {
    pub decision: Decision,
    pub version: u64,
    pub stamp_ms: i64,
}

/// `this`'s decision ([`Decided`]); errors name `function`.
pub fn decide_versioned(
    this: &mut LuaLimiter,
    key: &[u8],
    cost: u64,
    call: Call,
    limits: Option<&[u64]>,
    function: &str,
) -> Result<Decided, String> {
    let (decision, stamp_ms) =
        (this.decide(key, cost, call, limits)).map_err(|e| format!("{function}: {e}"))?;
    let version = this.version();
    Ok(Decided {
        decision,
        version,
        stamp_ms,
    })
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
    let rule = rules::from_options(NEW, &opts)?;
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
    // The rule's name: its region's, else its live limits'.
    let rule_name = name("shared")?.or(name("name")?);
    let names = match &rule_name {
        Some(rule_name) => Some(rules::names(&opts, rule_name, &rule)?.map_err(|e| error(NEW, e))?),
        None => None,
    };
    let (store, note) = match name("shared")? {
        None if !opts.raw_get::<Value>("full")?.is_nil() => {
            return Err(error(
                NEW,
                "full must be nil without shared (max_keys evicts the least recently used)",
            ))
        }
        None => {
            let max_keys =
                args::field_positive(NEW, &opts, "max_keys")?.unwrap_or(DEFAULT_MAX_KEYS);
            let max_keys = usize::try_from(max_keys).unwrap_or(usize::MAX);
            // Named: the live limits are kept by that name across reloads.
            let limits_spec = name("name")?.map(|n| Spec {
                name: format!("{n} (limits)"),
                kind: RegionKind::live_limits(&rule, max_key_bytes),
                size: LIMITS_BYTES,
            });
            (local(rule, max_keys, max_key_bytes, limits_spec)?, None)
        }
        Some(shared_name) => {
            if !opts.raw_get::<Value>("max_keys")?.is_nil() {
                return Err(error(
                    NEW,
                    "max_keys must be nil with shared (size bounds the keys), got a number",
                ));
            }
            let size = args::field_required_positive(NEW, &opts, "size")?;
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            let full = full(&opts)?;
            in_region(shared_name, size, max_key_bytes, rule, full)?
        }
    };
    let limiter = LuaLimiter::new(store.map_err(args::core(NEW))?, names);
    Ok((push(lua, limiter)?, note))
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
        Some(spec) => region::region(&spec).map(|(region, _)| region),
        None => Region::new(LIMITS_BYTES),
    }
    .map_err(|e| error(NEW, e))?;
    let keyed = Keyed::<RuleLimiter, Key>::new(rule.clone(), max_keys)
        .and_then(|k| k.with_max_key_bytes(max_key_bytes));
    Ok(keyed.map(|keyed| {
        let live = LiveLimits::attach(region, &rule);
        Box::new(LocalRule::new(keyed, live)) as Box<dyn Store>
    }))
}

/// `full = "evict" | "refuse"` (evict when nil): what a shared rule does with a new key when
/// its set is full of keys holding units.
fn full(opts: &Table) -> LuaResult<Full> {
    match opts.raw_get::<Value>("full")? {
        Value::Nil => Ok(Full::Evict),
        Value::String(s) if &*s.as_bytes() == b"evict" => Ok(Full::Evict),
        Value::String(s) if &*s.as_bytes() == b"refuse" => Ok(Full::Refuse),
        other => {
            let got = args::describe(&other);
            Err(error(
                NEW,
                format_args!("full must be \"evict\" or \"refuse\", got {got}"),
            ))
        }
    }
}

/// A shared rule of `max_key_bytes` keys in the region of `size` bytes kept as `name`, doing
/// `full` with a new key in a full set.
fn in_region(
    name: String,
    size: usize,
    max_key_bytes: usize,
    rule: Rule,
    full: Full,
) -> LuaResult<Made> {
    // A config that cannot fit is refused before any memory is mapped.
    if let Err(e) = Zone::<Region, WorkerOwner>::capacity_for(&rule, max_key_bytes, size) {
        return Ok((Err(e), None));
    }
    let kind = RegionKind::rule(&rule, max_key_bytes);
    let spec = Spec { name, kind, size };
    let (region, note) = region::region(&spec).map_err(|e| error(NEW, e))?;
    let zone = Zone::attach(
        region,
        rule,
        max_key_bytes,
        WorkerOwner::new(),
        slidewin::shared::random_seed(),
    );
    let store = zone.map(|(zone, _)| Box::new(zone.with_full(full)) as Box<dyn Store>);
    Ok((store, note))
}
