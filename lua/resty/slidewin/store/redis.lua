-- resty.slidewin.store.redis: one Redis (or Redis Cluster) shared by every worker of every nginx.
--
-- Each decision is one EVALSHA of the rule script (lua/redis/args.lua, entries.lua, counter.lua,
-- rule.lua) for every window of the rule: Redis runs a script alone, so checking all windows
-- and recording in all of them are one atomic step across all nodes (admitted only when every
-- window admits; a refusal records nothing), and the time comes from Redis TIME, so the nodes'
-- clocks never disagree. A NOSCRIPT answer (Redis
-- restarted, failed over, SCRIPT FLUSH) is retried once with EVAL, which caches the script again.
--
--   require("resty.slidewin").new{ name = "api", algorithm = "log", limit = 30, window_ms = 5000,
--       store = "redis", redis = { host = "127.0.0.1", port = 6379 },
--       on_store_error = "allow", local_refusal_cache = true }
-- Rules of several windows, max_limit, tiers and per-call limits work as with every store; the
-- limits are sent with each call. sw:set_limit publishes the live limits in Redis
-- (store:set_limits) and every worker of every node reads them at most once a second
-- (store:poll_limits), so they survive reloads and restarts.
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
-- When Redis is down, slow or answers an error, decide returns nil, err and the layer applies
-- conf.on_store_error. A call waits at most connect_timeout_ms + read_timeout_ms per node it
-- tries: the one the key maps to, then up to MAX_HOPS more after a MOVED, an ASK or a reload of
-- the slot map / master address that found another node; a reload asks up to 3 cluster nodes
-- (or every sentinel) in turn, each bounded the same way, and runs at most every 100 ms per
-- worker. TRYAGAIN and CLUSTERDOWN answers are errors (on_store_error decides).
-- conf.lease = { validity_ms = V, ... }: Redis grants this node units of a key's rule that every
-- worker spends from shared memory with no call per request (resty.slidewin.store.redis.lease,
-- docs/leases.md); every call then also carries the key's lease hash (KEYS after the windows').
-- Reservations (sw:reserve, sw:settle; docs/usage.md), without conf.lease: an admitted check
-- answers the Redis time it recorded its cost at (the ticket's stamp_ms), and settling gives
-- back what the call did not use at that stamp (store:refund with stamp_ms), from a zero-delay
-- timer in the log phase (no cosocket there).
-- conf.local_refusal_cache: once Redis refuses a key for retry_after_ms, this worker refuses
-- the same (or a larger) cost for that key locally until then, without a round trip.
-- Limiters naming the same nodes share one slot map / master address per worker (a reload uses
-- the timeouts and password of the limiter whose request needed it). Metrics of redirects and reloads:
-- require("resty.slidewin.store.redis").metrics_text().
--
-- Keys: "slidewin:{<name>:<key>}:<window><algorithm><window_ms>[/<bucket_ms>]", one per window
-- (e.g. "slidewin:{api:alice}:1l1000"); the hash tag keeps a key's windows in one Redis Cluster
-- slot. Live limits: "slidewin:{<name>}:limits" (a hash, see set_limits).

local connection = require "resty.slidewin.store.redis.connection"
local topology = require "resty.slidewin.store.redis.topology"
local lrucache = require "resty.lrucache"
local config = require "resty.slidewin.config"
local live_limits = require("slidewin").live_limits
local answering = require("resty.slidewin.answer").answering

local ngx = ngx
local now = ngx.now
local update_time = ngx.update_time
local unpack = unpack
local ceil, max = math.ceil, math.max
local byte, format, gmatch, gsub = string.byte, string.format, string.gmatch, string.gsub
local concat = table.concat

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
-- The rule script's parts (lua/redis/), in the order they are sent as one script.
local SCRIPT_PARTS = { "args", "entries", "counter", "rule" }
for name in pairs(connection.IDENTITY) do
    OPTIONAL[name] = true
end
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

-- { source, sha } of the rule script: the parts of lua/redis/, in order.
local function load_script()
    local parts = {}
    for i, name in ipairs(SCRIPT_PARTS) do
        local text, err = read(SCRIPTS_DIR .. name .. ".lua")
        if not text then
            return nil, "cannot read the Redis script " .. SCRIPTS_DIR .. name .. ".lua: " .. tostring(err)
        end
        parts[i] = text
    end
    local source = concat(parts)
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
    local topology = given.cluster_nodes and "cluster_nodes" or given.sentinels and "sentinels"
    if topology then
        for _, other in ipairs { "host", "port", topology == "cluster_nodes" and "sentinels" or "cluster_nodes" } do
            if given[other] ~= nil then
                return nil, "redis." .. other .. " cannot be combined with redis." .. topology
            end
        end
        local err
        opts.nodes, err = node_list(topology, given[topology])
        if not opts.nodes then
            return nil, err
        end
    end
    if topology == "cluster_nodes" and opts.db ~= 0 then
        return nil, "redis.db must be 0 with redis.cluster_nodes (a cluster has one db), got " .. opts.db
    end
    if (topology == "sentinels") ~= (given.master_name ~= nil) then
        return nil, "redis.master_name (a string) goes with redis.sentinels, got "
            .. tostring(given.master_name)
    elseif topology == "sentinels" and type(given.master_name) ~= "string" then
        return nil, "redis.master_name must be a string, got " .. tostring(given.master_name)
    end
    opts.topology = topology or "standalone"
    local err = connection.check(given, opts.topology)
    if err then
        return nil, err
    end
    return connection.prepare(opts)
end

-- conf.redis checked and with its defaults (also for resty.slidewin.queue's XINFO), or nil, err.
_M.options = redis_options

-- The shared topology (where keys live) for opts, counting into lua_shared_dict `dict_name`.
local function topology_of(opts, dict_name)
    local dict = dict_name and ngx.shared[dict_name]
    if opts.topology == "cluster_nodes" then
        return require("resty.slidewin.store.redis.cluster").new(opts.nodes, dict)
    elseif opts.topology == "sentinels" then
        return require("resty.slidewin.store.redis.sentinel").new(opts.nodes, opts.master_name, dict)
    end
    return topology.standalone(connection.node(opts.host .. ":" .. opts.port), dict)
end

-- The windows' parts of the script's ARGV after the cost (the limits at `at[i]`), and the keys'
-- suffixes: "<window>:<algorithm><window_ms>[/<bucket_ms>]", so that a reload that changes a
-- window's algorithm or length starts that window afresh while one that changes limits keeps it.
-- The windows are valid: config had the core check them, as the script checks them too.
local function windows_args(windows)
    local args, at, suffixes = {}, {}, {}
    for i, w in ipairs(windows) do
        local n = #args
        args[n + 1], args[n + 2], args[n + 3] = w.algorithm, w.limit, w.window_ms
        at[i] = n + 2
        suffixes[i] = ":" .. i .. w.algorithm:sub(1, 1) .. w.window_ms
        if w.algorithm == "buckets" then
            args[n + 4] = w.bucket_ms
            suffixes[i] = suffixes[i] .. "/" .. w.bucket_ms
        end
    end
    return args, at, suffixes
end

-- The window kinds the script decides (lua/redis/args.lua): a kind the core has and the script
-- has not is refused here, at new(), rather than by every call (a store error, which
-- on_store_error = "allow" would answer by admitting everything).
local SCRIPT_ALGORITHMS = { log = true, buckets = true, counter = true }

local function check_algorithms(windows)
    for _, w in ipairs(windows) do
        if not SCRIPT_ALGORITHMS[w.algorithm] then
            return nil, format('store "redis" decides windows of algorithm "log", "buckets" or '
                .. '"counter"; window "%s" is "%s"', w.name, w.algorithm)
        end
    end
    return true
end

local function new(conf)
    local opts, err = check_algorithms(conf.windows)
    if not opts then
        return nil, err
    end
    opts, err = redis_options(conf.redis)
    if not opts then
        return nil, err
    end
    local script
    script, err = load_script()
    if not script then
        return nil, err
    end
    local args, at, suffixes = windows_args(conf.windows)
    local tails = {}
    for _, action in ipairs { "check", "peek", "refund", "owe", "lease" } do
        tails[action] = action ~= "check" and { "action", action } or {}
    end
    local refusals
    if conf.local_refusal_cache then
        refusals, err = lrucache.new(conf.max_keys)
        if not refusals then
            return nil, "local_refusal_cache: " .. tostring(err)
        end
    end
    local configured, max_limits = {}, {}
    for i, w in ipairs(conf.windows) do
        configured[i], max_limits[i] = w.limit, w.max_limit or w.limit
    end
    return setmetatable({
        conf = conf,
        opts = opts,
        topology = topology_of(opts, conf.metrics_dict or conf.dict),
        script = script,
        nkeys = #conf.windows,
        -- The windows' keys, and the lease hash when the limiter uses leases.
        script_keys = #conf.windows + (conf.lease and 1 or 0),
        prefix = "slidewin:{" .. conf.name .. ":",
        suffixes = suffixes,
        args = args,
        limit_at = at,
        tails = tails,
        refusals = refusals,
        configured = configured,
        max_limits = max_limits,
        base = concat(configured, " "),
        limits_key = "slidewin:{" .. conf.name .. "}:limits",
    }, mt)
end

-- A store; with conf.lease, one that spends leases (resty.slidewin.store.redis.lease).
function _M.new(conf)
    local store, err = new(conf)
    if store and conf.lease then
        return require("resty.slidewin.store.redis.lease").new(store, conf)
    end
    return store, err
end

-- Sends the script with `args` on `red` (ASKING first when `asking`): EVALSHA, then EVAL when
-- Redis lost the script.
local function send_script(self, red, asking, args)
    local script, res, err = self.script, nil, nil
    for _, verb in ipairs(VERBS) do
        if asking then
            red:asking()
        end
        res, err = red[verb](red, verb == "eval" and script.source or script.sha, self.script_keys, unpack(args))
        if res or not (err and err:find("^NOSCRIPT")) then
            break
        end
    end
    return res, err
end

-- `send(self, red, asking, args)` on a connection to `node`: its reply, or nil, err, broken (a
-- connection error or timeout) or false, err (an error reply).
local function send_on(self, node, asking, send, args)
    local opts = self.opts
    local red, err = connection.open(node, opts)
    if not red then
        return nil, err, true
    end
    local res
    res, err = send(self, red, asking, args)
    connection.release(red, res, opts)
    return res, err, res == nil
end

-- `send` on the node holding `key`, following MOVED and ASK: its reply, or nil, err.
local function run(self, key, send, args)
    local routes = self.topology
    local node, err = routes:address(key, self.opts)
    local asking, res, broken, kind = false, nil, nil, nil
    for _ = 0, MAX_HOPS do
        if not node then
            break
        end
        res, err, broken = send_on(self, node, asking, send, args)
        if res then
            return res
        end
        node, asking, kind = routes:reroute(key, node, err, broken, self.opts)
        if node then
            routes.count.incr(kind)
        end
    end
    return nil, "redis: " .. tostring(err)
end

-- The script's reply { allowed, remaining, retry_after_ms, reset_after_ms, window } for `action`
-- under `limits` (one per window), or nil, err; `options` (a list of name, value) follow the
-- action, and `send` (default: the script alone) sends it. Every key has the hash tag
-- {<name>:<key>}: one Cluster slot holds all of a key's windows, and the key's lease hash
-- (after them, when the limiter uses leases: every action then counts outstanding leases).
local function call_script(self, key, cost, action, limits, options, send)
    local base = self.prefix .. key .. "}"
    local suffixes, nkeys = self.suffixes, self.nkeys
    local args = {}
    for i = 1, nkeys do
        args[i] = base .. suffixes[i]
    end
    if self.script_keys > nkeys then
        args[nkeys + 1] = base .. ":leases"
    end
    local first = self.script_keys
    args[first + 1] = cost
    local windows, at = self.args, self.limit_at
    for i = 1, #windows do
        args[first + 1 + i] = windows[i]
    end
    for i = 1, nkeys do
        args[first + 1 + at[i]] = limits[i]
    end
    local tail, n = self.tails[action], #args
    for i = 1, #tail do
        args[n + i] = tail[i]
    end
    n = #args
    for i = 1, options and #options or 0 do
        args[n + i] = options[i]
    end
    return run(self, args[1], send or send_script, args)
end
_M.call_script = call_script
_M.send_script = send_script

-- Whether `a` and `b` hold the same limits.
local function same(a, b)
    for i = 1, #a do
        if a[i] ~= b[i] then
            return false
        end
    end
    return true
end

-- The refusal remembered for `key` if it covers `cost` under `limits`, and the time now in ms.
local function remembered(self, key, cost, limits)
    local refusal = self.refusals:get(key)
    if refusal and cost >= refusal.cost and same(limits, refusal.limits) then
        update_time()
        local now_ms = now() * 1000
        if refusal.until_ms > now_ms then
            return refusal, now_ms
        end
    end
end

-- allowed, remaining, retry_after_ms (nil: never), reset_after_ms, decided_locally, window,
-- stamp_ms (an admitted check's: the Redis time its cost was recorded at) | nil, err
function _M.decide(self, key, cost, commit, limits)
    limits = limits or self.configured
    local refusals = self.refusals
    if refusals then
        local refusal, now_ms = remembered(self, key, cost, limits)
        if refusal then
            return false, refusal.remaining, ceil(refusal.until_ms - now_ms),
                max(ceil(refusal.reset_at_ms - now_ms), 0), true, refusal.window
        end
    end
    local res, err = call_script(self, key, cost, commit and "check" or "peek", limits)
    if not res then
        return nil, err
    end
    local allowed, retry = res[1] == 1, res[3]
    if refusals and not allowed and retry > 0 then
        update_time()
        local now_ms = now() * 1000
        refusals:set(key, { cost = cost, limits = limits, remaining = res[2], until_ms = now_ms + retry,
            reset_at_ms = now_ms + res[4], window = res[5] }, retry / 1000)
    end
    return allowed, res[2], retry >= 0 and retry or nil, res[4], false, res[5], res[6]
end

-- The decision in resty.slidewin.answer's buffer, header values rendered.
_M.answer = answering(_M.decide)

-- store:refund(key, cost, stamp_ms, owe): `cost` given back in every window of `key`, from
-- the newest bucket, or, with `stamp_ms` (a reservation's: the stamp its check answered),
-- where it was recorded at stamp_ms or before (the script's stamp_ms); with `owe`, recorded
-- at stamp_ms whether it fits or not (the script's action owe, each window counting at most
-- twice its max_limit). A cosocket call: from a timer in the log phase (resty.slidewin does
-- that).
_M.refunds_at_stamp, _M.owes = true, true

function _M.refund(self, key, cost, stamp_ms, owe)
    local res, err = call_script(self, key, cost, owe and "owe" or "refund",
        owe and self.max_limits or self.configured, stamp_ms and { "stamp_ms", stamp_ms })
    if not res then
        return nil, err
    end
    if self.refusals and not owe then
        self.refusals:delete(key)
    end
    return true
end

-- store:record(key, text): units admitted elsewhere (the local fallback's, "AGE_MS:UNITS ...",
-- the script's record option) recorded in every window of `key` by a peek; true, or nil, err.
function _M.record(self, key, text)
    local res, err = call_script(self, key, 0, "peek", self.configured, { "record", text })
    if not res then
        return nil, err
    end
    return true
end

-- Live limits shared by every node: the hash slidewin:{<name>}:limits holds "limits" (one per
-- window, "10 50") and "base" (the configured limits of the node that set them). A node takes
-- them by the core's reload rule (slidewin.live_limits): window by window, the live limit while
-- its own configured limit is the one it was set under, else its configured limit; so a reload
-- whose config changes a limit applies the config's (until set_limit again), and one that does
-- not keeps the live one.
local function send_hset(self, red, asking, limits)
    if asking then
        red:asking()
    end
    return red:hset(self.limits_key, "limits", concat(limits, " "), "base", self.base)
end

local function send_hmget(self, red, asking)
    if asking then
        red:asking()
    end
    return red:hmget(self.limits_key, "limits", "base")
end

-- store:set_limits(limits): true, or nil, err. Every node decides with them from its next poll.
function _M.set_limits(self, limits)
    local res, err = run(self, self.limits_key, send_hset, limits)
    if not res then
        return nil, err
    end
    self.seen = concat(limits, " ")
    return true
end

-- The numbers of a hash field ("10 50"), or nil when the field is not there.
local function numbers(text)
    if type(text) ~= "string" then
        return nil
    end
    local list = {}
    for word in gmatch(text, "%S+") do
        list[#list + 1] = tonumber(word)
    end
    return list
end

-- store:poll_limits(): the live limits when they changed since the last poll (another node
-- set them, or this node's config changed), else nil. A failed read, or limits above a
-- window's max_limit, keep the limits this node has.
function _M.poll_limits(self)
    local res = run(self, self.limits_key, send_hmget)
    if not res then
        return nil
    end
    local live, base = numbers(res[1]), numbers(res[2])
    local ok, limits = pcall(live_limits, self.configured, base, live)
    if not ok or not config.check_limits(self.conf.windows, limits, "limits") then
        return nil
    end
    local text = concat(limits, " ")
    if text == self.seen then
        return nil
    end
    self.seen = text
    return limits
end

-- Redis holds the keys; counting them would cost a SCAN per scrape.
function _M.keys()
    return nil
end

-- Prometheus text of every Redis this worker's limiters use: redirects followed (MOVED, ASK,
-- a retry on a node a reload found) and reloads of the slot map / master address.
_M.metrics_text = topology.metrics_text

return _M
