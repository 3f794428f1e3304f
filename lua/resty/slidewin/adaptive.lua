-- resty.slidewin.adaptive: a concurrency limit (resty.slidewin.concurrency) moved every interval
-- by what the upstream's answers showed (slidewin.adaptive: loss, backpressure, latency against
-- its no-load time).
--
--   lua_shared_dict slidewin_adaptive 1m;
--   init_by_lua_block {
--       local concurrency = require "resty.slidewin.concurrency"
--       local slots = assert(concurrency.new{ name = "api", limit = 20, max_limit = 1000 })
--       assert(require("resty.slidewin.adaptive").new{ name = "api", concurrency = slots,
--           dict = "slidewin_adaptive", min_limit = 2, max_limit = 1000, interval_ms = 1000 })
--   }
--   init_worker_by_lua_block { assert(require("resty.slidewin").init_worker()) }
--   log_by_lua_block { require("resty.slidewin").log() }                -- http level
--   location /api/ { access_by_lua_block { require("resty.slidewin.adaptive").get("api"):enter("all") } }
--
-- Every request admitted through ctl:enter is counted in the log phase, in the dict, by every
-- worker: answered well (with its latency: $upstream_response_time, or $request_time when no
-- upstream answered), lost (502, 504, 499: the client gave up) or pushed back (the upstream's
-- 503 or 429). One worker at a time (a lease in the dict, taken over within 3 intervals when
-- it dies) takes the interval's counts, resumes the controller from its state in the dict,
-- updates it and sets the concurrency limit for every worker.
-- (adaptive.start and adaptive.log are the older names of init_worker and log: see
-- resty.slidewin.phases.)

local slidewin = require "slidewin"
local concurrency = require "resty.slidewin.concurrency"
local controllers = require "resty.slidewin.controllers"
local json = require "resty.slidewin.json"
local live_limit = require "resty.slidewin.live_limit"
local phases = require "resty.slidewin.phases"
local prometheus = require "resty.slidewin.prometheus"
local registry = require "resty.slidewin.registry"

local ngx = ngx
local pcall, type, tostring, tonumber, setmetatable, getmetatable, ipairs, pairs =
    pcall, type, tostring, tonumber, setmetatable, getmetatable, ipairs, pairs
local now_ms, upstream_time_ms, latency_bucket = slidewin.now_ms, slidewin.upstream_time_ms,
    slidewin.latency_bucket
local status_class, loss_ratio, goodput_rps = slidewin.status_class, slidewin.loss_ratio, slidewin.goodput_rps
local BUCKETS = slidewin.latency_buckets
local CTX = "slidewin_adaptive"

local limits = registry.kind("adaptive limit")

-- The init_worker part (resty.slidewin.phases): every worker runs a timer per adaptive limit
-- (only the leader updates).
local function start()
    return controllers.start(limits)
end

local _M = {}
local mt = { __index = _M }

local function incr(dict, key, by)
    local _, err = dict:incr(key, by, 0)
    if err then
        ngx.log(ngx.WARN, "slidewin adaptive: ", key, ": ", err)
    end
end

-- The log phase's part (resty.slidewin.phases): counts every request the adaptive limits
-- admitted (its slots go back after, in concurrency's part).
local function count()
    local ctx = ngx.ctx
    local seen = ctx[CTX]
    if seen then
        ctx[CTX] = nil
        local var = ngx.var
        -- "ok", "loss" or "backpressure", by the status sent and the last upstream tried.
        local class = status_class(ngx.status, var.upstream_status)
        for i = 1, #seen, 2 do
            local self, bound = seen[i], seen[i + 1]
            local dict, key = self.dict, self.key
            incr(dict, key[class], 1)
            if class == "ok" then
                local ms = upstream_time_ms(var.upstream_response_time)
                    or upstream_time_ms(var.request_time) or 0
                incr(dict, self.buckets[latency_bucket(ms)], 1)
            end
            if bound then
                incr(dict, key.bound, 1)
            end
        end
    end
end

-- An adaptive limit, or nil, err. Made in init_by_lua*, beside its concurrency limit.
-- opts: name, concurrency (a resty.slidewin.concurrency limit, or its name), dict (a
-- lua_shared_dict), initial_limit (the concurrency limit's), min_limit, max_limit (the
-- concurrency limit's max_limit), interval_ms (1000), latency_target_ms (p95, optional),
-- rate_limiter (optional: a resty.slidewin limiter, store shm or redis, whose window
-- rate_window, default 1, gets the rate the limit lets through at the no-load latency,
-- limit / base x window_ms, each interval: Little's law).
function _M.new(opts)
    if type(opts) ~= "table" then
        return nil, "opts must be a table, got " .. tostring(opts)
    end
    if ngx.get_phase() ~= "init" then
        return nil, "an adaptive limit must be made in init_by_lua*, not in " .. ngx.get_phase()
    end
    if type(opts.name) ~= "string" then
        return nil, "name must be a string, got " .. tostring(opts.name)
    end
    local slots = opts.concurrency
    if type(slots) == "string" then
        local err
        slots, err = concurrency.get(slots)
        if not slots then
            return nil, "concurrency: " .. err
        end
    elseif getmetatable(slots) == nil or slots.enter ~= concurrency.enter then
        return nil, "concurrency must be a resty.slidewin.concurrency limit or its name, got a "
            .. type(slots)
    end
    local dict = type(opts.dict) == "string" and ngx.shared[opts.dict]
    if not dict then
        return nil, "dict must name a lua_shared_dict, got " .. tostring(opts.dict)
    end
    local stats = slots:stats()
    local settings = {
        initial_limit = opts.initial_limit or stats.limit, min_limit = opts.min_limit or 1,
        max_limit = opts.max_limit or stats.max_limit, interval_ms = opts.interval_ms or 1000,
        latency_target_ms = opts.latency_target_ms,
    }
    local ok, ctl = pcall(slidewin.adaptive, settings)
    if not ok then
        return nil, ctl
    end
    if settings.max_limit > stats.max_limit then
        return nil, "max_limit must be at most the concurrency limit's max_limit ("
            .. stats.max_limit .. "), got " .. tostring(opts.max_limit)
    end
    local rate
    if opts.rate_limiter ~= nil then
        local err
        rate, err = live_limit.new("rate_limiter", opts.rate_limiter, opts.rate_window)
        if not rate then
            return nil, err
        end
    end
    local prefix = opts.name .. ":"
    local self = setmetatable({
        name = opts.name, slots = slots, dict = dict, ctl = ctl, prefix = prefix, rate = rate,
        settings = settings,
        interval_ms = settings.interval_ms,
        key = {
            ok = prefix .. "ok", loss = prefix .. "loss", backpressure = prefix .. "backpressure",
            bound = prefix .. "bound", leader = prefix .. "leader", last_ms = prefix .. "last_ms",
            state = prefix .. "state", refused = prefix .. "refused", stats = prefix .. "stats",
            admitted = prefix .. "admitted",
        },
        buckets = {},
    }, mt)
    for i = 1, BUCKETS do
        self.buckets[i] = prefix .. "h" .. i
    end
    limits:add(self)
    phases.on_log("adaptive", count)
    phases.on_init_worker("adaptive limits", start)
    return self
end

-- The adaptive limit called `name`, or nil, err.
function _M.get(name)
    return limits:get(name)
end

-- Takes a slot of `key` from the concurrency limit (or refuses the request, as its enter
-- does) and marks the request to be counted in the log phase.
function _M.enter(self, key)
    local _, inflight, limit = self.slots:enter(key)
    local ctx = ngx.ctx
    local seen = ctx[CTX]
    if not seen then
        seen = {}
        ctx[CTX] = seen
    end
    seen[#seen + 1] = self
    seen[#seen + 1] = inflight >= limit
    return true, inflight, limit
end

-- Takes a counter's value out of the dict (what is added meanwhile stays for the next take).
local function take(dict, key)
    local v = dict:get(key) or 0
    if v > 0 then
        dict:incr(key, -v, 0)
    end
    return v
end

-- How much a running total (the concurrency region's) grew since the last interval.
local function since_last(dict, key, total)
    local before = dict:get(key) or total
    dict:set(key, total)
    return total - before
end

-- True when this worker holds the lease for the next interval.
local function lead(self)
    local dict, key, pid = self.dict, self.key.leader, ngx.worker.pid()
    local lease_s = 3 * self.interval_ms / 1000
    if dict:add(key, pid, lease_s) then
        return true
    end
    if dict:get(key) == pid then
        dict:set(key, pid, lease_s)
        return true
    end
    return false
end

-- A controller with the settings, starting at `limit` (within its bounds).
local function fresh(self, limit)
    local s = self.settings
    local start = {}
    for k, v in pairs(s) do
        start[k] = v
    end
    start.initial_limit = math.min(s.max_limit, math.max(s.min_limit, limit))
    return slidewin.adaptive(start)
end

-- Starts the controller afresh (as a new nginx with an empty dict would): the limit back to
-- initial_limit, what it learned of the upstream forgotten. For an upstream replaced by a
-- different one; any worker can call it.
function _M.reset(self)
    self.dict:delete(self.key.state)
    self.slots:set_limit(self.settings.initial_limit)
end

-- One interval: the leader's update. Returns the new limit, or nil when another worker leads.
function _M.tick(self)
    if not lead(self) then
        return nil
    end
    local dict, key = self.dict, self.key
    local now = now_ms()
    local last = dict:get(key.last_ms) or now
    dict:set(key.last_ms, now)
    local counts = {}
    for i = 1, BUCKETS do
        counts[i] = take(dict, self.buckets[i])
    end
    local stats = self.slots:stats()
    local ok = take(dict, key.ok)
    local sample = {
        ok = ok, loss = take(dict, key.loss), backpressure = take(dict, key.backpressure),
        refused = since_last(dict, key.refused, stats.refused),
        admitted = since_last(dict, key.admitted, stats.admitted),
        elapsed_ms = now - last, counts = counts,
    }
    -- Admissions into the last slot: how many the limit nearly refused (pinned when many).
    sample.at_limit = take(dict, key.bound)
    local state = dict:get(key.state)
    if not state then
        -- The first interval, or after a reset: this worker may have led before, and its
        -- controller is not the one in force.
        self.ctl = fresh(self, self.settings.initial_limit)
    elseif not pcall(self.ctl.restore, self.ctl, state) then
        -- A state another version of slidewin wrote (the dict outlives a binary upgrade): a
        -- fresh controller starts at the live limit, and its state replaces it.
        ngx.log(ngx.WARN, "slidewin adaptive ", self.name, ": the saved state does not fit, starting afresh")
        self.ctl = fresh(self, self.slots:limit())
    end
    local limit, reason, p50, p95, p99 = self.ctl:update(sample)
    dict:set(key.state, self.ctl:state())
    self.slots:set_limit(limit)
    local per_second = self.rate and self.ctl:rate_per_second()
    if per_second then
        local ok, err = self.rate:set_rate(per_second)
        if not ok then
            ngx.log(ngx.ERR, "slidewin adaptive ", self.name, ": rate_limiter: ", err)
        end
    end
    dict:set(key.stats, table.concat({
        limit, reason, p50 or -1, p95 or -1, p99 or -1,
        loss_ratio(ok, sample.loss, sample.backpressure), goodput_rps(ok, sample.elapsed_ms),
        sample.refused, self.ctl:base_ms() or -1,
    }, " "))
    return limit
end

local function number(v)
    v = tonumber(v)
    return v and v >= 0 and v or nil
end

-- { limit, reason, inflight, leader (a pid), p50_ms, p95_ms, p99_ms, base_ms, loss_ratio,
-- goodput_rps, refused } of the last interval (limit, inflight and leader before the first).
function _M.stats(self)
    local s = self.slots:stats()
    local out = { limit = s.limit, inflight = s.inflight, reason = "hold",
        leader = self.dict:get(self.key.leader) }
    local text = self.dict:get(self.key.stats)
    if text then
        local f = {}
        for word in text:gmatch("%S+") do
            f[#f + 1] = word
        end
        out.reason, out.p50_ms, out.p95_ms, out.p99_ms = f[2], number(f[3]), number(f[4]), number(f[5])
        out.loss_ratio, out.goodput_rps, out.refused = number(f[6]), number(f[7]), number(f[8])
        out.base_ms = number(f[9])
    end
    return out
end

local STATS_FIELDS = { "limit", "inflight", "reason", "leader", "p50_ms", "p95_ms", "p99_ms", "base_ms",
    "loss_ratio", "goodput_rps", "refused" }

-- The stats as a resty.slidewin.json object (the fields it has, in STATS_FIELDS' order).
function _M.json_stats(self)
    local s, fields = self:stats(), {}
    for _, field in ipairs(STATS_FIELDS) do
        if s[field] ~= nil then
            fields[#fields + 1], fields[#fields + 2] = field, s[field]
        end
    end
    return json.object(fields)
end

-- Every adaptive limit's stats as JSON: {"<name>":{"limit":..,...}}.
function _M.json()
    return json.encode(registry.stats_of("adaptive limit") or json.object {})
end

local LIMIT = prometheus.family("slidewin_adaptive_limit", "gauge", "The adaptive concurrency limit now.")
local INFLIGHT = prometheus.family("slidewin_adaptive_inflight", "gauge",
    "Requests in flight under the adaptive limit.")
local LATENCY = prometheus.family("slidewin_adaptive_latency_seconds", "gauge",
    "Latency quantiles of the last interval's good answers.")
local LOSS_RATIO = prometheus.family("slidewin_adaptive_loss_ratio", "gauge",
    "Lost and pushed-back answers of the last interval, over all.")
local GOODPUT = prometheus.family("slidewin_adaptive_goodput_requests_per_second", "gauge",
    "Good answers per second, last interval.")

-- Adds this limit's samples to `out` (a resty.slidewin.prometheus exposition):
-- slidewin_adaptive_limit, _inflight, _latency_seconds{quantile} (the last interval's;
-- Prometheus' base unit), _loss_ratio and _goodput_requests_per_second.
function _M.write_metrics(self, out)
    local s = self:stats()
    local label = { "limiter", self.name }
    out:sample(LIMIT, label, s.limit)
    out:sample(INFLIGHT, label, s.inflight)
    for _, q in ipairs { { "0.5", s.p50_ms }, { "0.95", s.p95_ms }, { "0.99", s.p99_ms } } do
        if q[2] then
            out:sample(LATENCY, { "limiter", self.name, "quantile", q[1] }, q[2] / 1000, nil, "%.4f")
        end
    end
    out:sample(LOSS_RATIO, label, s.loss_ratio or 0, nil, "%.4f")
    out:sample(GOODPUT, label, s.goodput_rps or 0, nil, "%.1f")
end

-- Prometheus text of every adaptive limit.
function _M.metrics()
    return registry.metrics_of("adaptive limit")
end

_M.log, _M.start = phases.log, phases.init_worker

return _M
