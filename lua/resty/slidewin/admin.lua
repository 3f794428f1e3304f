-- resty.slidewin.admin: read and change live limits over HTTP, for a location only the
-- operator reaches: a registry's limiters (serve), a zone's rules (serve_zone).
--
--   location = /slidewin/limits {
--       allow 127.0.0.1; deny all;
--       content_by_lua_block { require("resty.slidewin.admin").serve(require("limits")) }
--   }
--
--   GET                                   {"api":[{"name":"api","limit":5,"max_limit":50,"window_ms":10000}]}
--   POST ?limiter=api&limit=20[&window=1|name]   sets it (every worker at once); answers the
--                                         limiter's windows as above, or 400 with the error
--
--   location = /slidewin/rules {
--       allow 127.0.0.1; deny all;
--       content_by_lua_block { require("resty.slidewin.admin").serve_zone("gateway") }
--   }
--
--   GET                                   {"plan-free":[10,1000]} (each rule's live limits)
--   POST ?rule=plan-free&limit=20[&window=1]   sets one window's limit; answers the rule's limits
--   DELETE ?rule=plan-free                removes the rule
--
-- Every request passes a resty.slidewin.guard (the second argument, default: no token, this
-- server's loopback origins): a change needs POST (or PUT, DELETE), the header
-- X-Slidewin-Admin: 1 and no foreign Origin; GET never changes anything. Every change is
-- logged at NOTICE: who, what, the old and the new value.

local guard_module = require "resty.slidewin.guard"
local json = require "resty.slidewin.json"
local show = require("resty.slidewin.config").show

local concat = table.concat
local ngx = ngx

local _M = {}

local LIMITS_METHODS = "GET, HEAD, POST, PUT"
local RULES_METHODS = "GET, HEAD, POST, PUT, DELETE"

local quoted = json.quote

-- [{"name", "limit", "max_limit", "window_ms"}, ...] of one limiter.
local function windows_json(sw)
    local limits, items = sw:limits(), {}
    for i, w in ipairs(sw.windows) do
        items[i] = json.object { "name", w.name, "limit", limits[i], "max_limit", w.max_limit,
            "window_ms", w.window_ms }
    end
    return json.array(items)
end

local function answer(status, body)
    ngx.status = status
    ngx.header["Content-Type"] = status == 200 and "application/json" or "text/plain"
    ngx.say(body)
    return ngx.exit(status)
end

-- The guard given to serve*, or the default one; anything else is a config error.
local function guard_of(guard)
    if guard == nil then
        return guard_module.default()
    end
    if not guard_module.is_guard(guard) then
        error("resty.slidewin.admin: guard must be a resty.slidewin.guard (made by its new), got "
            .. tostring(guard), 3)
    end
    return guard
end

-- Who may do what the request asks: who asked and whether it is a change (it names `target`,
-- or its method is not GET or HEAD), or a refusal. A GET naming a target is refused (405):
-- it would otherwise answer 200 and leave a caller believing the change was made.
local function admit(guard, methods, target)
    local method = ngx.req.get_method()
    if target == nil and (method == "GET" or method == "HEAD") then
        return guard:allow_read(), false
    end
    return guard:allow_change(methods), true
end

local function number_or_text(v)
    return v and (tonumber(v) or v)
end

-- Serves the request on `registry` (a resty.slidewin.registry), behind `guard`.
function _M.serve(registry, guard)
    local args = ngx.req.get_uri_args()
    local who, change = admit(guard_of(guard), LIMITS_METHODS, args.limiter or args.limit)
    if not change then
        local items = {}
        for _, name in ipairs(registry.names) do
            items[#items + 1], items[#items + 2] = name, windows_json(registry.limiters[name])
        end
        return answer(200, json.encode(json.object(items)))
    end
    local sw, err = registry:get(args.limiter)
    if not sw then
        return answer(400, "limiter: " .. err)
    end
    local window = number_or_text(args.window)
    local before = sw:limits()
    local ok
    ok, err = sw:set_limit(number_or_text(args.limit), window)
    if not ok then
        return answer(400, err)
    end
    local after = sw:limits()
    for i, w in ipairs(sw.windows) do
        if i == (window or 1) or w.name == window then
            ngx.log(ngx.NOTICE, "slidewin admin: ", who, " set limiter ", quoted(sw.name), " window ", i,
                " (", quoted(w.name), ") limit ", before[i], " -> ", after[i])
        end
    end
    return answer(200, json.encode(windows_json(sw)))
end

-- {"rule":[limit, ...], ...} of every rule of `zone`.
local function rules_json(zone)
    local items = {}
    for _, name in ipairs(zone:names()) do
        local rule = zone:get(name)
        items[#items + 1], items[#items + 2] = name, json.array(rule and rule:limits() or {})
    end
    return json.encode(json.object(items))
end

-- Serves the request on the rules of zone `zone_name` (a resty.slidewin.zone), behind `guard`.
function _M.serve_zone(zone_name, guard)
    local zone, err = require("resty.slidewin.zone").get(zone_name)
    if not zone then
        error("resty.slidewin.admin.serve_zone: " .. err, 2)
    end
    local args = ngx.req.get_uri_args()
    local who, change = admit(guard_of(guard), RULES_METHODS, args.rule or args.limit)
    if not change then
        return answer(200, rules_json(zone))
    end
    local name = args.rule
    local rule = type(name) == "string" and zone:get(name)
    if not rule then
        return answer(400, "rule must name a rule of zone " .. quoted(zone_name) .. ", got " .. show(name))
    end
    local before = rule:limits()
    if ngx.req.get_method() == "DELETE" then
        zone:remove(name)
        ngx.log(ngx.NOTICE, "slidewin admin: ", who, " removed rule ", quoted(name), " of zone ",
            quoted(zone_name), " (limits ", concat(before, ", "), ")")
        return answer(200, rules_json(zone))
    end
    local window = number_or_text(args.window) or 1
    local ok
    ok, err = pcall(rule.set_limit, rule, number_or_text(args.limit), window)
    if not ok then
        return answer(400, tostring(err):match("^[^\n]*"))
    end
    ngx.log(ngx.NOTICE, "slidewin admin: ", who, " set rule ", quoted(name), " of zone ", quoted(zone_name),
        " window ", window, " limit ", before[window], " -> ", rule:limits()[window])
    return answer(200, json.encode(json.array(rule:limits())))
end

return _M
