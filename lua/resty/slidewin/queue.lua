-- resty.slidewin.queue: a rate limit that follows a Redis Stream consumer group, so producers
-- are admitted about as fast as the consumers process and the backlog stays near a target
-- (slidewin.queue_limit).
--
--   init_by_lua_block {
--       local limits = require("resty.slidewin.registry").new{
--           orders = { algorithm = "log", limit = 100, window_ms = 1000, max_limit = 100000 },
--       }
--       assert(require("resty.slidewin.queue").new{ name = "orders", limiter = limits:get("orders"),
--           redis = { host = "127.0.0.1", port = 6379 }, stream = "orders", group = "workers",
--           target_backlog = 100 })
--   }
--   init_worker_by_lua_block { assert(require("resty.slidewin").init_worker()) }
--   location /orders { access_by_lua_block { require("limits"):enforce("orders", "all") } ... }
--
-- Every interval_ms one worker (worker 0, respawned by the master when it dies) reads XINFO
-- GROUPS: processed = entries-read - pending, backlog = lag + pending (lag from XINFO STREAM's
-- entries-added when Redis cannot tell it, after an XDEL or a trim past the group; when it
-- cannot count entries-read either, the limit holds and the error is logged), and sets the
-- limiter's live limit (its window: rate x window_ms / 1000) for every worker. The limiter must
-- keep its live limits where every worker reads them (store shm or redis). When Redis cannot
-- be read, the limit holds and the error is logged once per interval.
-- (queue.start is the older name of that init_worker(): see resty.slidewin.phases.)

local slidewin = require "slidewin"
local redis_store = require "resty.slidewin.store.redis"
local connection = require "resty.slidewin.store.redis.connection"
local controllers = require "resty.slidewin.controllers"
local live_limit = require "resty.slidewin.live_limit"
local phases = require "resty.slidewin.phases"
local queues = require("resty.slidewin.registry").kind("queue limit")

local ngx = ngx
local pcall, type, tostring, setmetatable, ipairs = pcall, type, tostring, setmetatable, ipairs

local _M = {}
local mt = { __index = _M }

-- The init_worker part (resty.slidewin.phases): worker 0 reads every queue each interval.
local function start()
    if ngx.worker.id() ~= 0 then
        return true
    end
    return controllers.start(queues)
end

-- A queue limit, or nil, err. Made in init_by_lua*.
-- opts: name, limiter (a resty.slidewin limiter of store shm or redis), window (its index or
-- name, default 1), redis (as a store redis's: host, port, password, username, ssl, db, ...;
-- one node), stream, group, interval_ms (1000), and the controller's target_backlog (1000),
-- settle_ms (5000), rate_half_life_ms (1000), headroom (0.5), min_limit (1), max_limit (the
-- window's max_limit, as a rate per second).
function _M.new(opts)
    if type(opts) ~= "table" then
        return nil, "opts must be a table, got " .. tostring(opts)
    end
    for _, field in ipairs { "name", "stream", "group" } do
        if type(opts[field]) ~= "string" then
            return nil, field .. " must be a string, got " .. tostring(opts[field])
        end
    end
    local target, err = live_limit.new("limiter", opts.limiter, opts.window)
    if not target then
        return nil, err
    end
    local interval_ms = opts.interval_ms or 1000
    if type(interval_ms) ~= "number" or interval_ms < 10 or interval_ms % 1 ~= 0 then
        return nil, "interval_ms must be an integer of at least 10, got " .. tostring(interval_ms)
    end
    local redis
    redis, err = redis_store.options(opts.redis)
    if not redis then
        return nil, err
    end
    if redis.topology ~= "standalone" then
        return nil, "redis: a queue is read from one node (host and port), got redis." .. redis.topology
    end
    local ok, ctl = pcall(slidewin.queue_limit, {
        target_backlog = opts.target_backlog, settle_ms = opts.settle_ms,
        rate_half_life_ms = opts.rate_half_life_ms, headroom = opts.headroom,
        min_limit = opts.min_limit,
        max_limit = opts.max_limit or slidewin.window_rate(target.max_limit, target.window_ms),
    })
    if not ok then
        return nil, ctl
    end
    local self = setmetatable({
        name = opts.name, target = target, ctl = ctl,
        redis = redis, node = { host = redis.host, port = redis.port, name = redis.host .. ":" .. redis.port },
        stream = opts.stream, group = opts.group, interval_ms = interval_ms,
        last = {},
    }, mt)
    queues:add(self)
    phases.on_init_worker("queue limits", start)
    return self
end

-- The queue limit called `name`, or nil, err.
function _M.get(name)
    return queues:get(name)
end

-- A flat [k1, v1, k2, v2, ...] reply as a table (ngx.null values as nil).
local function fields(list)
    local t = {}
    for i = 1, #list, 2 do
        local v = list[i + 1]
        t[list[i]] = v ~= ngx.null and v or nil
    end
    return t
end

-- { processed, backlog, lag, pending } of the group, or nil, err.
function _M.read(self)
    local groups, err = connection.command(self.node, self.redis, "xinfo", "GROUPS", self.stream)
    if not groups then
        return nil, "XINFO GROUPS " .. self.stream .. ": " .. tostring(err)
    end
    local group
    for _, g in ipairs(groups) do
        local f = fields(g)
        if f.name == self.group then
            group = f
        end
    end
    if not group then
        return nil, "stream " .. self.stream .. " has no consumer group " .. self.group
    end
    local read_, pending, lag = group["entries-read"], group.pending, group.lag
    if not read_ and group["last-delivered-id"] == "0-0" then
        read_ = 0 -- nothing delivered yet
    end
    if not read_ then
        return nil, "group " .. self.group .. " of stream " .. self.stream
            .. ": Redis cannot count what it has read (entries-read nil), the limit holds"
    end
    if not lag then
        -- Redis cannot tell the lag (entries deleted or trimmed past the group): from the
        -- stream's count of everything ever added (so deleted entries count as waiting).
        local stream
        stream, err = connection.command(self.node, self.redis, "xinfo", "STREAM", self.stream)
        if not stream then
            return nil, "XINFO STREAM " .. self.stream .. ": " .. tostring(err)
        end
        lag = math.max(0, (fields(stream)["entries-added"] or read_) - read_)
    end
    return { processed = math.max(0, read_ - pending), backlog = lag + pending, lag = lag, pending = pending }
end

-- One interval: reads the group, updates the controller, sets the limiter's live limit.
-- Returns the rate per second set (nil while the consumers' rate is not known yet), or nil, err.
function _M.tick(self)
    local q, err = self:read()
    if not q then
        self.last.error = err
        return nil, err
    end
    local per_second = self.ctl:update(q.processed, q.backlog)
    self.last = { backlog = q.backlog, lag = q.lag, pending = q.pending, rate = self.ctl:rate(),
        per_second = per_second }
    if per_second then
        local set
        set, err = self.target:set_rate(per_second)
        if not set then
            return nil, err
        end
    end
    return per_second
end

_M.start = phases.init_worker

-- { limit (the window's live limit), per_second, rate, backlog, lag, pending, error } of the
-- last interval (in worker 0; the live limit in every worker).
function _M.stats(self)
    local last = self.last
    return { limit = self.target:limit(), per_second = last.per_second, rate = last.rate,
        backlog = last.backlog, lag = last.lag, pending = last.pending, error = last.error }
end

return _M
