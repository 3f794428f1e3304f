-- resty.slidewin.admin: read and change a registry's live limits over HTTP, for a location
-- only the operator reaches.
--
--   location = /slidewin/limits {
--       allow 127.0.0.1; deny all;
--       content_by_lua_block { require("resty.slidewin.admin").serve(require("limits")) }
--   }
--
--   GET                                   {"api":[{"name":"api","limit":5,"max_limit":50,"window_ms":10000}]}
--   POST ?limiter=api&limit=20[&window=1|name]   sets it (every worker at once); answers the
--                                         limiter's windows as above, or 400 with the error

local concat = table.concat
local format = string.format
local ngx = ngx

local _M = {}

local function quoted(s)
    return '"' .. s:gsub('[%c"\\]', function(c) return format("\\u%04x", c:byte()) end) .. '"'
end

-- [{"name", "limit", "max_limit", "window_ms"}, ...] of one limiter.
local function windows_json(sw)
    local limits, items = sw:limits(), {}
    for i, w in ipairs(sw.windows) do
        items[i] = format('{"name":%s,"limit":%d,"max_limit":%d,"window_ms":%d}',
            quoted(w.name), limits[i], w.max_limit, w.window_ms)
    end
    return "[" .. concat(items, ",") .. "]"
end

local function answer(status, body)
    ngx.status = status
    ngx.header["Content-Type"] = status == 200 and "application/json" or "text/plain"
    ngx.say(body)
    return ngx.exit(status)
end

-- Serves the request on `registry` (a resty.slidewin.registry).
function _M.serve(registry)
    local method = ngx.req.get_method()
    if method == "GET" then
        local items = {}
        for i, name in ipairs(registry.names) do
            items[i] = quoted(name) .. ":" .. windows_json(registry.limiters[name])
        end
        return answer(200, "{" .. concat(items, ",") .. "}")
    end
    if method ~= "POST" and method ~= "PUT" then
        return answer(405, "use GET to read the limits, POST ?limiter=&limit=&window= to set one")
    end
    local args = ngx.req.get_uri_args()
    local sw, err = registry:get(args.limiter)
    if not sw then
        return answer(400, "limiter: " .. err)
    end
    local window = args.window and (tonumber(args.window) or args.window)
    local ok
    ok, err = sw:set_limit(tonumber(args.limit) or args.limit, window)
    if not ok then
        return answer(400, err)
    end
    ngx.log(ngx.NOTICE, "slidewin ", sw.name, ": limit of window ", window or 1, " set to ", args.limit,
        " by ", ngx.var.remote_addr)
    return answer(200, windows_json(sw))
end

return _M
