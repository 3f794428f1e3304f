-- LuaRocks package of the OpenResty binding: `luarocks make` in the checkout (or
-- `luarocks make --tree DIR`) builds slidewin.so with cargo and installs it with every Lua module
-- of lua/ (resty.slidewin and its store, config and metrics modules, and the Redis scripts in
-- redis/, which the Redis store reads beside resty/). Needs cargo on PATH; CARGO and
-- CARGO_TARGET_DIR are honoured. The version follows Cargo.toml's workspace version.
rockspec_format = "3.0"
package = "slidewin"
version = "0.1.0-1"
source = {
   -- `luarocks make` builds the checkout it runs in; no archive is published yet.
   url = ".",
}
description = {
   summary = "Exact sliding-window rate limits for OpenResty/nginx (shared memory, lua_shared_dict, Redis)",
   detailed = [[
resty.slidewin: sliding-window rate limiting for OpenResty, exact across workers, with
Prometheus metrics and live limits; the algorithms are one Rust core (require "slidewin").
]],
   license = "MIT OR Apache-2.0",
}
dependencies = {
   "lua >= 5.1",
}
build = {
   type = "command",
   -- The module file must be named after its luaopen_slidewin symbol: slidewin.so.
   build_command = [[
set -e
"${CARGO:-cargo}" build --release -p slidewin-lua
cp "${CARGO_TARGET_DIR:-target}/release/libslidewin_lua.so" slidewin.so
]],
   -- Into the rock's own directories; luarocks then deploys them into the tree.
   install_command = [[
set -e
mkdir -p "$(LUADIR)" "$(LIBDIR)"
cp -R lua/. "$(LUADIR)/"
cp slidewin.so "$(LIBDIR)/slidewin.so"
]],
}
