-- resty.slidewin.fast: lim:decide through LuaJIT's FFI, for the stores whose limiter lives
-- in the worker (local, shm, zone). A compiled trace calls the C function directly; a method
-- on the Lua C API (lim:decide) makes LuaJIT leave the trace and stitch a new one around each
-- call, which cost a request more than the decision (BENCHMARKS.md, "The access phase").
--
--   local decide, decider = require("resty.slidewin.fast").decider(lim)
--   decide(decider, key, cost, commit, limits)   -- lim:decide(key, cost, commit, limits)
--
-- Same answers and errors as lim:decide. Per-call limits and number keys take lim:decide
-- itself (their conversions live there). Where the FFI cannot load the module's library,
-- decider returns lim:decide and lim.

local ffi = require "ffi"

local error = error
local ffi_str = ffi.string
local type = type

if not pcall(ffi.typeof, "slidewin_decision_t") then
    ffi.cdef [[
    typedef struct {
        int allowed, window, has_retry, message_len;
        double remaining, retry_after_ms, reset_after_ms, limits_version;
        char message[256];
    } slidewin_decision_t;
    int slidewin_decide(void *block, const char *key, size_t key_len, double cost, int commit,
        slidewin_decision_t *out);
    ]]
end

-- The library `require "slidewin"` loaded (the same file: dlopen hands back its handle).
local function library()
    local path = package.searchpath("slidewin", package.cpath)
    if not path then
        return nil, "slidewin.so is not on lua_package_cpath"
    end
    local ok, lib = pcall(ffi.load, path)
    if not ok then
        return nil, lib
    end
    return lib
end

local lib = library()
-- One answer per worker, reused: a call allocates nothing.
local out = ffi.new("slidewin_decision_t")

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
        out.limits_version
end

local _M = {}

-- The decide function and its first argument for limiter object `lim`.
function _M.decider(lim)
    if not lib then
        return lim.decide, lim
    end
    -- A cdata pointer: the JIT cannot pass a light userdata as a C argument.
    return decide, { lim = lim, block = ffi.cast("void *", lim:ffi_handle()) }
end

return _M
