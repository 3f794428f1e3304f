-- resty.slidewin.store.redis.connection: one pooled connection to one Redis node, over TLS when
-- asked, authenticated (AUTH [user] password) and on its db once per new socket.
--
-- A pool per node and identity: nodes, TLS (server name, verification), user, password and db all
-- name the pool, so a socket set up for one identity is never reused by another.

local ok_resty, redis = pcall(require, "resty.redis")
if not ok_resty then
    redis = require "nginx.redis" -- Debian's lua-nginx-redis: the same client, renamed
end

local rawget, setmetatable, tostring = rawget, setmetatable, tostring
local concat = table.concat

local _M = {}

-- Options of conf.redis that set who a connection is, by type.
_M.IDENTITY = {
    ssl = "boolean", ssl_verify = "boolean", server_name = "string",
    username = "string", sentinel_username = "string", sentinel_password = "string",
}

-- nil, or the error naming the first identity option of conf.redis `given` of a wrong type or
-- without the option it needs; `topology`: "standalone", "cluster_nodes" or "sentinels".
function _M.check(given, topology)
    for name, kind in pairs(_M.IDENTITY) do
        if given[name] ~= nil and type(given[name]) ~= kind then
            return "redis." .. name .. " must be a " .. kind .. ", got " .. tostring(given[name])
        end
    end
    if given.ssl_verify and given.ssl ~= true then
        return "redis.ssl_verify goes with redis.ssl = true, got ssl = " .. tostring(given.ssl)
    elseif given.server_name ~= nil and given.ssl ~= true then
        return "redis.server_name goes with redis.ssl = true, got ssl = " .. tostring(given.ssl)
    elseif given.username ~= nil and given.password == nil then
        return "redis.username " .. given.username .. " needs redis.password (AUTH user password)"
    elseif given.sentinel_username ~= nil and given.sentinel_password == nil then
        return "redis.sentinel_username " .. given.sentinel_username
            .. " needs redis.sentinel_password (AUTH user password on the sentinels)"
    elseif topology ~= "sentinels" and (given.sentinel_password or given.sentinel_username) then
        return "redis.sentinel_password and redis.sentinel_username go with redis.sentinels"
    end
end

-- opts made ready for open(): the pool tag of its identity and the connect options per node.
function _M.prepare(opts)
    local tag = concat({
        opts.ssl and ("tls:" .. tostring(opts.server_name) .. ":" .. (opts.ssl_verify and "verify" or "noverify"))
            or "plain",
        "user:" .. (opts.username or ""),
        "password:" .. (opts.password and ngx.md5(opts.password) or ""),
        "db:" .. opts.db,
    }, "|")
    local pool_size = opts.pool_size
    opts.connect_opts = setmetatable({}, { __index = function(per_node, name)
        local connect_opts = { pool_size = pool_size, pool = name .. "|" .. tag }
        per_node[name] = connect_opts
        return connect_opts
    end })
    return opts
end

-- The options for the sentinels of `opts`: the same TLS and timeouts, the sentinel's own user
-- and password, db 0 (made once per opts).
function _M.for_sentinels(opts)
    local sentinel_opts = opts.sentinel_opts
    if not sentinel_opts then
        sentinel_opts = {}
        for k, v in pairs(opts) do
            sentinel_opts[k] = v
        end
        sentinel_opts.username, sentinel_opts.password = opts.sentinel_username, opts.sentinel_password
        sentinel_opts.db, sentinel_opts.role = 0, "sentinel "
        opts.sentinel_opts = _M.prepare(sentinel_opts)
    end
    return sentinel_opts
end

-- TLS, AUTH and SELECT on a new socket: true, or nil, err naming the step that failed.
local function set_up(red, node, opts)
    local ok, err = true, nil
    if opts.ssl then
        -- On the socket: nginx.redis 0.27's connect has no ssl option (resty.redis >= 0.28 has;
        -- both keep the cosocket in `_sock`). pcall: resty.core 0.1.25 raises an assertion
        -- instead of returning an error when a verification fails while the handshake ends at
        -- once (nginx logs the reason on the line before).
        local sock = rawget(red, "_sock")
        local returned
        returned, ok, err = pcall(sock.sslhandshake, sock, nil, opts.server_name, opts.ssl_verify)
        if not returned then
            ok, err = nil, "the certificate was refused (" .. tostring(ok) .. ")"
        end
        if not ok then
            return nil, "redis TLS handshake with " .. (opts.role or "") .. node.name .. " (server_name "
                .. tostring(opts.server_name) .. ", ssl_verify " .. tostring(opts.ssl_verify == true)
                .. "): " .. tostring(err)
        end
    end
    if opts.password then
        if opts.username then
            ok, err = red:auth(opts.username, opts.password)
        else
            ok, err = red:auth(opts.password)
        end
        if not ok then
            return nil, "redis AUTH on " .. (opts.role or "") .. node.name .. " as user "
                .. (opts.username or "default") .. " failed: " .. tostring(err)
        end
    end
    if opts.db ~= 0 then
        ok, err = red:select(opts.db)
        if not ok then
            return nil, "redis SELECT " .. opts.db .. " on " .. node.name .. ": " .. tostring(err)
        end
    end
    return true
end

-- A connection to `node` ({ host, port, name }) with opts' timeouts, TLS, user, password and
-- db, or nil, err.
function _M.open(node, opts)
    local red = redis:new()
    -- set_timeout, not set_timeouts: Debian's nginx.redis (0.27) has only the former.
    red:set_timeout(opts.connect_timeout_ms)
    local ok, err = red:connect(node.host, node.port, opts.connect_opts[node.name])
    if not ok then
        return nil, "redis connect " .. (opts.role or "") .. node.name .. ": " .. tostring(err)
    end
    red:set_timeout(opts.read_timeout_ms)
    if red:get_reused_times() == 0 then
        ok, err = set_up(red, node, opts)
        if not ok then
            red:close()
            return nil, err
        end
    end
    return red
end

-- Back to the pool after a reply (`res` not nil, even an error reply); closed after a broken
-- or timed-out exchange, which must not go back to the pool.
function _M.release(red, res, opts)
    if res == nil then
        red:close()
    else
        red:set_keepalive(opts.keepalive_ms, opts.pool_size)
    end
end

-- One command on `node`: its reply, or nil, err (a connection error; `broken` true) or
-- false, err (an error reply).
function _M.command(node, opts, name, ...)
    local red, err = _M.open(node, opts)
    if not red then
        return nil, err, true
    end
    local res
    res, err = red[name](red, ...)
    _M.release(red, res, opts)
    return res, err, res == nil
end

-- { host, port, name = "host:port" } from "host:port", or nil.
function _M.node(address)
    local host, port = tostring(address):match("^(.+):(%d+)$")
    port = tonumber(port)
    if not (host and port and port >= 1 and port <= 65535) then
        return nil
    end
    return { host = host, port = port, name = host .. ":" .. port }
end

return _M
