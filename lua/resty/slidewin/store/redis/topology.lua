-- resty.slidewin.store.redis.topology: where a key's Redis is, for one configuration, shared by
-- every limiter of this worker that names the same Redis (so one slot map, one resolved master).
--
-- A topology has (opts: the calling limiter's redis options, whose timeouts bound a reload):
--   t:address(key, opts) -> node | nil, err    node = { host, port, name = "host:port" }
--   t:reroute(key, node, err, broken, opts) -> node, asking, kind | nil
--       after `node` failed with `err` (broken: a connection error or timeout, else an error
--       reply): the node to try next (asking: send ASKING first), kind "moved", "ask" or
--       "refresh" (counted in metrics), or nil when nothing else can be tried.
-- Kinds: "standalone" (here), resty.slidewin.store.redis.cluster and .sentinel.

local prometheus = require "resty.slidewin.prometheus"

local ngx = ngx

local _M = {}

-- A topology reloads (CLUSTER SLOTS, SENTINEL get-master-addr-by-name) at most this often per
-- worker, however many requests fail at once.
_M.RELOAD_INTERVAL_S = 0.1

local TOPOLOGIES, ORDER = {}, {}

-- The counters a topology adds to: node-wide in lua_shared_dict `dict` (nil: this worker's).
local function counters(id, dict)
    local prefix = "slidewin-redis|" .. id .. "|"
    local own = {}
    return {
        incr = function(kind)
            if dict then
                dict:incr(prefix .. kind, 1, 0)
            else
                own[kind] = (own[kind] or 0) + 1
            end
        end,
        get = function(kind)
            if dict then
                return dict:get(prefix .. kind) or 0
            end
            return own[kind] or 0
        end,
    }
end

-- The topology for `id` (its configuration, as text), made by `make()` the first time.
function _M.shared(id, dict, make)
    local t = TOPOLOGIES[id]
    if not t then
        t = make()
        t.id, t.count, t.reloaded_at, t.reloading = id, counters(id, dict), -math.huge, false
        TOPOLOGIES[id] = t
        ORDER[#ORDER + 1] = t
    end
    return t
end

-- t:load(opts, failed), unless one ran less than RELOAD_INTERVAL_S ago; when one runs already
-- in this worker, waits for it (polling, at most as long as a reload with opts' timeouts may
-- take), so that requests arriving together share one reload. Callers then read the topology
-- as it is.
function _M.reload(t, opts, failed)
    local waited, bound = 0, 3 * (opts.connect_timeout_ms + opts.read_timeout_ms) / 1000
    while t.reloading and waited < bound do
        ngx.sleep(0.002)
        waited = waited + 0.002
    end
    ngx.update_time()
    if t.reloading or ngx.now() - t.reloaded_at < _M.RELOAD_INTERVAL_S then
        return
    end
    t.reloading = true
    -- pcall: a reload that raised must not leave `reloading` set for good.
    local done, ok, err = pcall(t.load, t, opts, failed)
    if not done then
        ok, err = nil, ok
    end
    t.reloading = false
    ngx.update_time()
    t.reloaded_at = ngx.now()
    t.count.incr(ok and "reloads" or "reload_errors")
    if not ok then
        ngx.log(ngx.WARN, "slidewin redis ", t.id, ": ", err)
    end
end

local standalone = {}
standalone.__index = standalone
function standalone.address(self)
    return self.node
end
function standalone.reroute()
    return nil
end

function _M.standalone(node, dict)
    return _M.shared("standalone " .. node.name, dict, function()
        return setmetatable({ node = node }, standalone)
    end)
end

local REDIRECTS = prometheus.family("slidewin_redis_redirects_total", "counter",
    "Cluster redirects followed (MOVED, ASK) and retries on a node found by a reload.")
local RELOADS = prometheus.family("slidewin_redis_reloads_total", "counter",
    "Slot map / master address reloads, by outcome.")

-- Prometheus text: redirects followed and topology reloads, per Redis configuration.
function _M.metrics_text()
    local out = prometheus.new()
    for _, t in ipairs(ORDER) do
        for _, kind in ipairs { "moved", "ask", "refresh" } do
            out:sample(REDIRECTS, { "redis", t.id, "kind", kind }, t.count.get(kind))
        end
    end
    for _, t in ipairs(ORDER) do
        out:sample(RELOADS, { "redis", t.id, "outcome", "ok" }, t.count.get("reloads"))
        out:sample(RELOADS, { "redis", t.id, "outcome", "error" }, t.count.get("reload_errors"))
    end
    return out:text()
end

return _M
