-- resty.slidewin.store.shdict: one lua_shared_dict shared by every worker of one nginx.
--
-- The sliding-window counter (algorithm "counter"): time is cut into windows of window_ms; a
-- key's count in the previous window is weighted by the part of it still inside the sliding
-- window, exactly as slidewin::SlidingCounter counts:
--   used = ceil(previous * (window_ms - elapsed) / window_ms) + current
-- and a request is admitted when used + cost <= limit. Committing is an atomic incr of the
-- current count, undone (incr by -cost) when the new estimate overshoots, so concurrent
-- workers never admit more than the limit against the counts they read; the count assumes
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

-- Where `now` falls: the current fixed window's index and the ms elapsed in it.
local function position(self, now)
    local index = floor(now / self.window_ms)
    return index, now - index * self.window_ms
end

-- Cost the sliding window holds: ceil(previous * (window - elapsed) / window) + current.
local function used(self, previous, current, elapsed)
    local window = self.window_ms
    return ceil(previous * (window - elapsed) / window) + current
end

-- Elapsed ms into a window at which `count` weighted by the rest of it is at most `at_most`.
local function elapsed_until(window, count, at_most)
    if count == 0 then
        return 0
    end
    return max(window - floor(at_most * window / count), 0)
end

-- Milliseconds until `cost` fits if nothing else arrives; nil when it never can.
local function wait_ms(self, previous, current, elapsed, cost)
    local window, at_most = self.window_ms, self.limit - cost
    if at_most < 0 then
        return nil
    end
    if at_most >= current then
        local at = elapsed_until(window, previous, at_most - current)
        if at < window then
            return max(at - elapsed, 0)
        end
    end
    return window - elapsed + elapsed_until(window, current, at_most)
end

local function reset_ms(self, previous, current, elapsed)
    if current > 0 then
        return 2 * self.window_ms - elapsed
    elseif previous > 0 then
        return self.window_ms - elapsed
    end
    return 0
end

local function refusal(self, previous, current, elapsed, cost)
    local room = max(self.limit - used(self, previous, current, elapsed), 0)
    return false, room, wait_ms(self, previous, current, elapsed, cost), reset_ms(self, previous, current, elapsed)
end

function _M.incoming(self, key, cost, commit)
    local dict, limit = self.dict, self.limit
    local index, elapsed = position(self, now_ms())
    local current_key = self.prefix .. index .. "|" .. key
    local previous = dict:get(self.prefix .. (index - 1) .. "|" .. key) or 0
    if not (commit and cost > 0) then
        local current = dict:get(current_key) or 0
        local room = limit - used(self, previous, current, elapsed)
        if cost <= room then
            return true, room - cost, 0, reset_ms(self, previous, current, elapsed)
        end
        return refusal(self, previous, current, elapsed, cost)
    end
    local current, err = dict:incr(current_key, cost, 0, self.ttl_s)
    if not current then
        return nil, err
    end
    local now_used = used(self, previous, current, elapsed)
    if now_used <= limit then
        if current == cost then
            dict:incr(self.keys_prefix .. index, 1, 0, self.ttl_s)
        end
        return true, limit - now_used, 0, reset_ms(self, previous, current, elapsed)
    end
    -- Over the limit: take the increment back (atomically, whatever others did meanwhile).
    current, err = dict:incr(current_key, -cost)
    if not current then
        return nil, err
    end
    return refusal(self, previous, current, elapsed, cost)
end

-- Gives back `cost` from the current window, then from the previous one (as SlidingCounter).
function _M.uncommit(self, key, cost)
    local dict = self.dict
    local index = position(self, now_ms())
    local current_key = self.prefix .. index .. "|" .. key
    local current, err = dict:incr(current_key, -cost, 0, self.ttl_s)
    if not current then
        return nil, err
    end
    if current < 0 then
        dict:incr(current_key, -current)
        local previous_key = self.prefix .. (index - 1) .. "|" .. key
        local previous = dict:incr(previous_key, current)
        if previous and previous < 0 then
            dict:incr(previous_key, -previous)
        end
    end
    return true
end

-- Keys that made a request in the current window.
function _M.keys(self)
    return self.dict:get(self.keys_prefix .. (position(self, now_ms()))) or 0
end

return _M
