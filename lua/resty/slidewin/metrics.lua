-- resty.slidewin.metrics: decision counters of one limiter, and their Prometheus text and JSON
-- (through resty.slidewin.prometheus and resty.slidewin.json).
--
-- With a lua_shared_dict the counters are node-wide (every worker adds to the same numbers);
-- without one they count what this worker saw. The keys gauge asks the store; a store whose
-- state is per worker (keys_per_worker = true) publishes its count into the dict, and the
-- gauge is the sum over workers.

local concat = table.concat
local ngx = ngx
local json = require "resty.slidewin.json"
local prometheus = require "resty.slidewin.prometheus"
local top = require "resty.slidewin.top"
local window_metrics = require "resty.slidewin.window_metrics"

local _M = {}
local mt = { __index = _M }

local KINDS = { "allowed", "rejected", "store_errors", "local_refusals", "fallback_decisions",
    -- counted by the gateway switches (resty.slidewin.switch): outcomes beside allowed and
    -- rejected, and the waits of `delay`
    "exempt", "would_reject", "waits",
    -- units of reservations (sw:reserve, sw:settle): reserved, used when settled (up to the
    -- reservation), given back, kept whole (use unknown), and used above the reservation:
    -- over (not recorded: clamped) or owed (recorded at the stamp: a debt)
    "reserved_units", "used_units", "given_back_units", "kept_units", "over_units", "owed_units" }
-- A per-worker store publishes its key count after this many decisions (and at each render).
local PUBLISH_EVERY = 64

local function worker_tables()
    local counts = {}
    return {
        incr = function(_, key, n)
            counts[key] = (counts[key] or 0) + n
        end,
        get = function(_, key)
            return counts[key]
        end,
        set = function(_, key, v)
            counts[key] = v
        end,
    }
end

-- Counters for limiter `name` in lua_shared_dict `dict_name` (nil: per worker), which the
-- config gave as `field` (named in the error when there is no such dict).
function _M.new(name, field, dict_name, store)
    local dict
    if dict_name == nil then
        dict = worker_tables()
    else
        dict = ngx.shared[dict_name]
        if not dict then
            return nil, field .. ' must name a lua_shared_dict, got "' .. tostring(dict_name) .. '"'
        end
    end
    local self = setmetatable({
        name = name,
        dict = dict,
        store = store,
        keys_prefix = "slidewin-metrics|" .. name .. "|keys|",
        since_publish = 0,
        outcomes = {},
    }, mt)
    for _, kind in ipairs(KINDS) do
        self[kind] = "slidewin-metrics|" .. name .. "|" .. kind
    end
    for _, outcome in ipairs(store.outcomes or {}) do
        self:show_outcome(outcome)
    end
    return self
end

-- Shows `outcome` beside allowed and rejected, once: a switch's, or one the store counts
-- itself (a zone of nginx.conf: the would-be refusals of its native dry runs).
function _M.show_outcome(self, outcome)
    for _, shown in ipairs(self.outcomes) do
        if shown == outcome then
            return
        end
    end
    self.outcomes[#self.outcomes + 1] = outcome
end

function _M.incr(self, kind)
    self.dict:incr(self[kind], 1, 0)
    if self.store.keys_per_worker then
        local n = self.since_publish + 1
        if n >= PUBLISH_EVERY then
            self:publish_keys()
            n = 0
        end
        self.since_publish = n
    end
end

-- Adds `n` to counter `kind` (units, not decisions).
function _M.add(self, kind, n)
    self.dict:incr(self[kind], n, 0)
end

function _M.publish_keys(self)
    self.dict:set(self.keys_prefix .. (ngx.worker.id() or 0), self.store:keys() or 0)
end

local function keys(self)
    if not self.store.keys_per_worker then
        return self.store:keys()
    end
    self:publish_keys()
    local total = 0
    for worker = 0, ngx.worker.count() - 1 do
        total = total + (self.dict:get(self.keys_prefix .. worker) or 0)
    end
    return total
end

-- { allowed, rejected, store_errors, local_refusals, keys, evictions } (keys nil when the store
-- cannot tell, evictions nil when it does not evict). A store that counts its own decisions
-- (shm: atomics in the region, node-wide) gives allowed, rejected, keys and evictions: its
-- `stats` when given (a scan's), else read a step at a time (resty.slidewin.top.counters).
function _M.snapshot(self, stats)
    local out = {}
    for _, kind in ipairs(KINDS) do
        out[kind] = self.dict:get(self[kind]) or 0
    end
    local store = self.store
    if store.counts_decisions then
        stats = stats or top.counters(store)
        -- The store counted every refusal it answered, a dry run's apart as a would-be one
        -- (this layer's and a zone's native dry runs alike: node-wide, exact); a wait's was no
        -- refusal of the request (exact node-wide with a metrics dict).
        out.allowed, out.would_reject = stats.allowed, stats.would_reject or 0
        out.rejected = stats.rejected - out.waits
        out.keys, out.evictions = stats.keys, stats.evictions
    else
        out.keys = keys(self)
    end
    return out
end

local REQUESTS = prometheus.family("slidewin_requests_total", "counter", "Rate-limit decisions by outcome.")
local STORE_ERRORS = prometheus.family("slidewin_store_errors_total", "counter",
    "Store failures (conf.on_store_error decided).")
local KEYS = prometheus.family("slidewin_keys", "gauge",
    "Keys the store tracks (shdict: keys seen in the current window).")
local LOCAL_REFUSALS = prometheus.family("slidewin_local_refusals_total", "counter",
    "Refusals answered from the local refusal cache (store round trips saved).")
local FALLBACK_DECISIONS = prometheus.family("slidewin_fallback_decisions_total", "counter",
    "Decisions made in this node's shared memory at the fallback limits while the store failed.")
local EVICTIONS = prometheus.family("slidewin_evictions_total", "counter",
    "Live keys dropped to make room (store shm).")
local DELAY_WAITS = prometheus.family("slidewin_delay_waits_total", "counter",
    "Waits before deciding again (option delay).")
local RESERVATION_UNITS = prometheus.family("slidewin_reservation_units_total", "counter",
    "Units of reservations (sw:reserve) by what became of them: reserved, used (settled), "
        .. "given_back at the reservation's stamp, kept (settled with no use known); reserved "
        .. "less those is still unsettled. Use reported above a reservation: over (clamped, not "
        .. "recorded) or owed (recorded at the reservation's stamp: a debt).")
local RESERVATION_KINDS = { "reserved", "reserved_units", "used", "used_units",
    "given_back", "given_back_units", "kept", "kept_units", "over", "over_units",
    "owed", "owed_units" }

local LEASE_CALLS = prometheus.family("slidewin_lease_calls_total", "counter",
    "Lease calls to Redis (store redis with lease), in the foreground and ahead of time.")
local LEASE_UNITS = prometheus.family("slidewin_lease_units_total", "counter",
    "Lease units by what became of them: granted by Redis, spent, returned (settled unspent), "
        .. "expired_unspent (of the returned, those whose lease ran out of time).")
local LEASE_LOCAL = prometheus.family("slidewin_lease_local_decisions_total", "counter",
    "Decisions made with no Redis call: spent from a lease, or a refusal Redis gave that holds.")
local LEASE_REFUSALS = prometheus.family("slidewin_lease_refusals_cached_total", "counter",
    "Refusals answered from Redis's last refusal until its retry time (no call).")
local LEASE_VALIDITY = prometheus.family("slidewin_lease_validity_seconds", "gauge",
    "The validity lease calls ask for now: lease.validity_ms, raised (up to "
        .. "lease.max_validity_ms) when grants came back too late to spend.")
-- The units' kinds in slidewin_lease_units_total, and the lease_stats field of each.
local LEASE_UNIT_KINDS = { "granted", "granted", "spent", "spent", "returned", "returned",
    "expired_unspent", "expired" }

-- The lease counters of `m`'s store (node-wide: the table's header), or nil without leases.
local function lease_stats(m)
    local store = m.store
    return store.lease_stats and store:lease_stats()
end

-- Prometheus text for a list of metrics objects (each family's samples in the list's order).
function _M.render(list)
    -- One walk of each region gives both its window usage and its counters.
    local snaps, scans = {}, {}
    for i, m in ipairs(list) do
        scans[i] = top.scan(m, 0) or nil
        snaps[i] = m:snapshot(scans[i] and scans[i].stats)
    end
    local out = prometheus.new()
    for i, m in ipairs(list) do
        local v, limiter = snaps[i], { "limiter", m.name }
        out:sample(REQUESTS, { "limiter", m.name, "outcome", "allowed" }, v.allowed)
        out:sample(REQUESTS, { "limiter", m.name, "outcome", "rejected" }, v.rejected)
        -- The switches' outcomes (would_reject, exempt) and the store's own, where they count.
        for _, outcome in ipairs(m.outcomes) do
            out:sample(REQUESTS, { "limiter", m.name, "outcome", outcome }, v[outcome])
        end
        out:sample(STORE_ERRORS, limiter, v.store_errors)
        if v.keys then
            out:sample(KEYS, limiter, v.keys)
        end
        out:sample(LOCAL_REFUSALS, limiter, v.local_refusals)
        if m.falls_back then
            out:sample(FALLBACK_DECISIONS, limiter, v.fallback_decisions)
        end
        if v.evictions then
            out:sample(EVICTIONS, limiter, v.evictions)
        end
        if m.delays then
            out:sample(DELAY_WAITS, limiter, v.waits)
        end
        -- Once a limiter reserved: the others' text stays as it was.
        if v.reserved_units > 0 then
            for k = 1, #RESERVATION_KINDS, 2 do
                out:sample(RESERVATION_UNITS, { "limiter", m.name, "kind", RESERVATION_KINDS[k] },
                    v[RESERVATION_KINDS[k + 1]])
            end
        end
        local lease = lease_stats(m)
        if lease then
            out:sample(LEASE_CALLS, limiter, lease.calls)
            for k = 1, #LEASE_UNIT_KINDS, 2 do
                out:sample(LEASE_UNITS, { "limiter", m.name, "kind", LEASE_UNIT_KINDS[k] },
                    lease[LEASE_UNIT_KINDS[k + 1]])
            end
            out:sample(LEASE_LOCAL, limiter, lease["local"])
            out:sample(LEASE_REFUSALS, limiter, lease.refusals_cached)
            out:sample(LEASE_VALIDITY, limiter, lease.validity_ms / 1000)
        end
    end
    window_metrics.write(out, list, scans)
    return out:text()
end

-- JSON for dashboards: {"now_ms": ..., "limiters": {"<name>": {"allowed": N, ...}}}, then
-- `members` (JSON text: '"adaptive":{...}').
function _M.json(list, now_ms, members)
    local limiters = {}
    for _, m in ipairs(list) do
        local v = m:snapshot()
        limiters[#limiters + 1] = m.name
        local members = { "allowed", v.allowed, "rejected", v.rejected,
            "store_errors", v.store_errors, "keys", v.keys or json.null }
        local lease = lease_stats(m)
        if lease then
            members[#members + 1] = "lease"
            members[#members + 1] = json.object { "calls", lease.calls, "granted", lease.granted,
                "spent", lease.spent, "returned", lease.returned, "expired", lease.expired,
                "local", lease["local"], "refusals_cached", lease.refusals_cached,
                "validity_ms", lease.validity_ms }
        end
        if m.falls_back then
            members[#members + 1], members[#members + 2] = "fallback_decisions", v.fallback_decisions
        end
        if v.reserved_units > 0 then
            members[#members + 1] = "reservation_units"
            members[#members + 1] = json.object { "reserved", v.reserved_units, "used", v.used_units,
                "given_back", v.given_back_units, "kept", v.kept_units, "over", v.over_units,
                "owed", v.owed_units }
        end
        limiters[#limiters + 1] = json.object(members)
    end
    local doc = { "now_ms", now_ms, "limiters", json.object(limiters) }
    local text = json.encode(json.object(doc))
    if members and members[1] then
        -- Members come as text ('"adaptive":{...}'): written inside the object's closing brace.
        text = text:sub(1, -2) .. "," .. concat(members, ",") .. "}"
    end
    return text
end

return _M
