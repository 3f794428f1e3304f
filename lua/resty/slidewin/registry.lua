-- resty.slidewin.registry: named limiters made once per worker, looked up per request.
--
--   init_by_lua_block {
--       package.loaded.limits = require("resty.slidewin.registry").new{
--           api = { algorithm = "log", limit = 30, window_ms = 5000 },
--       }
--   }
--   location /api/ { access_by_lua_block { require("limits"):enforce("api", ngx.var.remote_addr) } }
--
-- A limiter whose config was rejected stays in the registry as its error: enforcing it answers
-- 500 and logs the message, so one bad config breaks only the locations that use it.

local slidewin = require "resty.slidewin"
local top = require "resty.slidewin.top"
local now_ms = require("slidewin").now_ms

local _M = {}
local mt = { __index = _M }

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a nil value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(string.format("registry:%s: self must be a registry (call registry:%s(...) with ':'), got %s",
            method, method, type(self) == "string" and '"' .. self .. '"' or tostring(self)), 3)
    end
end

-- A registry from { name = config, ... } (each config's name defaults to its key).
function _M.new(configs)
    if type(configs) ~= "table" then
        error("registry.new: configs must be a table of limiter configs, got " .. tostring(configs), 2)
    end
    local self = setmetatable({ limiters = {}, errors = {}, names = {} }, mt)
    for name, conf in pairs(configs) do
        local sw, err
        if type(conf) == "table" and conf.name == nil then
            local named = { name = name }
            for k, v in pairs(conf) do
                named[k] = v
            end
            conf = named
        end
        sw, err = slidewin.new(conf)
        self.limiters[name], self.errors[name] = sw, err
        if sw then
            self.names[#self.names + 1] = name
        end
    end
    table.sort(self.names)
    return self
end

-- The limiter called `name`, or nil, err.
function _M.get(self, name)
    check_self(self, "get")
    local sw = self.limiters[name]
    if sw then
        return sw
    end
    return nil, self.errors[name] or "no limiter called " .. tostring(name)
end

-- sw:enforce(key, cost, opts) on limiter `name`; 500 (message in error.log) when it has no
-- limiter.
function _M.enforce(self, name, key, cost, opts)
    check_self(self, "enforce")
    local sw, err = self:get(name)
    if not sw then
        ngx.log(ngx.ERR, 'slidewin limiter "', tostring(name), '": ', err)
        return ngx.exit(500)
    end
    return sw:enforce(key, cost, opts)
end

local function all(self)
    local list = {}
    for i, name in ipairs(self.names) do
        list[i] = self.limiters[name]
    end
    return list
end

-- The adaptive limits of this nginx, when it has loaded them (node-wide, beside the limiters).
local function adaptive()
    return package.loaded["resty.slidewin.adaptive"]
end

-- Prometheus text for every working limiter (and every adaptive limit).
function _M.metrics(self)
    check_self(self, "metrics")
    local a = adaptive()
    return slidewin.metrics_text(all(self)) .. (a and a.metrics() or "")
end

-- {"now_ms": ..., "limiters": {...}, "adaptive": {...}} for every working limiter (and every
-- adaptive limit, when there is one).
function _M.stats_json(self)
    check_self(self, "stats_json")
    local a = adaptive()
    return slidewin.stats_json(all(self), { a and a.json_member() })
end

-- The n (default 10) most refused keys and the n nearest their limit of every working
-- limiter, as JSON (resty.slidewin.top); nil, err for a bad n.
function _M.top_json(self, n)
    check_self(self, "top_json")
    return top.json(all(self), n, now_ms())
end

-- One key's windows in every working limiter, as JSON: what its next request gets (a peek).
function _M.window_json(self, key)
    check_self(self, "window_json")
    return top.window_json(all(self), key, now_ms())
end

return _M
