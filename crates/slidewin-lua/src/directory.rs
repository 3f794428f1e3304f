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
use slidewin::shared::{Directory, Found, RegionKind};
use slidewin::store::DirectoryRule;
use slidewin::window_name::WindowNames;
use slidewin::Error;

use crate::args::{self, error};
use crate::limiter::{self, LuaLimiter};
use crate::mapping::WorkerOwner;
use crate::region::{self, Region, Spec};
use crate::{now_ms, rules};

const NEW: &str = "slidewin.zone";
const DEFAULT_MAX_RULES: u64 = 1024;
const DEFAULT_RULE_BYTES: u64 = 64 * 1024;
const DEFAULT_MAX_KEY_BYTES: u64 = 64;

type Rules = Directory<Region, WorkerOwner>;

/// `slidewin.zone{...}`: the zone object.
pub fn new(_: &Lua, opts: Table) -> LuaResult<LuaDirectory> {
    let name = args::field_name(NEW, &opts)?;
    let size = args::field_required_positive(NEW, &opts, "size")?;
    let max_rules = args::field_positive(NEW, &opts, "max_rules")?.unwrap_or(DEFAULT_MAX_RULES);
    // A zone's region is kept by name like a limiter's: another max_rules maps another region.
    let spec = Spec {
        name: format!("{name} (zone)"),
        kind: RegionKind::Directory {
            max_rules: max_rules as usize,
        },
        size: usize::try_from(size).unwrap_or(usize::MAX),
    };
    let (region, _) = region::region(&spec).map_err(|e| error(NEW, e))?;
    let rules = Directory::attach(
        region,
        max_rules as usize,
        WorkerOwner::new(),
        slidewin::shared::random_seed(),
    )
    .map_err(args::core(NEW))?;
    Ok(LuaDirectory(Arc::new(rules)))
}

/// A zone: the directory, shared by the limiters of its rules.
pub struct LuaDirectory(Arc<Rules>);

impl UserData for LuaDirectory {
    fn add_methods<M: UserDataMethods<Self>>(methods: &mut M) {
        methods.add_method(
            "put",
            |lua, this, (name, opts): (mlua::LuaString, Table)| {
                const PUT: &str = "zone:put";
                let rule = rules::from_options(PUT, &opts)?;
                let rule_name = String::from_utf8_lossy(&name.as_bytes()).into_owned();
                let names = rules::names(&opts, &rule_name, &rule)?.map_err(|e| error(PUT, e))?;
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
                limiter(lua, &this.0, name, found, Some(names)).map_err(args::core(PUT))
            },
        );
        methods.add_method("get", |lua, this, name: mlua::LuaString| {
            let name = name.as_bytes().to_vec();
            match this.0.find(&name) {
                Some(found) => {
                    limiter(lua, &this.0, name, found, None).map_err(args::core("zone:get"))
                }
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

/// The limiter object of `found`, the rule `rules` holds as `name`, its windows called
/// `names` (as put), else by the defaults of `name`.
fn limiter(
    lua: &Lua,
    rules: &Arc<Rules>,
    name: Vec<u8>,
    found: Found,
    names: Option<WindowNames>,
) -> Result<Value, Error> {
    // No configured window: nothing the check could refuse.
    let names = names.or_else(|| WindowNames::new(&String::from_utf8_lossy(&name), []).ok());
    let store = DirectoryRule::new(Arc::clone(rules), name, found, WorkerOwner::new())?;
    limiter::push(lua, LuaLimiter::new(Box::new(store), names)).map_err(|_| Error::RuleRemoved)
}
