-- resty.slidewin.store.shdict: one lua_shared_dict shared by every worker of one nginx.
--
-- The sliding-window counter (algorithm "counter"): time is cut into windows of window_ms; a
-- key's count in the previous window is weighted by the part of it still inside the sliding
-- window:  estimate = previous * (window_ms - elapsed) / window_ms + current.
-- A request is admitted when estimate + cost <= limit. Committing is an atomic incr of the
-- current count, undone (incr by -cost) when the new estimate overshoots, so concurrent
-- workers never admit more than the limit against the counts they read; the estimate assumes
-- the previous window's requests were spread evenly, which is this algorithm's documented
-- error. Counts expire after 2 x window_ms.
--
--   lua_shared_dict slidewin 10m;
--   require("resty.slidewin").new{ name = "api", algorithm = "counter", limit = 30,
--                                  window_ms = 5000, store = "shdict", dict = "slidewin" }

local now_ms = require("slidewin").now_ms

local floor = math.floor
local ceil = math.ceil
local max = math.max

local _M = {}
local mt = { __index = _M }

function _M.new(conf)
    if conf.algorithm ~= "counter" then
        return nil, 'algorithm must be "counter" with store "shdict", got "' .. tostring(conf.algorithm) .. '"'
    end
    local dict = ngx.shared[conf.dict]
    if not dict then
        return nil, 'dict must name a lua_shared_dict, got "' .. tostring(conf.dict) .. '"'
    end
    return setmetatable({
        dict = dict,
        prefix = conf.name .. "|",
        keys_prefix = conf.name .. "#keys|",
        limit = conf.limit,
        window_ms = conf.window_ms,
        ttl_s = 2 * conf.window_ms / 1000,
    }, mt)
end

-- Where `now` falls: the current window's index and the weight of the previous window.
local function position(self, now)
    local window = self.window_ms
    local index = floor(now / window)
    local elapsed = now - index * window
    return index, elapsed, (window - elapsed) / window
end

-- Milliseconds from `elapsed` (into the current window) until `cost` fits, counts unchanged.
local function wait_ms(self, previous, current, elapsed, cost)
    local limit, window = self.limit, self.window_ms
    if cost > limit then
        return nil
    end
    if current + cost <= limit then
        -- Within this window, once previous * (window - e) / window <= limit - current - cost.
        local e = ceil(window - (limit - current - cost) * window / previous)
        return max(e - elapsed, 1)
    end
    -- In the next window, once current * (window - e) / window <= limit - cost.
    return window - elapsed + max(ceil(window - (limit - cost) * window / current), 0)
end

local function reset_ms(self, previous, current, elapsed)
    if current > 0 then
        return 2 * self.window_ms - elapsed
    elseif previous > 0 then
        return self.window_ms - elapsed
    end
    return 0
end

local function remaining(self, estimate)
    return max(floor(self.limit - estimate), 0)
end

function _M.incoming(self, key, cost, commit)
    local dict = self.dict
    local index, elapsed, weight = position(self, now_ms())
    local current_key = self.prefix .. index .. "|" .. key
    local previous = dict:get(self.prefix .. (index - 1) .. "|" .. key) or 0
    local current
    if commit and cost > 0 then
        local err
        current, err = dict:incr(current_key, cost, 0, self.ttl_s)
        if not current then
            return nil, err
        end
        local estimate = previous * weight + current
        if estimate <= self.limit then
            if current == cost then
                dict:incr(self.keys_prefix .. index, 1, 0, self.ttl_s)
            end
            return true, remaining(self, estimate), 0, reset_ms(self, previous, current, elapsed)
        end
        current, err = dict:incr(current_key, -cost)
        if not current then
            return nil, err
        end
    else
        current = dict:get(current_key) or 0
        local estimate = previous * weight + current + cost
        if estimate <= self.limit then
            return true, remaining(self, estimate), 0, reset_ms(self, previous, current, elapsed)
        end
    end
    return false, remaining(self, previous * weight + current), wait_ms(self, previous, current, elapsed, cost),
        reset_ms(self, previous, current, elapsed)
end

function _M.uncommit(self, key, cost)
    local index = position(self, now_ms())
    local current_key = self.prefix .. index .. "|" .. key
    local current, err = self.dict:incr(current_key, -cost, 0)
    if not current then
        return nil, err
    end
    if current < 0 then
        -- The commit fell in the previous window; nothing of it is left here to give back.
        self.dict:incr(current_key, -current)
    end
    return true
end

-- Keys that made a request in the current window.
function _M.keys(self)
    return self.dict:get(self.keys_prefix .. (position(self, now_ms()))) or 0
end

return _M
