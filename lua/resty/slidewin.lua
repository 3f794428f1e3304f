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
--   "nginx"  the zone a slidewin_zone of the native nginx module declared (conf.zone), made
--            in a worker; its windows are nginx.conf's (the store's declared_rule gives them).
--
-- The store seam: a store module does I/O only; every decision's arithmetic is the core's.
--   store_module.new(conf) -> store | nil, err        conf: the validated table below
--   store_module.declared_rule(opts) -> opts with windows | nil, err: optional, for a store
--   whose rule is declared elsewhere (nginx), which a config does not repeat
--   store_module.in_worker: true for a store that exists only in the workers (nginx); a
--   registry made in init_by_lua* makes its limiters in resty.slidewin.init_worker()
-- A store in this node's memory (local, shm, zone) holds a slidewin.limiter object, `store.lim`,
-- over one of the core's stores (slidewin::store::Store): the layer decides through it in one
-- FFI call that also renders the headers (resty.slidewin.answer); lim:set_limit / lim:limits
-- hold the live limits, lim:rule() the windows and limits a version stands for (a zone's rule
-- put again with other windows is a new version), lim:follow() moves to the rule in force.
-- A store elsewhere (redis, shdict) answers into the same buffer:
--   store:answer(headers_block, key, cost, commit, limits, in_hand_only) -> out, decided_locally
--                                      | nil, err    (a store failure: the layer counts it in
--                                                      metrics and applies conf.on_store_error)
--     out: resty.slidewin.answer's buffer, header values rendered with headers_block
--     limits: one limit per window of conf.windows (the live ones, or the call's)
--     in_hand_only: the fallback decides; answer only from what the store holds in this node
--     (leases), else nil
--     decided_locally: true when a remote store answered without a round trip (counted)
--   A store that decides per call writes store:decide(key, cost, commit, limits) ->
--   allowed, remaining, retry_after_ms (nil: never), reset_after_ms, decided_locally, window
--   (1-based: the refusing window with the longest wait, else the one with the least
--   remaining) | nil, err, and takes answer.answering(decide) as its store:answer.
--   store:refund(key, cost) -> true | nil, err
--   store:record(key, text) -> true | nil, err: optional, units admitted elsewhere ("AGE_MS:UNITS
--   ...", AGE_MS before now) recorded in every window of `key` (redis: the on_store_error =
--   "local" fallback's journal, replayed before the store decides again)
--   store:set_limits(limits), store:poll_limits(now_ms) -> limits | nil: optional, for stores
--   that share live limits between nodes (redis)
-- Either kind: store:keys() -> number | nil (nil: the store cannot tell);
-- store.counts_decisions: true when the store counts allowed/rejected itself (shm), and
-- store:stats() -> { keys, capacity, evictions, ... } then gives them.
--
-- Config: name (letters, digits, _ . -), algorithm ("log" | "buckets" | "counter"), limit,
-- window_ms, bucket_ms (buckets), max_limit (the most set_limit or a call may raise the limit
-- to; default limit), or instead windows = { { algorithm, limit, window_ms, bucket_ms,
-- max_limit, name }, ... } (a rule: up to 8 windows decided as one step, see docs/rules.md),
-- tiers ({ pro = { limit per window } }), max_keys (100000, local), max_key_bytes (64: longer
-- keys are kept as a digest of a seeded hash), size (shm, "10m"), store ("shm"), dict
-- (shdict), metrics_dict (a lua_shared_dict for node-wide metrics; default conf.dict; without
-- one, metrics are per worker), status (429), body, on_store_error ("allow" | "deny": the
-- answer while the store fails; one error.log line per error_log_interval_ms (10000) per
-- worker), redis, local_refusal_cache and lease (store "redis", see resty.slidewin.store.redis
-- and resty.slidewin.store.redis.lease),
-- key_var (an nginx variable's name: sw:enforce() with no key reads it, compiled, through
-- resty.slidewin.variable).
--
-- Limits that change: sw:set_limit(limit [, window]) (window: 1-based index or name; default
-- 1) changes a window's limit for every worker at once (store "redis": for every node within
-- a second) and keeps every key's window; sw:limits() lists the live limits. A call may bring
-- its own: sw:enforce(key, cost, { limit = N }) (one window), { limits = { ... } } or
-- { tier = "pro" }, each limit at most its window's max_limit.
--
-- Gateway switches (mode = "dry_run", exempt, headers, delay, refund_statuses, body_json):
-- modules of their own around enforce, see resty.slidewin.switch and docs/switches.md.

local answer = require "resty.slidewin.answer"
local config = require "resty.slidewin.config"
local fallback_limiter = require "resty.slidewin.fallback"
local metrics = require "resty.slidewin.metrics"
local phases = require "resty.slidewin.phases"
local switch = require "resty.slidewin.switch"
local slidewin = require "slidewin"
local var_get = require("resty.slidewin.variable").get

local answer_decide = answer.decide
local send = answer.send
local now_ms = slidewin.now_ms
local format = string.format
local huge = math.huge
local max = math.max
local ngx = ngx
local type = type

local _M = { _VERSION = "0.2.0" }
local mt = { __index = _M }

local show = config.show

-- How often a worker asks a store shared by several nodes for limits set elsewhere.
local POLL_LIMITS_MS = 1000

-- The live limits and the RateLimit-Policy they make, for decisions of `version`.
local function hold_limits(self, limits, version)
    self.live = limits
    self.policy_header = self.headers:set(version or -1, self.windows, limits)
end

-- The rule's windows (named), their limits and what is derived from them: the largest cost
-- that can fit, the policy of the limits and the tiers'.
local function hold_windows(self, windows, limits, version)
    local max_limit = 0
    for _, w in ipairs(windows) do
        max_limit = max(max_limit, w.max_limit)
    end
    self.windows, self.max_limit, self.tier_policy_headers = windows, max_limit, {}
    hold_limits(self, limits, version)
end

-- The rule the store's limiter decided with at `version` (a version it answered), held unless
-- it is the one held already. A zone's rule put again with other windows is a new version,
-- its windows named by the core (a window keeps its configured name while it keeps its length).
local function hold(self, version)
    if version == nil or version == self.rule_version then
        return
    end
    local rule = self.store.lim:rule()
    local limits = {}
    for i, w in ipairs(rule.windows) do
        limits[i] = w.limit
    end
    hold_windows(self, rule.windows, limits, rule.version)
    self.rule_version = rule.version
end

-- Holds the rule in force (which a decision follows by itself) before reading the windows for
-- a check made ahead of the decision.
local function follow(self)
    local lim = self.store.lim
    if lim then
        hold(self, lim:follow())
    end
end

-- The store module `name` names (resty.slidewin.store.<name>), or nil, err.
local function store_module(name)
    if type(name) ~= "string" or not name:find("^[%w_]+$") then
        return nil, "store must be a store module name, got " .. show(name)
    end
    local ok, module = pcall(require, "resty.slidewin.store." .. name)
    if not ok then
        return nil, "store must be a resty.slidewin.store module, got " .. show(name) .. ": " .. tostring(module)
    end
    return module
end
_M.store_module = store_module

-- `opts` with the windows of a store whose rule is declared elsewhere (store "nginx": its
-- slidewin_zone in nginx.conf), which a config does not repeat; other configs as they are.
local function with_declared_rule(opts)
    local module = type(opts) == "table" and store_module(opts.store)
    if not (module and module.declared_rule) then
        return opts
    end
    return module.declared_rule(opts)
end

-- Limiters of store shm whose evictions are watched (keys evicted with units in their
-- windows: a region too small for its keys), on one timer per worker for all of them; each
-- limiter object keeps what this worker told (lim:evictions_to_tell).
local watched, watching = {}, false
local WATCH_EVERY_S = 1

-- Tells error.log of each watched limiter's evictions, at most once per its
-- error_log_interval_ms: each eviction forgets a window.
local function tell_evictions(premature)
    if premature then
        return
    end
    for i = 1, #watched do
        local w = watched[i]
        local told = w.lim:evictions_to_tell(w.interval_ms)
        if told then
            ngx.log(ngx.WARN, "slidewin ", w.name, " is full: ", told,
                ': raise size or set full = "refuse"')
        end
    end
end

-- Starts this worker's watch (from init_worker(), else its first decision: timers cannot
-- start in init_by_lua*), counting from what the regions hold now.
local function watch_evictions()
    watching = true
    if #watched == 0 or not ngx.timer then
        return true -- nothing to watch, or Lua outside nginx
    end
    tell_evictions(false)
    local ok, err = ngx.timer.every(WATCH_EVERY_S, tell_evictions)
    if not ok then
        ngx.log(ngx.ERR, "slidewin: evictions go untold: ", err)
    end
    return true
end

-- A limiter from a config table, or nil, err (bad config, unknown store, missing dict).
function _M.new(opts)
    local conf, err = with_declared_rule(opts)
    if conf then
        conf, err = config.validate(conf)
    end
    if not conf then
        return nil, err
    end
    local hooks
    hooks, err = switch.configure(conf)
    if err then
        return nil, err
    end
    local headers
    headers, err = slidewin.headers(conf.headers or "draft")
    if not headers then
        return nil, err
    end
    local headers_sent, policy_sent = headers:sends()
    local module
    module, err = store_module(conf.store)
    if not module then
        return nil, err
    end
    local store
    store, err = module.new(conf)
    if not store then
        return nil, err
    end
    local local_fallback
    if conf.on_store_error == "local" then
        if store.lim then
            return nil, 'on_store_error = "local" is for stores elsewhere (redis); store '
                .. show(conf.store) .. " decides in this node already"
        end
        local_fallback, err = fallback_limiter.new(conf, store)
        if not local_fallback then
            return nil, err
        end
    end
    local counters
    counters, err = metrics.new(conf.name, conf.metrics_dict and "metrics_dict" or "dict",
        conf.metrics_dict or conf.dict, store)
    if not counters then
        return nil, err
    end
    counters.falls_back = local_fallback ~= nil
    if hooks then
        for _, outcome in ipairs(hooks.outcomes) do
            counters:show_outcome(outcome)
        end
        counters.delays = hooks.wait ~= nil
    end
    local self = setmetatable({
        conf = conf,
        name = conf.name,
        store = store,
        counters = counters,
        hooks = hooks,
        headers = headers,
        sends_headers = headers_sent,
        sends_policy_header = policy_sent,
        fail_open = conf.on_store_error == "allow",
        fallback = local_fallback,
        counts_in_layer = not store.counts_decisions, -- else the store counts (shm)
        -- What a committing decision in the FFI asks: a dry run's refusal is counted apart.
        commit_call = hooks and hooks.let_through and answer.DRY_RUN or true,
        errors_unlogged = 0,
        error_logged_at = -huge,
        polled_at = -huge,
    }, mt)
    if store.counts_decisions and store.lim then
        watched[#watched + 1] = { name = conf.name, lim = store.lim,
            interval_ms = conf.error_log_interval_ms }
        phases.on_init_worker("evictions", watch_evictions)
    end
    -- The limiter's block and the headers' for the FFI, compiled into the caller's trace.
    self.lim_block, self.headers_block = answer.handles(store.lim, headers)
    -- The configured rule (the store's, until a decision answers a version to hold).
    local configured = {}
    for i, w in ipairs(conf.windows) do
        configured[i] = w.limit
    end
    hold_windows(self, conf.windows, store.lim and store.lim:limits() or configured)
    return self
end

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a nil value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(format("sw:%s: self must be a resty.slidewin limiter (call sw:%s(...) with ':'), got %s",
            method, method, show(self)), 3)
    end
end

-- The limits `opts` asks for (nil: the live ones) and their RateLimit-Policy, or raises.
local function call_limits(self, opts, method, level)
    if opts == nil then
        return nil
    end
    if type(opts) ~= "table" then
        error(format("sw:%s: opts must be a table ({ limit = N }, { limits = {...} } or { tier = name }), got %s",
            method, show(opts)), level or 4)
    end
    follow(self)
    local tier = opts.tier
    if tier ~= nil then
        local limits = self.conf.tiers and self.conf.tiers[tier]
        if not limits then
            error(format("sw:%s: tier must be a tier of the config, got %s", method, show(tier)), level or 4)
        end
        local cached = self.tier_policy_headers[tier]
        if not cached then
            -- Checked with the config, but the rule in force may have other windows.
            local ok, err = config.check_limits(self.windows, limits, "tiers." .. tostring(tier))
            if not ok then
                error(format("sw:%s: %s", method, err), level or 4)
            end
            cached = self.headers:policy(self.windows, limits)
            self.tier_policy_headers[tier] = cached
        end
        return limits, cached
    end
    local limits = opts.limits
    if limits == nil and opts.limit ~= nil then
        if #self.windows ~= 1 then
            error(format("sw:%s: limit is for a rule of one window; this one has %d (give limits = {...})",
                method, #self.windows), level or 4)
        end
        limits = { opts.limit }
    end
    if limits == nil then
        return nil
    end
    local ok, err = config.check_limits(self.windows, limits, "limits")
    if not ok then
        error(format("sw:%s: %s", method, err), level or 4)
    end
    return limits, self.headers:policy(self.windows, limits)
end

-- Limits set on another node, at most once a second (stores shared by nodes).
local function poll_limits(self)
    local store = self.store
    if not store.poll_limits then
        return
    end
    local now = now_ms()
    if now - self.polled_at < POLL_LIMITS_MS then
        return
    end
    self.polled_at = now
    local limits = store:poll_limits(now)
    if limits then
        hold_limits(self, limits)
    end
end

-- The call's key: its own, else the value of conf.key_var (read through resty.slidewin.variable,
-- which the JIT compiles where ngx.var runs interpreted).
local function key_of(self, key, method, level)
    local name = self.conf.key_var
    if key ~= nil or name == nil then
        return key
    end
    key = var_get(name)
    if key == nil then
        error(format("sw:%s: no key given and key_var $%s has no value in this request", method, name),
            level or 4)
    end
    return key
end

local function check_key(key, method, level)
    local key_type = type(key)
    if not (key_type == "string" or key_type == "number" and key == key and key ~= huge and key ~= -huge) then
        error(format("sw:%s: key must be a string or a finite number, got %s", method, show(key)), level or 4)
    end
end

local function check_cost(self, cost, method, level)
    if cost == nil then
        return 1
    end
    if not (type(cost) == "number" and cost >= 0 and cost % 1 == 0) then
        error(format("sw:%s: cost must be a non-negative integer, got %s", method, show(cost)), level or 4)
    end
    if cost > self.max_limit then
        follow(self) -- the rule in force may let it fit
    end
    if cost > self.max_limit then
        -- Never fits, whatever the store or the limits: every store answers max_limit + 1 with
        -- the same refusal, and its arithmetic stays exact (1e17 would not).
        return self.max_limit + 1
    end
    return cost
end

-- The local fallback's decision, counted.
local function fall_back(self, key, cost, commit)
    self.counters:incr("fallback_decisions")
    return self.fallback:decide(key, cost, commit)
end

-- The store failed with `err`: the local fallback's answer when the limiter has one (counted
-- as a store error here: respond() sees no failure), else nil, err.
local function store_failed(self, err, key, cost, commit)
    local fallback = self.fallback
    if not fallback then
        return nil, err
    end
    self.counters:incr("store_errors")
    fallback:engage(err, now_ms())
    return fall_back(self, key, cost, commit)
end

-- The store's answer (resty.slidewin.answer's buffer, header values rendered) under the call's
-- limits, the policy to advertise and whether a remote store decided locally; nil, err when
-- the store fails. Raises on bad arguments, naming `method`.
local function decide(self, key, cost, commit, opts, method)
    key = key_of(self, key, method)
    check_key(key, method)
    cost = check_cost(self, cost, method)
    if not watching then
        watch_evictions()
    end
    local limits, call_policy_header = call_limits(self, opts, method)
    local block = self.lim_block
    if block then
        local out = answer_decide(block, self.headers_block, key, cost, commit and self.commit_call,
            limits)
        -- Rendered with the policy of the decision's version (the module took it from the
        -- limiter); the windows, limits and policy value held here follow it.
        hold(self, out.version)
        return out, call_policy_header or self.policy_header
    end
    poll_limits(self)
    -- While the fallback decides, units Redis granted before it failed are spent first (a
    -- store that answers from what it holds), then the node's own limits.
    local fallback = self.fallback
    local falling_back = fallback and fallback:active(now_ms())
    local out, decided_locally = self.store:answer(self.headers_block, key, cost, commit,
        limits or self.live, falling_back)
    if falling_back and not out then
        return fall_back(self, key, cost, commit)
    elseif not out then
        return store_failed(self, decided_locally, key, cost, commit)
    end
    if fallback and not falling_back then
        fallback:release()
    end
    return out, call_policy_header or self.policy_header, decided_locally
end

-- sw:answer(key, cost, commit, opts): the decision as resty.slidewin.answer's buffer (read it
-- before anything yields), the policy and decided_locally, with no count and no exit; nil, err
-- is a store failure. For switches that decide again.
function _M.answer(self, key, cost, commit, opts)
    check_self(self, "answer")
    return decide(self, key, cost, commit, opts, "answer")
end

-- sw:decide(key, cost, commit, opts): the store's answer (allowed, remaining, retry_after_ms,
-- reset_after_ms, decided_locally, window, policy), with no header, no count and no exit: for
-- modules that wrap enforce. nil, err is a store failure.
function _M.decide(self, key, cost, commit, opts)
    check_self(self, "decide")
    local out, policy_header, decided_locally = decide(self, key, cost, commit, opts, "decide")
    if not out then
        return nil, policy_header
    end
    return out.allowed ~= 0, out.remaining, out.has_retry ~= 0 and out.retry_after_ms or nil,
        out.reset_after_ms, decided_locally, out.window, policy_header
end

-- Answers a refusal (`out`; nil when the store failed) with conf.status and ends the request.
local function refuse(self, out, store_failed)
    local hooks = self.hooks
    if hooks and hooks.body then
        return hooks.body(self, out, store_failed)
    end
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

-- The one response path: the decision `out` and its RateLimit-Policy value (out nil: the store
-- failed, with that error in place of the value) counted and answered, each switch's hook
-- where it applies (`waited`: the decision after a wait, which does not wait again).
local function respond(self, key, cost, opts, out, policy_header, decided_locally, waited)
    local hooks = self.hooks
    local counters = self.counters
    if not out then
        local err = policy_header
        counters:incr("store_errors")
        log_store_error(self, err)
        if self.fail_open then
            return true
        end
        return refuse(self, nil, true)
    end
    if out.allowed ~= 0 then
        if self.counts_in_layer then
            counters:incr("allowed")
        end
        if self.sends_headers then
            send(out, self.sends_policy_header and policy_header, false)
        end
        if hooks and hooks.admitted then
            hooks.admitted(self, key, cost)
        end
        return true
    end
    if decided_locally then
        counters:incr("local_refusals")
    end
    if hooks then
        if hooks.wait and not waited and out.has_retry ~= 0 then
            local again, again_header, again_locally = hooks.wait(self, key, cost, opts, out.retry_after_ms)
            if again ~= nil or again_header ~= nil then
                -- The last decision, answered without waiting again.
                return respond(self, key, cost, opts, again, again_header, again_locally, true)
            end
        end
        if hooks.let_through then
            hooks.let_through(self)
            if self.sends_headers then
                send(out, self.sends_policy_header and policy_header, false)
            end
            return true
        end
    end
    if self.counts_in_layer then
        counters:incr("rejected")
    end
    if self.sends_headers then
        send(out, self.sends_policy_header and policy_header, true)
    end
    return refuse(self, out)
end

-- Admit (set headers, return true) or refuse (answer conf.status and end the request).
-- opts: nil, { limit = N }, { limits = { ... } } or { tier = "name" }.
function _M.enforce(self, key, cost, opts)
    check_self(self, "enforce")
    local hooks = self.hooks
    if hooks then
        -- Checked before any switch answers, as a decision would.
        key = self:check_call(key, cost, opts, "enforce", 3)
        if hooks.exempt and hooks.exempt(self, key) then
            self.counters:incr("exempt")
            return true
        end
    end
    local out, policy_header, decided_locally = decide(self, key, cost, true, opts, "enforce")
    return respond(self, key, cost, opts, out, policy_header, decided_locally)
end

-- The 1-based index of window `window` (an index or a window's name), or nil, err.
local function window_index(self, window)
    if window == nil then
        return 1
    end
    for i, w in ipairs(self.windows) do
        if window == i or window == w.name then
            return i
        end
    end
    return nil, "window must be a window's index (1 to " .. #self.windows .. ") or name, got " .. show(window)
end

-- sw:set_limit(limit [, window]): true, or nil, err. Every worker (and, store "redis", every
-- node) decides with it from its next request; every key keeps its window.
function _M.set_limit(self, limit, window)
    check_self(self, "set_limit")
    follow(self)
    local i, err = window_index(self, window)
    if not i then
        return nil, err
    end
    local w = self.windows[i]
    if not (config.positive_integer(limit) and limit <= w.max_limit) then
        return nil, format("limit must be a positive integer at most max_limit (%d), got %s", w.max_limit, show(limit))
    end
    local store = self.store
    if store.lim then
        store.lim:set_limit(limit, i)
        return true
    end
    if not store.set_limits then
        return nil, "store " .. show(self.conf.store) .. " keeps no live limits (use shm, local or redis)"
    end
    local limits = {}
    for j, l in ipairs(self.live) do
        limits[j] = l
    end
    limits[i] = limit
    local ok
    ok, err = store:set_limits(limits)
    if not ok then
        return nil, err
    end
    hold_limits(self, limits)
    return true
end

-- sw:refund(key, cost): gives `cost` back in every window of `key` (an admission whose work
-- was not done): true, or nil, err.
function _M.refund(self, key, cost)
    check_self(self, "refund")
    local store = self.store
    if store.lim then
        return store.lim:uncommit(key, cost)
    end
    return store:refund(key, cost)
end

-- sw:limits(): the live limits, one per window.
function _M.limits(self)
    check_self(self, "limits")
    follow(self)
    poll_limits(self)
    local limits = {}
    for i, l in ipairs(self.live) do
        limits[i] = l
    end
    return limits
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

-- {"now_ms": ..., "limiters": {"<name>": {"allowed", "rejected", "store_errors", "keys"}}},
-- and `members`' JSON members ('"adaptive":{...}') after them.
function _M.stats_json(limiters, members)
    local list = metrics_of("stats_json", limiters)
    if members ~= nil and type(members) ~= "table" then
        error(format("slidewin.stats_json: members must be an array of JSON members, got %s", show(members)), 2)
    end
    for i, member in ipairs(members or {}) do
        if type(member) ~= "string" then
            error(format("slidewin.stats_json: members[%d] must be a string (a JSON member), got %s", i, show(member)), 2)
        end
    end
    return metrics.json(list, now_ms(), members)
end

-- sw:check_call(key, cost, opts, method, level): raises what decide would for these
-- arguments, naming `method`, at `level` as error counts it from here (3: the caller of that
-- enforce); the key to decide on (key_var's value when no key is given).
function _M.check_call(self, key, cost, opts, method, level)
    key = key_of(self, key, method, level + 1)
    check_key(key, method, level + 1)
    check_cost(self, cost, method, level + 1)
    call_limits(self, opts, method, level + 1)
    return key
end

-- The one log-phase entry and the one init_worker entry of every kind (refunds, concurrency
-- slots, adaptive and queue limits): see resty.slidewin.phases.
_M.log, _M.init_worker = phases.log, phases.init_worker

return _M
