-- Run once when the module loads, with the table the Rust side built.
-- Errors raised through mlua reach Lua as userdata (with a traceback appended), which nginx
-- logs as "unknown reason". These wrappers re-raise them as the plain message strings Lua
-- callers expect ("slidewin.mean: k must be a positive integer, got 0"), as the limiter's C
-- methods already do.
local raw = ...

local pcall, error, tostring, setmetatable, getmetatable = pcall, error, tostring, setmetatable, getmetatable

local function rethrow(ok, ...)
    if ok then
        return ...
    end
    error((tostring((...)):match("^[^\n]*")), 0)
end

local function plain(f)
    return function(...)
        return rethrow(pcall(f, ...))
    end
end

local module = {}
for name, value in pairs(raw) do
    module[name] = value
end
for _, name in ipairs { "limiter", "sliding_max", "sliding_min", "sliding_mean", "sliding_sum", "ewma" } do
    module[name] = plain(raw[name])
end

-- Streaming aggregates: a table holding the Rust object, with the same methods.
local Aggregate = {}
Aggregate.__index = Aggregate
for _, method in ipairs {
    "push", "push_at", "replace_last", "advance_to", "value", "value_at", "len", "is_full", "clear",
    "bands",
} do
    Aggregate[method] = function(self, ...)
        if getmetatable(self) ~= Aggregate then
            error(("agg:%s: self must be a slidewin aggregate (call agg:%s(...) with ':'), got %s")
                :format(method, method, type(self) == "string" and '"' .. self .. '"' or tostring(self)), 2)
        end
        local inner = self[1]
        return rethrow(pcall(inner[method], inner, ...))
    end
end
for _, name in ipairs {
    "mean", "sum", "max", "min", "variance", "stddev", "rate", "smoothed",
    "population_variance", "population_stddev", "wma", "quantile", "bollinger", "ema",
} do
    local make = raw[name]
    module[name] = function(opts)
        return setmetatable({ rethrow(pcall(make, opts)) }, Aggregate)
    end
end

-- Zones of rules made at run time: a table holding the Rust object, with the same methods.
local Zone = {}
Zone.__index = Zone
for _, method in ipairs { "put", "get", "remove", "names", "stats" } do
    Zone[method] = function(self, ...)
        if getmetatable(self) ~= Zone then
            error(("zone:%s: self must be a slidewin zone (call zone:%s(...) with ':'), got %s")
                :format(method, method, type(self) == "string" and '"' .. self .. '"' or tostring(self)), 2)
        end
        local inner = self[1]
        return rethrow(pcall(inner[method], inner, ...))
    end
end
function module.zone(opts)
    return setmetatable({ rethrow(pcall(raw.zone, opts)) }, Zone)
end

return module
