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
for _, name in ipairs {
    "limiter", "sliding_max", "sliding_min", "sliding_mean", "sliding_sum", "ewma", "latency_bucket",
    "window_limit", "window_rate", "live_limits", "status_class", "loss_ratio", "goodput_rps", "peek_used", "seconds_up", "check_rule",
    "check_limits",
} do
    module[name] = plain(raw[name])
end

-- Objects made in Rust and used through a table holding them, with the same methods: errors
-- come out as plain strings naming the method.
local function class(kind, noun, methods)
    local cls = {}
    cls.__index = cls
    for _, method in ipairs(methods) do
        cls[method] = function(self, ...)
            if getmetatable(self) ~= cls then
                error(("%s:%s: self must be a slidewin %s (call %s:%s(...) with ':'), got %s")
                    :format(kind, method, noun, kind, method,
                        type(self) == "string" and '"' .. self .. '"' or tostring(self)), 2)
            end
            local inner = self[1]
            return rethrow(pcall(inner[method], inner, ...))
        end
    end
    return function(make)
        return function(opts)
            local inner, err = rethrow(pcall(make, opts))
            if inner == nil then -- a constructor that answers nil, err
                return nil, err
            end
            return setmetatable({ inner }, cls)
        end
    end
end

-- Streaming aggregates.
local aggregate = class("agg", "aggregate", {
    "push", "push_at", "replace_last", "advance_to", "value", "value_at", "len", "is_full", "clear",
    "bands",
})
for _, name in ipairs {
    "mean", "sum", "max", "min", "variance", "stddev", "rate", "smoothed",
    "population_variance", "population_stddev", "wma", "quantile", "bollinger", "ema",
} do
    module[name] = aggregate(raw[name])
end
-- Zones of rules made at run time.
module.zone = class("zone", "zone", { "put", "get", "remove", "names", "stats" })(raw.zone)
-- Concurrency limits: slots in flight per key, node-wide.
module.concurrency = class("slots", "concurrency limit", {
    "enter", "leave", "inflight", "limit", "set_limit", "sweep", "stats",
})(raw.concurrency)
-- Controllers of limits that follow the load.
module.adaptive = class("ctl", "adaptive controller", {
    "update", "limit", "base_ms", "reason", "rate_per_second", "state", "restore",
})(raw.adaptive)
-- The header values of a limiter's answers (resty.slidewin.answer).
module.headers = class("headers", "headers object", { "set", "held", "policy", "ffi_handle", "sends" })(raw.headers)
module.queue_limit = class("q", "queue limit", { "update", "rate" })(raw.queue_limit)
-- Readers of language-model requests and answers (resty.slidewin.llm).
module.llm_request = class("req", "language-model request", {
    "model", "cap", "choices", "stream", "asks_usage", "prompt_bound", "rewrite",
})(raw.llm_request)
module.llm_weights = class("w", "weights", { "cost", "bound", "cap_within" })(raw.llm_weights)
module.llm_tokenizer = class("tok", "tokenizer", { "count", "size" })(raw.llm_tokenizer)
module.llm_events = class("events", "event stream", { "feed", "finish", "usage" })(raw.llm_events)
module.llm_usage = plain(raw.llm_usage)

return module
