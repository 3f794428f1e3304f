-- resty.slidewin.store.redis.connection: one pooled connection to one Redis node (a pool per
-- host:port, kept by the cosocket layer), authenticated and on its db once per new socket.

local ok_resty, redis = pcall(require, "resty.redis")
if not ok_resty then
    redis = require "nginx.redis" -- Debian's lua-nginx-redis: the same client, renamed
end

local _M = {}

-- A connection to `node` ({ host, port }) with opts' timeouts, password and db, or nil, err.
function _M.open(node, opts)
    local red = redis:new()
    -- set_timeout, not set_timeouts: Debian's nginx.redis (0.27) has only the former.
    red:set_timeout(opts.connect_timeout_ms)
    local ok, err = red:connect(node.host, node.port, opts.connect_opts)
    if not ok then
        return nil, "redis connect " .. node.name .. ": " .. tostring(err)
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
            return nil, "redis auth/select " .. node.name .. ": " .. tostring(err)
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
