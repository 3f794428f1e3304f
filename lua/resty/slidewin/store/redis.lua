-- resty.slidewin.store.redis: one Redis shared by every worker of every nginx.
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
-- read_timeout_ms (100), pool_size (64), keepalive_ms (60000). A call waits at most
-- connect_timeout_ms + read_timeout_ms; when Redis is down, slow or answers an error,
-- incoming returns nil, err and the layer applies conf.on_store_error.
-- conf.local_refusal_cache: once Redis refuses a key for retry_after_ms, this worker refuses
-- the same (or a larger) cost for that key locally until then, without a round trip.
--
-- Keys: "slidewin:{<name>:<key>}" (and ":m" after it for the log's companion hash); the hash
-- tag keeps both in one Redis Cluster slot.

local ok_resty, redis = pcall(require, "resty.redis")
if not ok_resty then
    redis = require "nginx.redis" -- Debian's lua-nginx-redis: the same client, renamed
end
local lrucache = require "resty.lrucache"

local ngx = ngx
local now = ngx.now
local update_time = ngx.update_time
local unpack = unpack
local ceil, max = math.ceil, math.max
local byte, format, gsub = string.byte, string.format, string.gsub

local _M = {}
local mt = { __index = _M }

local DEFAULTS = {
    host = "127.0.0.1", port = 6379, db = 0, connect_timeout_ms = 50, read_timeout_ms = 100,
    pool_size = 64, keepalive_ms = 60000,
}
local COUNTS = { "port", "db", "connect_timeout_ms", "read_timeout_ms", "pool_size", "keepalive_ms" }
local KEYS_OF = { log = 2, buckets = 1, counter = 1 }

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

-- conf.redis with defaults, or nil, err naming the field and the value.
local function redis_options(given)
    if given ~= nil and type(given) ~= "table" then
        return nil, "redis must be a table, got " .. tostring(given)
    end
    local opts = {}
    for k, v in pairs(DEFAULTS) do
        opts[k] = v
    end
    for k, v in pairs(given or {}) do
        if DEFAULTS[k] == nil and k ~= "password" then
            return nil, "redis." .. tostring(k) .. " is not an option (host, port, password, db, "
                .. "connect_timeout_ms, read_timeout_ms, pool_size, keepalive_ms)"
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
    return opts
end

function _M.new(conf)
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
        script = script,
        nkeys = KEYS_OF[conf.algorithm],
        prefix = "slidewin:{" .. conf.name .. ":",
        tails = tails,
        connect_opts = { pool_size = opts.pool_size },
        refusals = refusals,
    }, mt)
end

local function connect(self)
    local opts = self.opts
    local red = redis:new()
    -- set_timeout, not set_timeouts: Debian's nginx.redis (0.27) has only the former.
    red:set_timeout(opts.connect_timeout_ms)
    local ok, err = red:connect(opts.host, opts.port, self.connect_opts)
    if not ok then
        return nil, "redis connect: " .. tostring(err)
    end
    red:set_timeout(opts.read_timeout_ms)
    if red:get_reused_times() == 0 then
        if opts.password then
            ok, err = red:auth(opts.password)
        end
        if ok and opts.db ~= 0 then
            ok, err = red:select(opts.db)
        end
        if not ok then
            red:close()
            return nil, "redis auth/select: " .. tostring(err)
        end
    end
    return red
end

-- The script's reply { allowed, remaining, retry_after_ms, reset_after_ms } for `mode`, or nil, err.
local function run(self, key, cost, mode)
    local red, err = connect(self)
    if not red then
        return nil, err
    end
    local script, tail = self.script, self.tails[mode]
    local data = self.prefix .. key .. "}"
    local meta = self.nkeys == 2 and data .. ":m" or nil
    local args = meta and { data, meta, tail[1], tail[2], cost, unpack(tail, 3) }
        or { data, tail[1], tail[2], cost, unpack(tail, 3) }
    local res
    res, err = red:evalsha(script.sha, self.nkeys, unpack(args))
    if not res and err and err:find("^NOSCRIPT") then
        res, err = red:eval(script.source, self.nkeys, unpack(args))
    end
    if res then
        red:set_keepalive(self.opts.keepalive_ms, self.opts.pool_size)
        return res
    end
    if res == nil then
        red:close() -- a broken or timed-out connection must not go back to the pool
    else
        red:set_keepalive(self.opts.keepalive_ms, self.opts.pool_size)
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
function _M.incoming(self, key, cost, commit)
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

return _M
