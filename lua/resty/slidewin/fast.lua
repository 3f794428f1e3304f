-- resty.slidewin.fast: the per-request calls into the slidewin module through LuaJIT's FFI,
-- which a compiled trace makes directly. A method on the Lua C API (lim:decide) makes LuaJIT
-- leave the trace and stitch a new one around each call, and a header value built with `..`
-- is a new Lua string each request: together they cost a request more than the decision
-- (BENCHMARKS.md, "The access phase").
--
--   local decide, decider = fast.decider(lim)
--   decide(decider, key, cost, commit, limits)   -- answers as lim:decide(key, cost, commit, limits)
--   fast.rate_headers(rate_policy, prefix, remaining, t_ms)  -- RateLimit-Policy and RateLimit
--
-- Per-call limits and number keys take lim:decide itself (their conversions live there).

local ffi = require "ffi"

local error = error
local ffi_str = ffi.string
local type = type

if not pcall(ffi.typeof, "slidewin_decision_t") then
    ffi.cdef [[
    typedef struct {
        int allowed, window, has_retry, message_len;
        double remaining, retry_after_ms, reset_after_ms, version;
        char message[256];
    } slidewin_decision_t;
    int slidewin_decide(void *block, const char *key, size_t key_len, double cost, int commit,
        slidewin_decision_t *out);
    int slidewin_rate_value(const char *prefix, size_t prefix_len, double remaining, double t_ms,
        char *out, size_t cap);
    ]]
end

-- The library `require "slidewin"` loaded (the same file: dlopen hands back its handle).
local function library()
    local path = package.searchpath("slidewin", package.cpath)
    local ok, lib = pcall(ffi.load, path or "slidewin")
    if not ok then
        error("resty.slidewin.fast: cannot load slidewin.so through the FFI (lua_package_cpath): " .. lib)
    end
    return lib
end

local lib = library()
-- One answer and one header buffer per worker, reused: a call allocates nothing.
local out = ffi.new("slidewin_decision_t")
local VALUE_ROOM = 48 -- two numbers and ";t="
local value_cap = 256
local value = ffi.new("char[?]", value_cap)

local function decide(d, key, cost, commit, limits)
    if limits ~= nil or type(key) ~= "string" then
        return d.lim:decide(key, cost, commit, limits)
    end
    if lib.slidewin_decide(d.block, key, #key, cost, commit and 1 or 0, out) ~= 0 then
        error(ffi_str(out.message, out.message_len), 0)
    end
    local retry_after_ms = nil
    if out.has_retry ~= 0 then
        retry_after_ms = out.retry_after_ms
    end
    return out.allowed ~= 0, out.remaining, retry_after_ms, out.reset_after_ms, nil, out.window,
        out.version
end

local _M = {}

-- The decide function and its first argument for limiter object `lim`.
function _M.decider(lim)
    -- A cdata pointer: the JIT cannot pass a light userdata as a C argument.
    return decide, { lim = lim, block = ffi.cast("void *", lim:ffi_handle()) }
end

-- Sets header `name` to `len` bytes of `data` (a Lua string or a char buffer): straight
-- through ngx_lua's FFI entry (as declared by resty.core, whose ngx.header calls it too),
-- else through ngx.header.
local set_header
do
    -- In nginx's http subsystem (as resty.slidewin.variable), where resty.core declares it;
    -- not on macOS, where resty.core calls a wrapper of its own.
    if ngx and ngx.config and ngx.config.subsystem == "http" and jit.os ~= "OSX" then
        local base = require "resty.core.base"
        require "resty.core.response" -- declares ngx_http_lua_ffi_set_resp_header
        local C = ffi.C
        local get_request = base.get_request
        local errmsg = base.get_errmsg_ptr()
        -- What resty.core says for the codes that leave no message.
        local WHY = {
            [base.FFI_NO_REQ_CTX] = "no request ctx found",
            [base.FFI_BAD_CONTEXT] = "API disabled in the current context",
        }
        set_header = function(name, data, len)
            local r = get_request()
            if not r then
                error("resty.slidewin: no request found to set header " .. name .. " on", 3)
            end
            local rc = C.ngx_http_lua_ffi_set_resp_header(r, name, #name, false, data, len, nil, 0,
                true, errmsg)
            if rc ~= 0 and rc ~= base.FFI_DECLINED then -- declined: headers already sent
                error("resty.slidewin: cannot set header " .. name .. ": " .. (WHY[rc] or ffi_str(errmsg[0])), 3)
            end
        end
    else
        set_header = function(name, data, len)
            ngx.header[name] = ffi_str(data, len)
        end
    end
end

-- The draft's two headers: RateLimit-Policy `rate_policy`, and RateLimit
-- <prefix><remaining>;t=<t_ms in whole seconds, rounded up>, its value written by the module.
function _M.rate_headers(rate_policy, prefix, remaining, t_ms)
    set_header("RateLimit-Policy", rate_policy, #rate_policy)
    local room = #prefix + VALUE_ROOM
    if room > value_cap then
        value_cap, value = room, ffi.new("char[?]", room)
    end
    set_header("RateLimit", value, lib.slidewin_rate_value(prefix, #prefix, remaining, t_ms, value, value_cap))
end

return _M
