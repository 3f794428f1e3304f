-- resty.slidewin.live_limit: the window of a shared limiter whose live limit a controller
-- (resty.slidewin.queue, resty.slidewin.adaptive) sets for every worker.

local window_limit = require("slidewin").window_limit

local type, tostring, ipairs, setmetatable = type, tostring, ipairs, setmetatable

local _M = {}
local mt = { __index = _M }

-- Stores whose live limits every worker reads.
local SHARED_STORES = { shm = true, redis = true }

-- Window `window` (index or name, default 1) of limiter `sw`, or nil, err naming `field`.
function _M.new(field, sw, window)
    if type(sw) ~= "table" or type(sw.set_limit) ~= "function" or type(sw.windows) ~= "table" then
        return nil, field .. " must be a resty.slidewin limiter, got " .. tostring(sw)
    end
    if not SHARED_STORES[sw.conf.store] then
        return nil, field .. " must keep its live limits for every worker (store shm or redis), got store "
            .. tostring(sw.conf.store)
    end
    for i, w in ipairs(sw.windows) do
        if (window or 1) == i or window == w.name then
            return setmetatable({ sw = sw, index = i, window_ms = w.window_ms, max_limit = w.max_limit }, mt)
        end
    end
    return nil, "window must be a window's index or name of limiter " .. sw.name .. ", got " .. tostring(window)
end

-- Sets the live limit to `per_second` requests a second, as a limit per window (the core's
-- slidewin.window_limit: rounded up once, at least 1, at most the window's max_limit): the
-- limit set, or nil, err.
function _M.set_rate(self, per_second)
    local limit = window_limit(per_second, self.window_ms, self.max_limit)
    local ok, err = self.sw:set_limit(limit, self.index)
    if not ok then
        return nil, err
    end
    return limit
end

-- The live limit (per window).
function _M.limit(self)
    return self.sw:limits()[self.index]
end

return _M
