//! `slidewin.concurrency{ name, limit, max_limit, max_hold_ms, size | keys, max_key_bytes }`: at most
//! `limit` requests of a key in flight across every worker of one nginx
//! ([`slidewin::shared::Inflight`]), crash safe: the slots of a SIGKILLed worker come back, and
//! a slot whose leave never comes is freed once its lease (`max_hold_ms`) ends, and neither
//! counts in `inflight(key)` or `stats()` (they free such slots first).
//!
//! ```lua
//! -- init_by_lua (the master maps the region, kept by name across reloads):
//! local slots = slidewin.concurrency{ name = "api", limit = 8, max_limit = 64, max_hold_ms = 60000,
//!                                     keys = 64 }  -- or size = bytes
//! -- access phase:
//! local admitted, inflight, limit, token = slots:enter(key)
//! -- log phase:
//! slots:leave(key, token)
//! ```
//!
//! The region is kept like a shared limiter's (same name, `max_limit`, size and key length:
//! the same region, with the slots it holds, after `nginx -s reload`).

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods};
use slidewin::shared::{Inflight, InflightConfig, RegionKind};

use crate::args::{self, error};
use crate::mapping::WorkerOwner;
use crate::now_ms;
use crate::region::{self, Region, Spec};

const NEW: &str = "slidewin.concurrency";
const DEFAULT_MAX_KEY_BYTES: u64 = 64;
const DEFAULT_KEYS: u64 = 64;

/// `slidewin.concurrency{...}`: the object.
pub fn new(_: &Lua, opts: Table) -> LuaResult<LuaConcurrency> {
    let name = args::field_name(NEW, &opts)?;
    let positive = |field: &'static str| args::field_positive(NEW, &opts, field);
    let expected = "a positive integer";
    let limit = args::required(NEW, "limit", expected, positive("limit")?)?;
    let max_limit = positive("max_limit")?.unwrap_or(limit);
    let max_hold_ms = args::required(NEW, "max_hold_ms", expected, positive("max_hold_ms")?)?;
    let max_key_bytes = positive("max_key_bytes")?.unwrap_or(DEFAULT_MAX_KEY_BYTES);
    let config = InflightConfig::new(limit, max_limit, max_hold_ms).map_err(args::core(NEW))?;
    let max_key_bytes = usize::try_from(max_key_bytes).unwrap_or(usize::MAX);
    let bytes_for = |keys| {
        Inflight::<Region, WorkerOwner>::bytes_for(&config, max_key_bytes, keys)
            .map_err(args::core(NEW))
    };
    let one_key = bytes_for(1)?;
    let size = args::region_bytes(NEW, &opts, DEFAULT_KEYS, bytes_for)?;
    if size < one_key {
        return Err(error(
            NEW,
            format_args!(
                "size must be at least {one_key} bytes for max_limit {max_limit} and \
                 max_key_bytes {max_key_bytes}, got {size}"
            ),
        ));
    }
    let spec = Spec {
        name: format!("{name} (concurrency)"),
        kind: RegionKind::Concurrency {
            max_limit,
            max_key_bytes,
        },
        size,
    };
    let (region, _) = region::region(&spec).map_err(|e| error(NEW, e))?;
    let (slots, _) = Inflight::attach(
        region,
        config,
        max_key_bytes,
        WorkerOwner::new(),
        slidewin::shared::random_seed(),
    )
    .map_err(args::core(NEW))?;
    Ok(LuaConcurrency(slots))
}

/// The concurrency limit's object.
pub struct LuaConcurrency(Inflight<Region, WorkerOwner>);

impl UserData for LuaConcurrency {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        // `enter(key)` -> admitted, inflight, limit, token (what `leave` needs).
        methods.add_method("enter", |_, this, key: mlua::LuaString| {
            let e = this
                .0
                .enter_at(&key.as_bytes(), now_ms())
                .map_err(args::core("slots:enter"))?;
            Ok((e.admitted, e.inflight, e.limit, e.token))
        });
        // `leave(key, token)` -> false when the slot was no longer held (its lease ran out).
        methods.add_method("leave", |_, this, (key, token): (mlua::LuaString, f64)| {
            let token = slidewin::arg::uint("token", token).map_err(args::core("slots:leave"))?;
            this.0
                .leave_at(&key.as_bytes(), token as i64)
                .map_err(args::core("slots:leave"))
        });
        methods.add_method("inflight", |_, this, key: mlua::LuaString| {
            this.0
                .inflight_at(&key.as_bytes(), now_ms())
                .map_err(args::core("slots:inflight"))
        });
        methods.add_method("limit", |_, this, ()| Ok(this.0.limit()));
        methods.add_method("set_limit", |_, this, limit: f64| {
            let limit =
                slidewin::arg::uint("limit", limit).map_err(args::core("slots:set_limit"))?;
            this.0
                .set_limit(limit)
                .map_err(args::core("slots:set_limit"))?;
            Ok(true)
        });
        methods.add_method("sweep", |_, this, ()| {
            this.0.sweep_at(now_ms()).map_err(args::core("slots:sweep"))
        });
        methods.add_method("stats", |lua, this, ()| {
            let s = this
                .0
                .stats_at(now_ms())
                .map_err(args::core("slots:stats"))?;
            let t = lua.create_table()?;
            t.set("inflight", s.inflight)?;
            t.set("admitted", s.admitted)?;
            t.set("refused", s.refused)?;
            t.set("full", s.full)?;
            t.set("expired", s.expired)?;
            t.set("dead_owner", s.dead_owner)?;
            t.set("repairs", s.repairs)?;
            t.set("limit", this.0.limit())?;
            t.set("max_limit", this.0.config().max_limit())?;
            t.set("capacity", this.0.capacity())?;
            Ok(t)
        });
    }
}
