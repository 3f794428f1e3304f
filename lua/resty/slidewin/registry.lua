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
--
-- A limiter whose store exists only in the workers (store "nginx": a zone of nginx.conf, which
-- the native module maps after init_by_lua* has run) is made in every worker by
-- resty.slidewin.init_worker(), which answers nil, err when one fails:
--   native = { store = "nginx", zone = "api" },                     -- in registry.new's table
--   init_worker_by_lua_block { assert(require("resty.slidewin").init_worker()) }
--
-- The worker's other named objects, one table per kind ("concurrency limit", "adaptive limit",
-- "queue limit", "zone"), each made in init_by_lua* and registered by its module's new:
--   local adaptive_limits = registry.kind("adaptive limit")
--   adaptive_limits:add(object)     -- by object.name; one of the same name is replaced in place
--   adaptive_limits:get(name)       -- the object, or nil, "no adaptive limit called <name>"
--   adaptive_limits:each()          -- every object, in the order made
-- The operator's pages (metrics, stats_json below) read them from here.

local json = require "resty.slidewin.json"
local phases = require "resty.slidewin.phases"
local prometheus = require "resty.slidewin.prometheus"
local slidewin = require "resty.slidewin"
local top = require "resty.slidewin.top"
local now_ms = require("slidewin").now_ms

local _M = {}
local mt = { __index = _M }

local Kind = {}
Kind.__index = Kind
local kinds = {}

local function new_kind(kind)
    return setmetatable({ kind = kind, by_name = {}, names = {} }, Kind)
end

-- The named objects of `kind` (the same table for every caller).
function _M.kind(kind)
    local objects = kinds[kind]
    if not objects then
        objects = new_kind(kind)
        kinds[kind] = objects
    end
    return objects
end

-- Keeps `object` under `name` (default object.name).
function Kind.add(self, object, name)
    name = name or object.name
    if not self.by_name[name] then
        self.names[#self.names + 1] = name
    end
    self.by_name[name] = object
end

function Kind.get(self, name)
    local object = self.by_name[name]
    if not object then
        return nil, "no " .. self.kind .. " called " .. tostring(name)
    end
    return object
end

function Kind.each(self)
    local list = {}
    for i, name in ipairs(self.names) do
        list[i] = self.by_name[name]
    end
    return list
end

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a nil value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(string.format("registry:%s: self must be a registry (call registry:%s(...) with ':'), got %s",
            method, method, type(self) == "string" and '"' .. self .. '"' or tostring(self)), 3)
    end
end

-- Makes limiter `name` from `conf` in `self`, or keeps its error.
local function make(self, name, conf)
    local sw, err = slidewin.new(conf)
    if sw then
        self.set:add(sw, name)
    end
    self.errors[name] = err
    return sw, err
end

-- The registries made in the master with limiters left for the workers (self.in_worker).
local awaiting_workers = {}

-- In this worker, the limiters every registry left for it: true, or nil and the first error
-- (a limiter that failed stays in its registry as its error).
local function make_in_worker()
    local first_err
    for _, self in ipairs(awaiting_workers) do
        for _, item in ipairs(self.in_worker) do
            local _, err = make(self, item.name, item.conf)
            if err and not first_err then
                first_err = 'limiter "' .. item.name .. '": ' .. err
            end
        end
        table.sort(self.names)
    end
    if first_err then
        return nil, first_err
    end
    return true
end

-- Whether `conf` is made in the workers: its store exists only there, and this is the master.
local function waits_for_worker(conf)
    local store = type(conf) == "table" and slidewin.store_module(conf.store)
    return store and store.in_worker and ngx.get_phase() == "init"
end

-- A registry from { name = config, ... } (each config's name defaults to its key). Its
-- limiters are a kind of their own (two registries may both have an "api"), in the order of
-- their names: self.names, self.limiters[name].
function _M.new(configs)
    if type(configs) ~= "table" then
        error("registry.new: configs must be a table of limiter configs, got " .. tostring(configs), 2)
    end
    local limiters = new_kind("limiter")
    local self = setmetatable({ set = limiters, limiters = limiters.by_name, errors = {}, names = limiters.names,
        in_worker = {} }, mt)
    for name, conf in pairs(configs) do
        if type(conf) == "table" and conf.name == nil then
            local named = { name = name }
            for k, v in pairs(conf) do
                named[k] = v
            end
            conf = named
        end
        if waits_for_worker(conf) then
            self.in_worker[#self.in_worker + 1] = { name = name, conf = conf }
            self.errors[name] = 'limiter "' .. tostring(name) .. '" (store "' .. conf.store .. '") is made in '
                .. 'each worker: call require("resty.slidewin").init_worker() in init_worker_by_lua*'
        else
            make(self, name, conf)
        end
    end
    table.sort(self.names)
    if self.in_worker[1] then
        table.sort(self.in_worker, function(a, b) return tostring(a.name) < tostring(b.name) end)
        awaiting_workers[#awaiting_workers + 1] = self
        phases.on_init_worker("registry", make_in_worker)
    end
    return self
end

-- The limiter called `name`, or nil, err.
function _M.get(self, name)
    check_self(self, "get")
    local sw, err = self.set:get(name)
    if sw then
        return sw
    end
    return nil, self.errors[name] or err
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

-- Prometheus text for every object of `kind` (each writes its samples: obj:write_metrics(out)).
function _M.metrics_of(kind)
    local out = prometheus.new()
    for _, object in ipairs(_M.kind(kind):each()) do
        object:write_metrics(out)
    end
    return out:text()
end

-- {"<name>": obj:json_stats(), ...} for every object of `kind`, as a resty.slidewin.json
-- object; nil when there is none.
function _M.stats_of(kind)
    local by_name = {}
    for _, object in ipairs(_M.kind(kind):each()) do
        by_name[#by_name + 1], by_name[#by_name + 2] = object.name, object:json_stats()
    end
    return by_name[1] and json.object(by_name) or nil
end

-- Prometheus text for every working limiter (and every adaptive limit: node-wide, beside the
-- limiters).
function _M.metrics(self)
    check_self(self, "metrics")
    return slidewin.metrics_text(self.set:each()) .. _M.metrics_of("adaptive limit")
end

-- {"now_ms": ..., "limiters": {...}, "adaptive": {...}} for every working limiter (and every
-- adaptive limit, when there is one).
function _M.stats_json(self)
    check_self(self, "stats_json")
    local adaptive = _M.stats_of("adaptive limit")
    return slidewin.stats_json(self.set:each(), { adaptive and '"adaptive":' .. json.encode(adaptive) })
end

-- The n (default 10) most refused keys and the n nearest their limit of every working
-- limiter, as JSON (resty.slidewin.top); nil, err for a bad n.
function _M.top_json(self, n)
    check_self(self, "top_json")
    return top.json(self.set:each(), n, now_ms())
end

-- One key's windows in every working limiter, as JSON: what its next request gets (a peek).
function _M.window_json(self, key)
    check_self(self, "window_json")
    return top.window_json(self.set:each(), key, now_ms())
end

return _M
