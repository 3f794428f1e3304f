-- resty.slidewin.store.redis: one Redis (or Redis Cluster) shared by every worker of every nginx.
--
-- Each decision is one EVALSHA of lua/redis/<algorithm>.lua (after lua/redis/args.lua): Redis
-- runs a script alone, so checking and recording are one atomic step across all nodes, and the
-- time comes from Redis TIME, so the nodes' clocks never disagree. A NOSCRIPT answer (Redis
-- restarted, failed over, SCRIPT FLUSH) is retried once with EVAL, which caches the script again.
--
--   require("resty.slidewin").new{ name = "api", algorithm = "log", limit = 30, window_ms = 5000,
--       store = "redis", redis = { host = "127.0.0.1", port = 6379 },
--       on_store_error = "allow", local_refusal_cache = true }
--
-- conf.redis: host ("127.0.0.1"), port (6379), password, db (0), connect_timeout_ms (50),
-- read_timeout_ms (100), pool_size (64), keepalive_ms (60000), username (with password: AUTH
-- user password, an ACL user), ssl (false; true: TLS to every node, sentinels too), ssl_verify
-- (false; true: the certificate is checked against lua_ssl_trusted_certificate), server_name
-- (SNI, and the name checked when verifying), and instead of host/port one of
--   cluster_nodes = { "host:port", ... }   Redis Cluster seed nodes (resty.slidewin.store.redis.cluster:
--                                          CRC16 slots, CLUSTER SLOTS map per worker, MOVED, ASK)
--   sentinels = { "host:port", ... }, master_name = "mymaster"
--                                          a primary found through Redis Sentinel, asked again
--                                          after a connection error or READONLY;
--                                          sentinel_username / sentinel_password: the
--                                          sentinels' own AUTH (their requirepass or ACL user)
-- When Redis is down, slow or answers an error, incoming returns nil, err and the layer applies
-- conf.on_store_error. A call waits at most connect_timeout_ms + read_timeout_ms per node it
-- tries: the one the key maps to, then up to MAX_HOPS more after a MOVED, an ASK or a reload of
-- the slot map / master address that found another node; a reload asks up to 3 cluster nodes
-- (or every sentinel) in turn, each bounded the same way, and runs at most every 100 ms per
-- worker. TRYAGAIN and CLUSTERDOWN answers are errors (on_store_error decides).
-- conf.local_refusal_cache: once Redis refuses a key for retry_after_ms, this worker refuses
-- the same (or a larger) cost for that key locally until then, without a round trip.
-- Limiters naming the same nodes share one slot map / master address per worker (a reload uses
-- the timeouts and password of the limiter whose request needed it). Metrics of redirects and reloads:
-- require("resty.slidewin.store.redis").metrics_text().
--
-- Keys: "slidewin:{<name>:<key>}" (and ":m" after it for the log's companion hash); the hash
-- tag keeps both in one Redis Cluster slot.

local connection = require "resty.slidewin.store.redis.connection"
local topology = require "resty.slidewin.store.redis.topology"
local lrucache = require "resty.lrucache"

local ngx = ngx
local now = ngx.now
local update_time = ngx.update_time
local unpack = unpack
local ceil, max = math.ceil, math.max
local byte, format, gsub = string.byte, string.format, string.gsub

local _M = {}
local mt = { __index = _M }

-- Nodes a call may try after the first: a MOVED then an ASK during a migration, plus one.
local MAX_HOPS = 3

local DEFAULTS = {
    host = "127.0.0.1", port = 6379, db = 0, connect_timeout_ms = 50, read_timeout_ms = 100,
    pool_size = 64, keepalive_ms = 60000,
}
local COUNTS = { "port", "db", "connect_timeout_ms", "read_timeout_ms", "pool_size", "keepalive_ms" }
local OPTIONAL = { password = true, cluster_nodes = true, sentinels = true, master_name = true }
for name in pairs(connection.IDENTITY) do
    OPTIONAL[name] = true
end
local KEYS_OF = { log = 2, buckets = 1, counter = 1 }
local VERBS = { "evalsha", "eval" } -- EVAL after NOSCRIPT caches the script again

-- lua/redis/, beside lua/resty/ on lua_package_path.
local SCRIPTS_DIR = debug.getinfo(1, "S").source:sub(2):gsub("resty/slidewin/store/redis%.lua$", "redis/")

local function read(path)
    local file, err = io.open(path)
    if not file then
        return nil, err
    end
    local text = file:read("*a")
    file:close()
    return text
end

local function hex(bin)
    return (gsub(bin, ".", function(c) return format("%02x", byte(c)) end))
end

-- { source, sha } of the script for `algorithm`, or nil, err.
local function load_script(algorithm)
    local args, err = read(SCRIPTS_DIR .. "args.lua")
    local body, err2 = read(SCRIPTS_DIR .. algorithm .. ".lua")
    if not (args and body) then
        return nil, "cannot read the Redis script for " .. algorithm .. ": " .. tostring(err or err2)
    end
    local source = args .. body
    return { source = source, sha = hex(ngx.sha1_bin(source)) }
end

-- A list of "host:port" strings as nodes, or nil, err naming `field`.
local function node_list(field, list)
    if type(list) ~= "table" or #list == 0 then
        return nil, "redis." .. field .. ' must be a non-empty list of "host:port", got '
            .. (type(list) == "table" and "an empty list" or tostring(list))
    end
    local nodes = {}
    for i, address in ipairs(list) do
        nodes[i] = connection.node(address)
        if type(address) ~= "string" or not nodes[i] then
            return nil, "redis." .. field .. '[' .. i .. '] must be "host:port", got ' .. tostring(address)
        end
    end
    return nodes
end

-- conf.redis with defaults, or nil, err naming the field and the value.
local function redis_options(given)
    if given ~= nil and type(given) ~= "table" then
        return nil, "redis must be a table, got " .. tostring(given)
    end
    given = given or {}
    local opts = {}
    for k, v in pairs(DEFAULTS) do
        opts[k] = v
    end
    for k, v in pairs(given) do
        if DEFAULTS[k] == nil and not OPTIONAL[k] then
            return nil, "redis." .. tostring(k) .. " is not an option (host, port, password, db, "
                .. "connect_timeout_ms, read_timeout_ms, pool_size, keepalive_ms, cluster_nodes, "
                .. "sentinels, master_name, ssl, ssl_verify, server_name, username, sentinel_username, "
                .. "sentinel_password)"
        end
        opts[k] = v
    end
    if type(opts.host) ~= "string" then
        return nil, "redis.host must be a string, got " .. tostring(opts.host)
    end
    for _, k in ipairs(COUNTS) do
        local v = opts[k]
        if type(v) ~= "number" or v % 1 ~= 0 or v < (k == "db" and 0 or 1) then
            return nil, "redis." .. k .. " must be a " .. (k == "db" and "non-negative" or "positive")
                .. " integer, got " .. tostring(v)
        end
    end
    if opts.password ~= nil and type(opts.password) ~= "string" then
        return nil, "redis.password must be a string, got " .. tostring(opts.password)
    end
    local mode = given.cluster_nodes and "cluster_nodes" or given.sentinels and "sentinels"
    if mode then
        for _, other in ipairs { "host", "port", mode == "cluster_nodes" and "sentinels" or "cluster_nodes" } do
            if given[other] ~= nil then
                return nil, "redis." .. other .. " cannot be combined with redis." .. mode
            end
        end
        local err
        opts.nodes, err = node_list(mode, given[mode])
        if not opts.nodes then
            return nil, err
        end
    end
    if mode == "cluster_nodes" and opts.db ~= 0 then
        return nil, "redis.db must be 0 with redis.cluster_nodes (a cluster has one db), got " .. opts.db
    end
    if (mode == "sentinels") ~= (given.master_name ~= nil) then
        return nil, "redis.master_name (a string) goes with redis.sentinels, got "
            .. tostring(given.master_name)
    elseif mode == "sentinels" and type(given.master_name) ~= "string" then
        return nil, "redis.master_name must be a string, got " .. tostring(given.master_name)
    end
    opts.mode = mode or "standalone"
    local err = connection.check(given, opts.mode)
    if err then
        return nil, err
    end
    return connection.prepare(opts)
end

-- The shared topology (where keys live) for opts, counting into lua_shared_dict `dict_name`.
local function topology_of(opts, dict_name)
    local dict = dict_name and ngx.shared[dict_name]
    if opts.mode == "cluster_nodes" then
        return require("resty.slidewin.store.redis.cluster").new(opts.nodes, dict)
    elseif opts.mode == "sentinels" then
        return require("resty.slidewin.store.redis.sentinel").new(opts.nodes, opts.master_name, dict)
    end
    return topology.standalone(connection.node(opts.host .. ":" .. opts.port), dict)
end

function _M.new(conf)
    -- One script decides one window today: a rule of several would be decided by its first.
    if #conf.windows ~= 1 or conf.windows[1].max_limit ~= conf.limit then
        return nil, "windows must hold one window, and max_limit equal its limit, with store "
            .. "\"redis\" (rules and live limits in Redis are not built yet), got "
            .. #conf.windows .. " window(s), max_limit " .. conf.windows[1].max_limit
    end
    local opts, err = redis_options(conf.redis)
    if not opts then
        return nil, err
    end
    local script
    script, err = load_script(conf.algorithm)
    if not script then
        return nil, err
    end
    local options = conf.algorithm == "buckets" and { "bucket_ms", conf.bucket_ms } or {}
    local tails = {}
    for _, mode in ipairs { "check", "peek", "refund" } do
        local tail = { conf.limit, conf.window_ms }
        for i, v in ipairs(options) do tail[2 + i] = v end
        if mode ~= "check" then
            tail[#tail + 1], tail[#tail + 2] = "mode", mode
        end
        tails[mode] = tail
    end
    local refusals
    if conf.local_refusal_cache then
        refusals, err = lrucache.new(conf.max_keys)
        if not refusals then
            return nil, "local_refusal_cache: " .. tostring(err)
        end
    end
    return setmetatable({
        opts = opts,
        topology = topology_of(opts, conf.metrics_dict or conf.dict),
        script = script,
        nkeys = KEYS_OF[conf.algorithm],
        prefix = "slidewin:{" .. conf.name .. ":",
        tails = tails,
        refusals = refusals,
    }, mt)
end

-- The script's reply on `node` (ASKING first when `asking`), or nil, err, broken (a connection
-- error or timeout) or false, err (an error reply).
local function eval_on(self, node, asking, args)
    local opts = self.opts
    local red, err = connection.open(node, opts)
    if not red then
        return nil, err, true
    end
    local script, res = self.script, nil
    for _, verb in ipairs(VERBS) do
        if asking then
            red:asking()
        end
        res, err = red[verb](red, verb == "eval" and script.source or script.sha, self.nkeys, unpack(args))
        if res or not (err and err:find("^NOSCRIPT")) then
            break
        end
    end
    connection.release(red, res, opts)
    return res, err, res == nil
end

-- The script's reply { allowed, remaining, retry_after_ms, reset_after_ms } for `mode`, or nil, err.
local function run(self, key, cost, mode)
    local tail = self.tails[mode]
    local data = self.prefix .. key .. "}"
    local meta = self.nkeys == 2 and data .. ":m" or nil
    local args = meta and { data, meta, tail[1], tail[2], cost, unpack(tail, 3) }
        or { data, tail[1], tail[2], cost, unpack(tail, 3) }
    local routes = self.topology
    local node, err = routes:address(data, self.opts)
    local asking, res, broken, kind = false, nil, nil, nil
    for _ = 0, MAX_HOPS do
        if not node then
            break
        end
        res, err, broken = eval_on(self, node, asking, args)
        if res then
            return res
        end
        node, asking, kind = routes:reroute(data, node, err, broken, self.opts)
        if node then
            routes.count.incr(kind)
        end
    end
    return nil, "redis: " .. tostring(err)
end

-- The refusal remembered for `key` if it covers `cost`, and the time now in ms.
local function remembered(self, key, cost)
    local refusal = self.refusals:get(key)
    if refusal and cost >= refusal.cost then
        update_time()
        local now_ms = now() * 1000
        if refusal.until_ms > now_ms then
            return refusal, now_ms
        end
    end
end

-- allowed, remaining, retry_after_ms (nil: never), reset_after_ms, decided_locally | nil, err
function _M.incoming(self, key, cost, commit, limits)
    if limits then
        error("store redis takes no per-call limits yet (limit, limits, tier)", 3)
    end
    local refusals = self.refusals
    if refusals then
        local refusal, now_ms = remembered(self, key, cost)
        if refusal then
            return false, refusal.remaining, ceil(refusal.until_ms - now_ms),
                max(ceil(refusal.reset_at_ms - now_ms), 0), true
        end
    end
    local res, err = run(self, key, cost, commit and "check" or "peek")
    if not res then
        return nil, err
    end
    local allowed, retry = res[1] == 1, res[3]
    if refusals and not allowed and retry > 0 then
        update_time()
        local now_ms = now() * 1000
        refusals:set(key, { cost = cost, remaining = res[2], until_ms = now_ms + retry,
            reset_at_ms = now_ms + res[4] }, retry / 1000)
    end
    return allowed, res[2], retry >= 0 and retry or nil, res[4]
end

function _M.uncommit(self, key, cost)
    local res, err = run(self, key, cost, "refund")
    if not res then
        return nil, err
    end
    if self.refusals then
        self.refusals:delete(key)
    end
    return true
end

-- Redis holds the keys; counting them would cost a SCAN per scrape.
function _M.keys()
    return nil
end

-- Prometheus text of every Redis this worker's limiters use: redirects followed (MOVED, ASK,
-- a retry on a node a reload found) and reloads of the slot map / master address.
_M.metrics_text = topology.metrics_text

return _M
