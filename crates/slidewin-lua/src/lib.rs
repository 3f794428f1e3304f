//! `require "slidewin"`: the slidewin core for OpenResty/nginx Lua (LuaJIT), built with mlua.
//!
//! ```lua
//! local slidewin = require "slidewin"
//! local now = slidewin.now_ms()   -- the one clock, integer milliseconds
//! ```
//!
//! State lives in the Lua VM that loaded the module: one per nginx worker.

mod adaptive;
mod answer;
mod args;
mod cdefs;
mod concurrency;
mod directory;
mod formulas;
mod lease;
mod limiter;
mod limiter_methods;
mod llm;
mod mapping;
mod nginx_zone;
mod operator_view;
mod prometheus;
mod queue;
mod region;
mod rules;
mod stack;
mod stream;

use mlua::ffi::{self, lua_State};
use mlua::prelude::*;
use slidewin::{Clock, SystemClock};
use std::ffi::c_int;

/// The clock every limiter of this module reads: integer milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// `slidewin.now_ms()` as a C function (the shdict store reads it on every call).
pub fn now_ms_function(lua: &Lua) -> LuaResult<LuaFunction> {
    unsafe extern "C-unwind" fn push_now_ms(state: *mut lua_State) -> c_int {
        ffi::lua_pushnumber(state, crate::now_ms() as f64);
        1
    }
    // SAFETY: push_now_ms only pushes a number.
    unsafe { lua.create_c_function(push_now_ms) }
}

#[mlua::lua_module(name = "slidewin")]
fn slidewin(lua: &Lua) -> LuaResult<LuaTable> {
    let module = lua.create_table()?;
    module.set("now_ms", now_ms_function(lua)?)?;
    limiter_methods::register(lua)?;
    module.set("limiter", lua.create_function(limiter::new)?)?;
    module.set("zone", lua.create_function(directory::new)?)?;
    module.set("nginx_zone", lua.create_function(nginx_zone::new)?)?;
    module.set("concurrency", lua.create_function(concurrency::new)?)?;
    module.set("queue_limit", lua.create_function(queue::new)?)?;
    module.set("lease_table", lua.create_function(lease::new)?)?;
    stream::register(lua, &module)?;
    adaptive::register(lua, &module)?;
    answer::register(lua, &module)?;
    cdefs::register(lua, &module)?;
    formulas::register(lua, &module)?;
    prometheus::register(lua, &module)?;
    llm::register(lua, &module)?;
    lua.load(include_str!("prelude.lua"))
        .set_name("=slidewin")
        .call(module)
}
