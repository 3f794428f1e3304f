-- resty.slidewin.concurrency: at most `limit` requests of a key in flight across every worker.
--
--   init_by_lua_block {
--       local concurrency = require "resty.slidewin.concurrency"
--       assert(concurrency.new{ name = "api", limit = 8, max_limit = 64, max_hold_ms = 60000 })
--   }
--   log_by_lua_block { require("resty.slidewin").log() }   -- http level: every location
--   location /api/ { access_by_lua_block { require("resty.slidewin.concurrency").get("api"):enter("all") } }
--
-- enter(key) takes a slot (kept in ngx.ctx) or answers `status` (429) with Retry-After and ends
-- the request. log() gives back every slot the request holds; c:leave() gives back this limit's
-- slots sooner (e.g. once the upstream answered). A slot whose release never comes (a location
-- with a log_by_lua of its own, an internal redirect, which drops ngx.ctx) is freed after
-- max_hold_ms; the slots of a worker that died are freed when the key needs them, and before
-- c:inflight() and c:stats() count.
-- c:set_limit(n) changes the limit for every worker at once (slots held stay held).
-- (concurrency.log is the older name of that log(): see resty.slidewin.phases.)

local slidewin = require "slidewin"
local bytes = require("resty.slidewin.config").bytes
local phases = require "resty.slidewin.phases"
local registry = require "resty.slidewin.registry"

local ngx = ngx
local pcall, type, tostring, setmetatable = pcall, type, tostring, setmetatable

local _M = {}
local mt = { __index = _M }

local limits = registry.kind("concurrency limit")
local CTX = "slidewin_slots"

-- Gives back the slots this request holds of this limit (all of them with `self` nil).
local function release(self)
    local held = ngx.ctx[CTX]
    if not held then
        return
    end
    local kept = {}
    for i = 1, #held, 3 do
        local limit, key, token = held[i], held[i + 1], held[i + 2]
        if self == nil or limit == self then
            limit.slots:leave(key, token)
        else
            kept[#kept + 1], kept[#kept + 2], kept[#kept + 3] = limit, key, token
        end
    end
    ngx.ctx[CTX] = kept[1] and kept or nil
end

-- The log phase's part (resty.slidewin.phases): gives back every slot the request holds.
local function release_all()
    release(nil)
end

local function positive_or_nil(opts, field)
    local v = opts[field]
    if v ~= nil and (type(v) ~= "number" or v < 1 or v % 1 ~= 0) then
        return nil, field .. " must be a positive integer, got " .. tostring(v)
    end
    return true
end

-- A concurrency limit, or nil, err. Made in init_by_lua*, so that every worker shares it.
-- opts: name, limit, max_limit (default limit), max_hold_ms (default 60000), status (429),
-- retry_after_ms (1000), keys (room for 64 keys) or size (bytes or "1m"), max_key_bytes (64).
function _M.new(opts)
    if type(opts) ~= "table" then
        return nil, "opts must be a table, got " .. tostring(opts)
    end
    local phase = ngx.get_phase()
    if phase ~= "init" then
        return nil, "a concurrency limit must be made in init_by_lua* (before the workers fork), not in "
            .. phase
    end
    if type(opts.name) ~= "string" then
        return nil, "name must be a string, got " .. tostring(opts.name)
    end
    for _, field in ipairs { "status", "retry_after_ms" } do
        local ok, err = positive_or_nil(opts, field)
        if not ok then
            return nil, err
        end
    end
    if opts.status and (opts.status < 200 or opts.status > 599) then
        return nil, "status must be an HTTP status (200 to 599), got " .. tostring(opts.status)
    end
    local size = opts.size and bytes(opts.size)
    if opts.size and not size then
        return nil, 'size must be a number of bytes or a size like "1m", got ' .. tostring(opts.size)
    end
    local ok, slots = pcall(slidewin.concurrency, {
        name = opts.name, limit = opts.limit, max_limit = opts.max_limit,
        max_hold_ms = opts.max_hold_ms or 60000, size = size, keys = opts.keys,
        max_key_bytes = opts.max_key_bytes,
    })
    if not ok then
        return nil, slots
    end
    local self = setmetatable({
        name = opts.name,
        slots = slots,
        status = opts.status or 429,
        retry_after = tostring(slidewin.seconds_up(opts.retry_after_ms or 1000)),
    }, mt)
    limits:add(self)
    phases.on_log("concurrency", release_all)
    return self
end

-- The concurrency limit called `name`, or nil, err.
function _M.get(name)
    return limits:get(name)
end

-- Takes a slot of `key` (a string) or refuses the request (status, Retry-After, exit).
-- Returns true, inflight (with this one), limit when admitted.
function _M.enter(self, key)
    local admitted, inflight, limit, token = self.slots:enter(key)
    if not admitted then
        ngx.header["Retry-After"] = self.retry_after
        return ngx.exit(self.status)
    end
    local ctx = ngx.ctx
    local held = ctx[CTX]
    if not held then
        held = {}
        ctx[CTX] = held
    end
    local n = #held
    held[n + 1], held[n + 2], held[n + 3] = self, key, token
    return true, inflight, limit
end

function _M.leave(self)
    release(self)
end

_M.log = phases.log

-- The live limit.
function _M.limit(self)
    return self.slots:limit()
end

-- Sets the live limit for every worker: true, or nil, err.
function _M.set_limit(self, limit)
    local ok, err = pcall(self.slots.set_limit, self.slots, limit)
    if not ok then
        return nil, err
    end
    return true
end

-- Slots of `key` held now by live workers within their lease.
function _M.inflight(self, key)
    return self.slots:inflight(key)
end

-- { inflight, admitted, refused, full, expired, dead_owner, repairs, limit, max_limit, capacity }.
function _M.stats(self)
    return self.slots:stats()
end

return _M
