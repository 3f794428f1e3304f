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
-- A store in this node's memory (local, shm, zone, nginx) is over a slidewin.limiter object (one
-- of the core's stores, slidewin::store::Store) and declares so with its methods (from
-- resty.slidewin.store.local): store:ffi_handle(), the block the layer decides through in one
-- FFI call that also renders the headers (resty.slidewin.answer); store:limits() and
-- store:set_limit(limit, window) the live limits; store:follow() -> the version of the rule in
-- force; store:rule() the windows and limits that version stands for (a zone's rule put again
-- with other windows is a new version); store:window(key), store:walk(n) / store:step(walk,
-- budget_us) a key's windows and the top keys; store:evictions_to_tell(interval_ms).
-- A store elsewhere (redis, shdict) answers into the same buffer:
--   store:answer(headers_block, key, cost, commit, limits, in_hand_only, reserving)
--                                      -> out, decided_locally
--                                      | nil, err    (a store failure: the layer counts it in
--                                                      metrics and applies conf.on_store_error)
--     out: resty.slidewin.answer's buffer, header values rendered with headers_block
--     limits: one limit per window of conf.windows (the live ones, or the call's)
--     in_hand_only: the fallback decides; answer only from what the store holds in this node
--     (leases), else nil
--     reserving: true for sw:reserve, whose admitted answer needs the stamp it was recorded at
--     (a store that spends leases asks Redis per request then)
--     decided_locally: true when a remote store answered without a round trip (counted)
--   A store that decides per call writes store:decide(key, cost, commit, limits) ->
--   allowed, remaining, retry_after_ms (nil: never), reset_after_ms, decided_locally, window
--   (1-based: the refusing window with the longest wait, else the one with the least
--   remaining) | nil, err, and takes answer.answering(decide) as its store:answer.
--   store:record(key, text) -> true | nil, err: optional, units admitted elsewhere ("AGE_MS:UNITS
--   ...", AGE_MS before now) recorded in every window of `key` (redis: the on_store_error =
--   "local" fallback's journal, replayed before the store decides again)
--   store:set_limits(limits), store:poll_limits(now_ms) -> limits | nil: optional, for stores
--   that share live limits between nodes (redis)
-- Either kind: store:refund(key, cost) -> true | nil, err (store.refunds_at_once: true when
-- it needs no I/O, so the log phase gives back at once rather than in a timer;
-- a remote store's decide also returns, after window, the stamp an admitted check recorded
-- its cost at (stamp_ms, for sw:reserve);
-- store.refunds_at_stamp: true when store:refund(key, cost, stamp_ms) gives back cost recorded
-- at a reservation's stamp, which sw:reserve needs; store.owes: true when
-- store:refund(key, cost, stamp_ms, true) records cost at the stamp, fitting or not: a debt,
-- which sw:settle(ticket, actual, "debt") needs);
-- store:keys() -> number | nil (nil: the store cannot tell);
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
-- A limiter's parts, a module each: resty.slidewin.held (what it holds of its rule between
-- decisions), resty.slidewin.respond (the one response path), resty.slidewin.evictions (the
-- warn line of a full zone).
--
-- Gateway switches (mode = "dry_run", exempt, headers, delay, refund_statuses, body_json):
-- modules of their own around enforce, see resty.slidewin.switch and docs/switches.md.

local answer = require "resty.slidewin.answer"
local config = require "resty.slidewin.config"
local evictions = require "resty.slidewin.evictions"
local fallback_limiter = require "resty.slidewin.fallback"
local held = require "resty.slidewin.held"
local metrics = require "resty.slidewin.metrics"
local phases = require "resty.slidewin.phases"
local respond = require "resty.slidewin.respond"
local switch = require "resty.slidewin.switch"
local slidewin = require "slidewin"
local var_get = require("resty.slidewin.variable").get

local answer_decide = answer.decide
local now_ms = slidewin.now_ms
local format = string.format
local huge = math.huge
local type = type
local call_limits, follow, hold, poll_limits = held.call_limits, held.follow, held.hold, held.poll
local start_watching = evictions.start

local _M = { _VERSION = "0.2.0" }
local mt = { __index = _M }

local show = config.show

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
        if store.ffi_handle then
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
    if store.counts_decisions and store.evictions_to_tell then
        evictions.watch(conf.name, store, conf.error_log_interval_ms)
    end
    -- The limiter's block and the headers' for the FFI, compiled into the caller's trace.
    self.lim_block, self.headers_block = answer.handles(store, headers)
    -- The configured rule (the store's, until a decision answers a version to hold).
    local configured = {}
    for i, w in ipairs(conf.windows) do
        configured[i] = w.limit
    end
    held.windows(self, conf.windows, store.limits and store:limits() or configured)
    return self
end

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a nil value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(format("sw:%s: self must be a resty.slidewin limiter (call sw:%s(...) with ':'), got %s",
            method, method, show(self)), 3)
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
    start_watching()
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
        limits or self.live, falling_back, method == "reserve")
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

-- sw:set_limit(limit [, window]): true, or nil, err. Every worker (and, store "redis", every
-- node) decides with it from its next request; every key keeps its window.
function _M.set_limit(self, limit, window)
    check_self(self, "set_limit")
    follow(self)
    local i, err = held.window_index(self, window)
    if not i then
        return nil, err
    end
    local w = self.windows[i]
    if not (config.positive_integer(limit) and limit <= w.max_limit) then
        return nil, format("limit must be a positive integer at most max_limit (%d), got %s", w.max_limit, show(limit))
    end
    local store = self.store
    if store.set_limit then
        return store:set_limit(limit, i)
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
    held.limits(self, limits)
    return true
end

-- sw:reserve(key, cost, opts): enforce for a cost known only after the answer (tokens,
-- bytes): admits (headers set) and returns a ticket for sw:settle, or refuses as enforce
-- does (the request ends). The ticket is { key, cost, stamp_ms }: stamp_ms is when the cost
-- was recorded (nil when nothing was: a store failure let the request through). Stores in
-- this node's memory (local, shm, zone, nginx) and store redis, and limiters without switches.
function _M.reserve(self, key, cost, opts)
    check_self(self, "reserve")
    if not self.store.refunds_at_stamp then
        error(format("sw:reserve: store %s cannot give cost back at a reservation's stamp "
            .. "(stores local, shm, zone, nginx and redis can)", show(self.conf.store)), 2)
    end
    if self.hooks then
        error("sw:reserve: a limiter with switches (mode, exempt, headers, delay, ...) cannot reserve", 2)
    end
    key = key_of(self, key, "reserve", 3)
    local out, policy_header, decided_locally = decide(self, key, cost, true, opts, "reserve")
    -- Read before respond, which may reuse the buffer. NaN: a decision with no stamp.
    local stamp_ms = out and out.allowed ~= 0 and out.stamp_ms or nil
    if stamp_ms ~= stamp_ms then
        stamp_ms = nil
    end
    respond(self, key, cost, opts, out, policy_header, decided_locally)
    cost = stamp_ms and (cost or 1) or 0
    if cost > 0 then
        self.counters:add("reserved_units", cost)
    end
    return { key = key, cost = cost, stamp_ms = stamp_ms }
end

-- The phases where a request may open a cosocket (ngx_lua): a store that does I/O gives back
-- from a timer in the others (the log phase, where a reservation settles).
local COSOCKETS = { rewrite = true, access = true, content = true, timer = true }

-- store:refund(key, cost, stamp_ms, owe): `cost` given back (or, with `owe`, owed at the
-- stamp), counted in counter `counted` (optional) when it changed the windows: true, or
-- nil, err.
local function amend_now(self, key, cost, stamp_ms, counted, owe)
    local ok, err = self.store:refund(key, cost, stamp_ms, owe)
    if ok and counted then
        self.counters:add(counted, cost)
    end
    return ok, err
end

local function amend_in_timer(premature, self, key, cost, stamp_ms, counted, owe)
    if premature then
        return
    end
    local ok, err = amend_now(self, key, cost, stamp_ms, counted, owe)
    if not ok then
        ngx.log(ngx.ERR, "slidewin ", self.name, ": ", owe and "debt" or "refund", " failed: ", err)
    end
end

-- amend_now at once, or, for a store that does I/O (not refunds_at_once) in a phase
-- without cosockets, from a zero-delay timer that logs a failure: true (done, or on its
-- way), or nil, err.
local function amend(self, key, cost, stamp_ms, counted, owe)
    if self.store.refunds_at_once or COSOCKETS[ngx.get_phase()] then
        return amend_now(self, key, cost, stamp_ms, counted, owe)
    end
    local ok, err = ngx.timer.at(0, amend_in_timer, self, key, cost, stamp_ms, counted, owe)
    if not ok then
        return nil, "cannot start the timer that gives back: " .. tostring(err)
    end
    return true
end

-- What sw:settle does with use above a reservation (`above`): raise (nil), count it as over
-- ("clamp"), or record it at the stamp as a debt ("debt").
local ABOVE = { clamp = true, debt = true }

-- sw:settle(ticket, actual [, above]): the reserved call used `actual`: what it did not use
-- goes back at the reservation's stamp, so the windows hold `actual` where the call was
-- admitted (a refund now would take later calls' cost and let a window go over). A ticket
-- settled twice counts once, and one of a call a store failure let through (no stamp:
-- nothing recorded) changes nothing. `actual` nil: the call's use is unknown (its answer
-- reported none), the reservation stays whole (counted as kept). An actual above the cost
-- reserved raises, unless `above` says: "clamp", the reservation stays whole and the excess
-- is counted as over (the work was meant to be clamped to it: an output cap); "debt", the
-- excess is recorded at the stamp whether it fits or not (counted as owed): the windows
-- refuse until it leaves them (each counts at most twice its max limit; a store that
-- cannot, store.owes false, raises). true, or nil, err (the store failed); raises on a bad
-- ticket.
function _M.settle(self, ticket, actual, above)
    check_self(self, "settle")
    if type(ticket) ~= "table" or type(ticket.cost) ~= "number" then
        error(format("sw:settle: ticket must be what sw:reserve returned, got %s", show(ticket)), 2)
    end
    if above ~= nil and not ABOVE[above] then
        error(format('sw:settle: above must be nil, "clamp" or "debt", got %s', show(above)), 2)
    end
    if above == "debt" and not self.store.owes then
        error(format('sw:settle: store %s cannot record a debt (stores local, shm, zone, '
            .. 'nginx and redis can)', show(self.conf.store)), 2)
    end
    local most = (ticket.stamp_ms and not above) and ticket.cost or huge
    if not (actual == nil or type(actual) == "number" and actual >= 0 and actual % 1 == 0 and actual <= most) then
        error(format("sw:settle: actual must be an integer from 0 to the cost reserved (%d), got %s",
            ticket.cost, show(actual)), 2)
    end
    if ticket.settled or not ticket.stamp_ms then
        return true
    end
    ticket.settled = true
    local counters = self.counters
    if actual == nil then
        counters:add("kept_units", ticket.cost)
        return true
    end
    if actual > ticket.cost then
        counters:add("used_units", ticket.cost)
        if above == "clamp" then
            counters:add("over_units", actual - ticket.cost)
            return true
        end
        return amend(self, ticket.key, actual - ticket.cost, ticket.stamp_ms, "owed_units", true)
    end
    local unused = ticket.cost - actual
    counters:add("used_units", actual)
    if unused == 0 then
        return true
    end
    return amend(self, ticket.key, unused, ticket.stamp_ms, "given_back_units")
end

-- sw:refund(key, cost): gives `cost` back in every window of `key` (an admission whose work
-- was not done): true, or nil, err. In the log phase, store redis gives back from a timer.
function _M.refund(self, key, cost)
    check_self(self, "refund")
    return amend(self, key, cost)
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
