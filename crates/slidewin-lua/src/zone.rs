//! `slidewin.zone{ name, size, max_rules }`: a region of rules made, changed and removed while
//! nginx runs ([`slidewin::shared::Directory`]), from any worker and any phase.
//!
//! ```lua
//! -- init_by_lua (the master maps the region, kept by name across reloads):
//! local zone = slidewin.zone{ name = "gateway", size = 8 * 1024 * 1024 }
//! -- anywhere, e.g. when a gateway reads its config:
//! local lim = zone:put("plan-free", { windows = { { limit = 10, window_ms = 1000 } }, size = 65536 })
//! zone:remove("plan-free")
//! ```
//!
//! `put` answers the rule's limiter object (the methods of `slidewin.limiter`): a rule put
//! again with other limits only keeps its keys; other windows replace it. A limiter whose rule
//! was replaced follows the new one at its next call (`lim:rule()` then describes it, with a
//! version no earlier rule had); one whose rule was removed raises "the rule was removed from
//! its zone".

use std::sync::Arc;

use mlua::{Lua, Result as LuaResult, Table, UserData, UserDataMethods, Value};
use slidewin::rule::{Limits, Rule};
use slidewin::shared::{Directory, Found, KeyWindow, Part, Walk, Zone, ZoneStats};
use slidewin::{Decision, Error};

use crate::args::{self, error};
use crate::limiter::{LuaLimiter, Store};
use crate::mapping::WorkerOwner;
use crate::shared::{self, Region, Spec};
use crate::{now_ms, rules};

const NEW: &str = "slidewin.zone";
const DEFAULT_MAX_RULES: u64 = 1024;
const DEFAULT_RULE_BYTES: u64 = 64 * 1024;
const DEFAULT_MAX_KEY_BYTES: u64 = 64;

type Rules = Directory<Region, WorkerOwner>;

/// `slidewin.zone{...}`: the zone object.
pub fn new(_: &Lua, opts: Table) -> LuaResult<LuaZone> {
    let name = args::field_name(NEW, &opts)?;
    let size = args::required(
        NEW,
        "size",
        "a positive integer",
        args::field_positive(NEW, &opts, "size")?,
    )?;
    let max_rules = args::field_positive(NEW, &opts, "max_rules")?.unwrap_or(DEFAULT_MAX_RULES);
    // A zone's region is kept by name like a limiter's; no windows, and its key length field
    // holds max_rules, so another max_rules maps another region.
    let spec = Spec {
        name: format!("{name} (zone)"),
        windows: Vec::new(),
        size: usize::try_from(size).unwrap_or(usize::MAX),
        max_key_bytes: max_rules as usize,
    };
    let (region, _) = shared::region(&spec).map_err(|e| error(NEW, e))?;
    let rules = Directory::attach(
        region,
        max_rules as usize,
        WorkerOwner::new(),
        shared::seed(),
    )
    .map_err(args::core(NEW))?;
    Ok(LuaZone(Arc::new(rules)))
}

/// A zone: the directory, shared by the limiters of its rules.
pub struct LuaZone(Arc<Rules>);

impl UserData for LuaZone {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method(
            "put",
            |lua, this, (name, opts): (mlua::LuaString, Table)| {
                const PUT: &str = "zone:put";
                let (rule, _) = rules::from_options(PUT, &opts)?;
                let size = args::field_positive(PUT, &opts, "size")?.unwrap_or(DEFAULT_RULE_BYTES);
                let max_key_bytes = args::field_positive(PUT, &opts, "max_key_bytes")?
                    .unwrap_or(DEFAULT_MAX_KEY_BYTES);
                let name = name.as_bytes().to_vec();
                let found = this
                    .0
                    .put(
                        &name,
                        &rule,
                        max_key_bytes as usize,
                        size as usize,
                        now_ms(),
                    )
                    .map_err(args::core(PUT))?;
                limiter(lua, &this.0, name, found).map_err(args::core(PUT))
            },
        );
        methods.add_method("get", |lua, this, name: mlua::LuaString| {
            let name = name.as_bytes().to_vec();
            match this.0.find(&name) {
                Some(found) => limiter(lua, &this.0, name, found).map_err(args::core("zone:get")),
                None => Ok(Value::Nil),
            }
        });
        methods.add_method("remove", |_, this, name: mlua::LuaString| {
            Ok(this.0.remove(&name.as_bytes(), now_ms()))
        });
        methods.add_method("names", |_, this, ()| {
            Ok(this
                .0
                .names()
                .into_iter()
                .map(|n| String::from_utf8_lossy(&n).into_owned())
                .collect::<Vec<_>>())
        });
        methods.add_method("stats", |lua, this, ()| {
            let stats = this.0.stats(now_ms());
            let t = lua.create_table()?;
            t.set("rules", stats.rules)?;
            t.set("pages_used", stats.pages_used)?;
            t.set("pages", stats.pages)?;
            t.set("page_bytes", slidewin::shared::PAGE_BYTES)?;
            Ok(t)
        });
    }
}

/// The limiter object of `found`.
fn limiter(lua: &Lua, rules: &Arc<Rules>, name: Vec<u8>, found: Found) -> Result<Value, Error> {
    let zone = rules.zone(&found, WorkerOwner::new())?;
    let store = ZoneRule {
        rules: Arc::clone(rules),
        name,
        found,
        zone,
        earlier_versions: 0,
    };
    crate::object::push(lua, LuaLimiter::new(Box::new(store))).map_err(|_| Error::RuleRemoved)
}

/// One rule of a zone, following it when it is put again and refusing once it is removed.
struct ZoneRule {
    rules: Arc<Rules>,
    name: Vec<u8>,
    found: Found,
    zone: Zone<Part<Region>, WorkerOwner>,
    /// Added to the zone's limits version: versions go on from the replaced rule's, so no
    /// version stands for two rules.
    earlier_versions: u64,
}

impl ZoneRule {
    /// The rule's zone now (one atomic read when nothing changed).
    fn current(&mut self) -> Result<&mut Zone<Part<Region>, WorkerOwner>, Error> {
        if !self.rules.is_current(&self.found) {
            let found = self.rules.find(&self.name).ok_or(Error::RuleRemoved)?;
            let zone = self.rules.zone(&found, WorkerOwner::new())?;
            // Wrapping: only the sum is a version, and it is the last one plus one.
            self.earlier_versions = Store::version(self)
                .wrapping_add(1)
                .wrapping_sub(zone.limits_version());
            self.zone = zone;
            self.found = found;
        }
        Ok(&mut self.zone)
    }
}

impl Store for ZoneRule {
    fn decide(
        &mut self,
        key: &[u8],
        now_ms: i64,
        cost: u64,
        commit: bool,
        limits: Option<&[u64]>,
    ) -> Result<Decision, Error> {
        self.current()?.decide(key, now_ms, cost, commit, limits)
    }
    fn uncommit(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(), Error> {
        Store::uncommit(self.current()?, key, now_ms, cost)
    }
    fn reset(&mut self, key: &[u8]) {
        if let Ok(zone) = self.current() {
            Store::reset(zone, key);
        }
    }
    fn stats(&self) -> ZoneStats {
        Store::stats(&self.zone)
    }
    fn rule(&self) -> &Rule {
        self.zone.rule()
    }
    fn limits(&self) -> Limits {
        Store::limits(&self.zone)
    }
    fn set_limit(&mut self, window: usize, limit: u64) -> Result<(), Error> {
        Store::set_limit(self.current()?, window, limit)
    }
    fn follow(&mut self) -> Result<(), Error> {
        self.current().map(|_| ())
    }
    fn version(&self) -> u64 {
        self.earlier_versions
            .wrapping_add(Store::version(&self.zone))
    }
    fn walk_step(&self, walk: &mut Walk, now_ms: i64, sets: usize) -> Option<Result<bool, Error>> {
        Store::walk_step(&self.zone, walk, now_ms, sets)
    }
    fn window(&mut self, key: &[u8], now_ms: i64, cost: u64) -> Result<(KeyWindow, bool), Error> {
        Store::window(self.current()?, key, now_ms, cost)
    }
}
