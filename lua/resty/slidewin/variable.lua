-- resty.slidewin.variable: an nginx variable's value, read through ngx_lua's own FFI entry in a
-- function LuaJIT compiles.
--
--   local var = require "resty.slidewin.variable"
--   local addr = var.get("remote_addr")      -- like ngx.var.remote_addr; nil when unset
--
-- Why not ngx.var: its metamethod ends in a tail call LuaJIT cannot compile ("NYI: return to
-- lower frame"), so as soon as any location reads ngx.var, LuaJIT blacklists it and every read
-- in the worker runs interpreted, ~0.5 us a request (BENCHMARKS.md, "The access phase"). A
-- limiter's `key_var` reads its key here.

local _M = {}

-- Outside nginx's http subsystem (the stream one, or plain LuaJIT in the unit tests) there is
-- no such entry: ngx.var it is.
if not (ngx and ngx.config and ngx.config.subsystem == "http") then
    function _M.get(name)
        return ngx.var[name]
    end
    return _M
end

local ffi = require "ffi"
local base = require "resty.core.base"
require "resty.core.var" -- declares ngx_http_lua_ffi_var_get

local C = ffi.C
local error = error
local ffi_str = ffi.string
local get_request = base.get_request
local get_string_buf = base.get_string_buf

local value = ffi.new("char *[1]")
local value_len = ffi.new("size_t[1]")
local errmsg = base.get_errmsg_ptr()

local NGX_OK, NGX_DECLINED = 0, -5

-- The value of variable `name` (a string) in this request, or nil when it has none.
function _M.get(name)
    local r = get_request()
    if not r then
        error("resty.slidewin.variable: no request found (call it while serving one)", 2)
    end
    local len = #name
    local rc = C.ngx_http_lua_ffi_var_get(r, name, len, get_string_buf(len), 0, value, value_len,
        errmsg)
    if rc == NGX_OK then
        -- Not a tail call: that is what keeps this function compiled.
        local v = ffi_str(value[0], value_len[0])
        return v
    end
    if rc == NGX_DECLINED then
        return nil
    end
    error("resty.slidewin.variable: $" .. name .. ": " .. ffi_str(errmsg[0]), 2)
end

return _M
