-- resty.slidewin.answer: the per-request crossing into the slidewin module. One FFI call (which
-- a compiled trace makes directly) decides and writes the answer's header values, as the core
-- renders them; the headers are set from those bytes, straight through ngx_lua's FFI entry.
--
--   local headers = require("slidewin").headers("draft")
--   local policy_value = headers:set(version, windows, limits)  -- once per version of the limits
--   local out = answer.decide(lim, headers, key, cost, commit, limits)   -- raises on bad input
--       commit: false (a peek), true (a check) or answer.DRY_RUN (a check whose refusal the
--       request goes through: the store counts it as a would-be one)
--   answer.send(out, policy_value, true)                   -- RateLimit-Policy, RateLimit, Retry-After
--
-- `out` is one buffer per worker, reused by the next decision: read it before anything yields.

local ffi = require "ffi"

local error = error
local ffi_str = ffi.string
local type = type

-- The declarations of every struct and function of the crossing (this file's and the lease
-- store's), written by the module from its Rust items (crates/slidewin-lua/src/cdefs.rs).
if not pcall(ffi.typeof, "slidewin_answer_t") then
    ffi.cdef(require("slidewin").cdefs())
end

-- The library `require "slidewin"` loaded (the same file: dlopen hands back its handle).
local function library()
    local path = package.searchpath("slidewin", package.cpath)
    local ok, lib = pcall(ffi.load, path or "slidewin")
    if not ok then
        error("resty.slidewin.answer: cannot load slidewin.so through the FFI (lua_package_cpath): " .. lib)
    end
    return lib
end

local lib = library()
local out = ffi.new("slidewin_answer_t")
local call_limits = ffi.new("double[8]")
-- out.text holds value i (0-based) at start[i], len[i] bytes (0: none), in the order
-- RateLimit, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset.
local RETRY_AFTER = 1
local NAN = 0 / 0

local _M = { out = out, lib = lib, DRY_RUN = 2 }

-- The FFI handles of `decider`, what decides in this node (a slidewin.limiter object, or a
-- store over one; nil for none, or a store elsewhere), and of headers object `headers` (cdata
-- pointers: the JIT cannot pass a light userdata as a C argument). The caller keeps both
-- objects alive.
function _M.handles(decider, headers)
    return decider and decider.ffi_handle and ffi.cast("void *", decider:ffi_handle()),
        ffi.cast("void *", headers:ffi_handle())
end

-- Decides through the limiter's block under `limits` (nil: the live ones) and renders the
-- headers, `headers_block` taking the policy of the decision's version from a named limiter
-- (every limiter of resty.slidewin; an unnamed one's answer is left with rendered 0); `out`.
function _M.decide(block, headers_block, key, cost, commit, limits)
    -- 0 a peek, 1 a check, 2 a dry run (slidewin_decide's call).
    local call = commit == true and 1 or commit or 0
    local n = 0
    if limits then
        n = #limits
        for i = 1, n do
            call_limits[i - 1] = limits[i]
        end
    end
    local rc
    if type(key) == "string" then
        rc = lib.slidewin_decide(block, headers_block, key, #key, 0, cost, call, call_limits, n, out)
    else
        rc = lib.slidewin_decide(block, headers_block, nil, 0, key, cost, call, call_limits, n, out)
    end
    if rc ~= 0 then
        error(ffi_str(out.message, out.message_len), 0)
    end
    return out
end

-- The sliding counter's answer over two counts kept elsewhere (store shdict): allowed,
-- remaining, retry_after_ms (nil: never), reset_after_ms, as slidewin.counter_decide answers.
function _M.counter_decide(limit, window_ms, previous, current, now, cost, commit)
    if lib.slidewin_counter_decide(limit, window_ms, previous, current, now, cost, commit and 1 or 0, out) ~= 0 then
        error(ffi_str(out.message, out.message_len), 2)
    end
    return out.allowed ~= 0, out.remaining, out.has_retry ~= 0 and out.retry_after_ms or nil, out.reset_after_ms
end

-- `out` filled with a decision made elsewhere (a store's answer) and its header values;
-- stamp_ms, when the store tells it, the time an admitted check recorded its cost at (else NaN).
function _M.render(headers_block, allowed, remaining, retry_after_ms, reset_after_ms, window, limit, stamp_ms)
    out.allowed = allowed and 1 or 0
    out.remaining, out.reset_after_ms, out.window, out.limit = remaining, reset_after_ms, window, limit
    out.stamp_ms = stamp_ms or NAN
    out.has_retry = retry_after_ms and 1 or 0
    out.retry_after_ms = retry_after_ms or 0
    lib.slidewin_render(headers_block, out)
    return out
end

-- A store's `answer` method over its `decide` (the store seam's numbers), rendered into `out`:
-- for a store elsewhere that asks on every call (redis without leases, shdict), which holds
-- nothing in hand while the fallback decides.
function _M.answering(decide)
    local render = _M.render
    return function(store, headers_block, key, cost, commit, limits, in_hand_only)
        if in_hand_only then
            return nil
        end
        local allowed, remaining, retry_after_ms, reset_after_ms, decided_locally, window, stamp_ms =
            decide(store, key, cost, commit, limits)
        if allowed == nil then
            return nil, remaining
        end
        window = window or 1
        return render(headers_block, allowed, remaining, retry_after_ms, reset_after_ms, window,
            limits[window], stamp_ms), decided_locally
    end
end

-- Sets header `name` to `len` bytes of `data` (a Lua string or a char pointer): straight
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

-- Sets the headers of `answer` (`out`): RateLimit-Policy `policy_value` when given, each value
-- rendered, Retry-After only when `retry_after` (a request that goes on has none). Straight
-- code, no loop: the request's trace stays one.
function _M.send(answer, policy_value, retry_after)
    if policy_value then
        set_header("RateLimit-Policy", policy_value, #policy_value)
    end
    local text, start, len = answer.text, answer.start, answer.len
    if len[0] > 0 then
        set_header("RateLimit", text + start[0], len[0])
    end
    if len[2] > 0 then -- the x-ratelimit style's three values
        set_header("X-RateLimit-Limit", text + start[2], len[2])
        set_header("X-RateLimit-Remaining", text + start[3], len[3])
        set_header("X-RateLimit-Reset", text + start[4], len[4])
    end
    if retry_after and len[RETRY_AFTER] > 0 then
        set_header("Retry-After", text + start[RETRY_AFTER], len[RETRY_AFTER])
    end
end

-- The Retry-After value of `answer` as text, or nil.
function _M.retry_after(answer)
    local n = answer.len[RETRY_AFTER]
    return n > 0 and ffi_str(answer.text + answer.start[RETRY_AFTER], n) or nil
end

return _M
