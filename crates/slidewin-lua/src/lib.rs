//! `require "slidewin"`: the slidewin core for OpenResty/nginx Lua (LuaJIT), built with mlua.
//!
//! ```lua
//! local slidewin = require "slidewin"
//! local now = slidewin.now_ms()   -- the one clock, integer milliseconds
//! ```
//!
//! State lives in the Lua VM that loaded the module: one per nginx worker.

mod adaptive;
mod args;
mod concurrency;
mod fast;
mod formulas;
mod limiter;
mod mapping;
mod object;
mod queue;
mod report;
mod rules;
mod shared;
mod stream;
mod zone;

use mlua::prelude::*;
use slidewin::{Clock, SystemClock};

/// The clock every limiter of this module reads: integer milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemClock.now_ms()
}

#[mlua::lua_module(name = "slidewin")]
fn slidewin(lua: &Lua) -> LuaResult<LuaTable> {
    let module = lua.create_table()?;
    module.set("now_ms", object::now_ms_function(lua)?)?;
    object::register(lua)?;
    module.set("limiter", lua.create_function(limiter::new)?)?;
    module.set("zone", lua.create_function(zone::new)?)?;
    module.set("concurrency", lua.create_function(concurrency::new)?)?;
    module.set("queue_limit", lua.create_function(queue::new)?)?;
    stream::register(lua, &module)?;
    adaptive::register(lua, &module)?;
    formulas::register(lua, &module)?;
    lua.load(include_str!("prelude.lua"))
        .set_name("=slidewin")
        .call(module)
}
