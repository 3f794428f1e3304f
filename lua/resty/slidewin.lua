-- resty.slidewin: sliding-window rate limiting for OpenResty/nginx, in the access phase.
--
--   local sw, err = require("resty.slidewin").new{
--       name = "api", algorithm = "log", limit = 30, window_ms = 5000,   -- store "shm"
--   }
--   -- access_by_lua_block:
--   sw:enforce(ngx.var.arg_user or ngx.var.remote_addr)
--
-- On admit, enforce sets the IETF draft headers and returns:
--   RateLimit-Policy: "api";q=30;w=5
--   RateLimit: "api";r=<remaining>;t=<seconds until the window is empty>
-- On refusal it answers `status` (429) with Retry-After (whole seconds, rounded up), the same
-- headers (t = seconds until admitted again) and `body`.
--
-- Stores (conf.store, module resty.slidewin.store.<name>):
--   "shm"    (default) one region of shared memory for all workers of this nginx, made in
--            init_by_lua*: every algorithm, exact like the in-process limiter; conf.size
--            ("10m") bounds its memory.
--   "local"  the Rust limiter inside each worker. State is PER WORKER: with N workers a client
--            may be admitted up to N x limit per window (each worker counts what it sees).
--   "shdict" one lua_shared_dict (conf.dict) shared by all workers of one nginx: the
--            sliding-window counter (algorithm "counter"), atomic incr, key TTL = 2 x window.
--
-- The store seam (for new stores, e.g. resty.slidewin.store.redis):
--   store_module.new(conf) -> store | nil, err        conf: the validated table below
--   store:incoming(key, cost, commit) -> allowed, remaining, retry_after_ms, reset_after_ms,
--                                        decided_locally
--                                      | nil, err    (a store failure: the layer counts it in
--                                                      metrics and applies conf.on_store_error)
--     retry_after_ms: 0 when allowed; nil when never (cost > limit)
--     decided_locally: true when a remote store answered without a round trip (counted)
--   store:uncommit(key, cost) -> true | nil, err
--   store:keys() -> number | nil                     (nil: the store cannot tell)
--   store.counts_decisions: true when the store counts allowed/rejected itself (shm), and
--   store:stats() -> { keys, capacity, evictions, ... } then gives them
--   store.lim: a slidewin.limiter object whose lim:decide(key, cost, commit) answers exactly
--   as store:incoming (local, shm): enforce calls it directly, one Lua call less per request
--
-- Config: name (letters, digits, _ . -), algorithm ("log" | "buckets" | "counter"), limit,
-- window_ms, bucket_ms (buckets), max_keys (100000, local), max_key_bytes (64: longer keys are
-- kept as a digest of a seeded hash), size (shm, "10m"), store ("shm"), dict (shdict),
-- metrics_dict (a lua_shared_dict for node-wide metrics; default conf.dict; without one,
-- metrics are per worker), status (429), body, on_store_error ("allow" | "deny": the answer
-- while the store fails; one error.log line per error_log_interval_ms (10000) per worker),
-- redis and local_refusal_cache (store "redis", see resty.slidewin.store.redis).

local metrics = require "resty.slidewin.metrics"
local now_ms = require("slidewin").now_ms

local ceil = math.ceil
local concat = table.concat
local format = string.format
local huge = math.huge
local ngx = ngx

local _M = { _VERSION = "0.1.0" }
local mt = { __index = _M }

local ALGORITHMS = { log = true, buckets = true, counter = true }
local ON_STORE_ERROR = { allow = true, deny = true }

local function show(v)
    if type(v) == "string" then
        return '"' .. v .. '"'
    end
    return tostring(v)
end

local function invalid(field, expected, v)
    return nil, field .. " must be " .. expected .. ", got " .. show(v)
end

-- A whole number as header digits: concatenation writes 1e14 and above in exponent form
-- ("1e+14"), which is no structured-field integer.
local function digits(n)
    if n < 1e14 then
        return n
    end
    return format("%d", n)
end

local function positive_integer(v)
    return type(v) == "number" and v >= 1 and v % 1 == 0 and v < 2 ^ 53
end

-- A copy of opts with defaults filled in, or nil, err naming the field and the value.
local function validate(opts)
    if type(opts) ~= "table" then
        return invalid("config", "a table", opts)
    end
    local conf = {}
    for k, v in pairs(opts) do
        conf[k] = v
    end
    conf.algorithm = conf.algorithm or "log"
    conf.store = conf.store or "shm"
    conf.max_keys = conf.max_keys or 100000
    conf.max_key_bytes = conf.max_key_bytes or 64
    conf.status = conf.status or 429
    conf.body = conf.body or "Too Many Requests\n"
    conf.on_store_error = conf.on_store_error or "allow"
    conf.error_log_interval_ms = conf.error_log_interval_ms or 10000

    if type(conf.name) ~= "string" or not conf.name:find("^[%w_.-]+$") then
        return invalid("name", "a string of letters, digits, _ . -", conf.name)
    end
    if not ALGORITHMS[conf.algorithm] then
        return invalid("algorithm", '"log", "buckets" or "counter"', conf.algorithm)
    end
    for _, field in ipairs { "limit", "window_ms", "max_keys", "max_key_bytes" } do
        if not positive_integer(conf[field]) then
            return invalid(field, "a positive integer", conf[field])
        end
    end
    if conf.algorithm == "buckets" and not positive_integer(conf.bucket_ms) then
        return invalid("bucket_ms", "a positive integer", conf.bucket_ms)
    end
    if type(conf.store) ~= "string" or not conf.store:find("^[%w_]+$") then
        return invalid("store", "a store module name", conf.store)
    end
    if not (positive_integer(conf.status) and conf.status >= 400 and conf.status <= 599) then
        return invalid("status", "an HTTP error status", conf.status)
    end
    if type(conf.body) ~= "string" then
        return invalid("body", "a string", conf.body)
    end
    if not ON_STORE_ERROR[conf.on_store_error] then
        return invalid("on_store_error", '"allow" or "deny"', conf.on_store_error)
    end
    if not positive_integer(conf.error_log_interval_ms) then
        return invalid("error_log_interval_ms", "a positive integer", conf.error_log_interval_ms)
    end
    if conf.local_refusal_cache ~= nil and type(conf.local_refusal_cache) ~= "boolean" then
        return invalid("local_refusal_cache", "a boolean", conf.local_refusal_cache)
    end
    return conf
end

-- A limiter from a config table, or nil, err (bad config, unknown store, missing dict).
function _M.new(opts)
    local conf, err = validate(opts)
    if not conf then
        return nil, err
    end
    local ok, store_module = pcall(require, "resty.slidewin.store." .. conf.store)
    if not ok then
        return nil, "store must be a resty.slidewin.store module, got " .. show(conf.store)
            .. ": " .. tostring(store_module)
    end
    local store
    store, err = store_module.new(conf)
    if not store then
        return nil, err
    end
    local counters
    counters, err = metrics.new(conf.name, conf.metrics_dict and "metrics_dict" or "dict",
        conf.metrics_dict or conf.dict, store)
    if not counters then
        return nil, err
    end
    return setmetatable({
        conf = conf,
        name = conf.name,
        store = store,
        counters = counters,
        policy = concat { '"', conf.name, '";q=', digits(conf.limit), ";w=", digits(ceil(conf.window_ms / 1000)) },
        fail_open = conf.on_store_error == "allow",
        counts_in_layer = not store.counts_decisions, -- else the store counts (shm)
        decide = store.lim and store.lim.decide or store.incoming,
        decider = store.lim or store,
        rate_prefix = '"' .. conf.name .. '";r=',
        errors_unlogged = 0,
        error_logged_at = -math.huge,
    }, mt)
end

local function seconds(ms)
    return digits(ceil(ms / 1000))
end

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a nil value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(format("sw:%s: self must be a resty.slidewin limiter (call sw:%s(...) with ':'), got %s",
            method, method, show(self)), 3)
    end
end

local function set_headers(self, remaining, t_ms)
    local header = ngx.header
    header["RateLimit-Policy"] = self.policy
    header["RateLimit"] = self.rate_prefix .. digits(remaining) .. ";t=" .. seconds(t_ms)
end

local function refuse(self)
    local conf = self.conf
    ngx.status = conf.status
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(conf.body)
    return ngx.exit(conf.status)
end

-- One error.log line per error_log_interval_ms (per worker) while the store fails, not one per
-- request: an outage at thousands of requests per second must not flood the log.
local function log_store_error(self, err)
    local unlogged = self.errors_unlogged + 1
    local now = now_ms()
    if now - self.error_logged_at < self.conf.error_log_interval_ms then
        self.errors_unlogged = unlogged
        return
    end
    ngx.log(ngx.ERR, "slidewin ", self.name, ": store error: ", err, " (", unlogged,
        " request(s) answered by on_store_error=", self.conf.on_store_error, " since the last line)")
    self.error_logged_at, self.errors_unlogged = now, 0
end

-- Admit (set headers, return true) or refuse (answer conf.status and end the request).
function _M.enforce(self, key, cost)
    check_self(self, "enforce")
    local key_type = type(key)
    if not (key_type == "string" or key_type == "number" and key == key and key ~= huge and key ~= -huge) then
        error("sw:enforce: key must be a string or a finite number, got " .. show(key), 2)
    end
    if cost == nil then
        cost = 1
    elseif not (type(cost) == "number" and cost >= 0 and cost % 1 == 0) then
        error("sw:enforce: cost must be a non-negative integer, got " .. show(cost), 2)
    elseif cost > self.conf.limit then
        -- Never fits, whatever the store: every store answers limit + 1 with the same refusal,
        -- and its arithmetic stays exact (1e17 would not).
        cost = self.conf.limit + 1
    end
    local allowed, remaining, retry_after_ms, reset_after_ms, decided_locally =
        self.decide(self.decider, key, cost, true)
    local counters = self.counters
    if allowed == nil then
        counters:incr("store_errors")
        log_store_error(self, remaining)
        if self.fail_open then
            return true
        end
        return refuse(self)
    end
    if allowed then
        if self.counts_in_layer then
            counters:incr("allowed")
        end
        set_headers(self, remaining, reset_after_ms)
        return true
    end
    if self.counts_in_layer then
        counters:incr("rejected")
    end
    if decided_locally then
        counters:incr("local_refusals")
    end
    if retry_after_ms then
        ngx.header["Retry-After"] = seconds(retry_after_ms)
        set_headers(self, remaining, retry_after_ms)
    else
        set_headers(self, remaining, reset_after_ms)
    end
    return refuse(self)
end

-- { allowed, rejected, store_errors, local_refusals, keys } for this limiter (node-wide with a metrics dict).
function _M.stats(self)
    check_self(self, "stats")
    return self.counters:snapshot()
end

local function metrics_of(function_name, limiters)
    if type(limiters) ~= "table" then
        error(format("slidewin.%s: limiters must be an array of limiters, got %s", function_name, show(limiters)), 3)
    end
    local list = {}
    for i, sw in ipairs(limiters) do
        if getmetatable(sw) ~= mt then
            error(format("slidewin.%s: limiters[%d] must be a resty.slidewin limiter, got %s",
                function_name, i, show(sw)), 3)
        end
        list[i] = sw.counters
    end
    return list
end

-- Prometheus text for this limiter.
function _M.metrics(self)
    check_self(self, "metrics")
    return metrics.render { self.counters }
end

-- Prometheus text for several limiters: slidewin.metrics_text{ api, api_shared }.
function _M.metrics_text(limiters)
    return metrics.render(metrics_of("metrics_text", limiters))
end

-- {"now_ms": ..., "limiters": {"<name>": {"allowed", "rejected", "store_errors", "keys"}}}.
function _M.stats_json(limiters)
    return metrics.json(metrics_of("stats_json", limiters), now_ms())
end

return _M
