-- resty.slidewin.store.local: the Rust limiter (require "slidewin") inside this worker.
--
-- State is per worker process: with N workers, one client may be admitted up to N x limit per
-- window, since each worker counts only the requests it serves. Use "shm" (the default), or
-- "redis" across nodes, when the limit must hold for the whole node.

local slidewin = require "slidewin"

local _M = {}
local mt = { __index = _M }

-- A store over a slidewin.limiter made from `options` (nil, err for a bad config); `fields`
-- are set on the store (what the metrics module reads).
function _M.over(options, fields)
    local ok, lim, note = pcall(slidewin.limiter, options)
    if not ok then
        return nil, lim
    end
    fields.lim = lim
    return setmetatable(fields, mt), note
end

-- The live limits are kept by conf.name across reloads, shared by the workers when the store
-- is made in init_by_lua* (the keys stay per worker).
function _M.new(conf)
    return _M.over({
        windows = conf.windows,
        name = conf.name,
        max_keys = conf.max_keys,
        max_key_bytes = conf.max_key_bytes,
    }, { keys_per_worker = true })
end

-- What a store in this node's memory declares (stores local, shm, zone and nginx take it from
-- here): the layer decides through its limiter's block in one FFI call (ffi_handle,
-- resty.slidewin.answer), follows the rule in force (follow -> its version; rule -> the
-- windows and limits a version stands for), keeps the live limits (limits, set_limit), and
-- reads a key's windows (window) and the region's top keys a step at a time (walk, step). Each
-- is the limiter object's method of the same name.
for _, method in ipairs { "ffi_handle", "limits", "follow", "rule", "walk", "step", "evictions_to_tell" } do
    _M[method] = function(self, ...)
        local lim = self.lim
        return lim[method](lim, ...)
    end
end

function _M.set_limit(self, limit, window)
    self.lim:set_limit(limit, window)
    return true
end

function _M.window(self, key)
    return self.lim:window(key, 1)
end

-- Gives `cost` back in every window of `key`, in this node's memory: no I/O, so a refund
-- runs in any phase, the log phase included (refunds_at_once). With `stamp_ms` (a
-- reservation's: refunds_at_stamp), cost recorded at that time or before goes back; with
-- `owe` (owes), `cost` is recorded at `stamp_ms` instead, fitting or not (a debt).
_M.refunds_at_once, _M.refunds_at_stamp, _M.owes = true, true, true

function _M.refund(self, key, cost, stamp_ms, owe)
    if owe then
        return self.lim:owe(key, cost, stamp_ms)
    end
    return self.lim:uncommit(key, cost, stamp_ms)
end

function _M.keys(self)
    return self.lim:stats().keys
end

-- { keys, capacity, evictions, reclaimed, repairs, allowed, rejected }
function _M.stats(self)
    return self.lim:stats()
end

return _M
