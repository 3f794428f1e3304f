-- resty.slidewin.store.nginx: the zone a slidewin_zone directive of the native nginx module
-- declared (docs/nginx-module.md, "two doors"), named by conf.zone (default conf.name). One
-- region, two doors: the limiter decides, lists its top keys, counts and sets its live limits
-- on the very words slidewin_limit decides with in every worker, like store "shm".
--
-- nginx.conf holds the rule: a config gives no windows; each window is named as the module
-- names it (its name=, else the zone's name, then "<zone>-<span>"). The module maps its zones after
-- init_by_lua* has run, so the store is made in a worker: a registry made in init_by_lua* makes
-- its limiters of this store in every worker's resty.slidewin.init_worker().

local base = require "resty.slidewin.store.local"
local config = require "resty.slidewin.config"
local slidewin = require "slidewin"
local nginx_zone = slidewin.nginx_zone

local _M = { in_worker = true }

-- The zones this worker opened, by name: one limiter object over each zone's words.
local opened = {}

-- The zone `conf` names, opened, or nil, err.
local function zone_of(conf)
    local name = conf.zone
    if name == nil then
        name = conf.name
    end
    if type(name) ~= "string" or name == "" then
        return nil, "zone must be the name of a slidewin_zone in nginx.conf, got " .. config.show(name)
    end
    local lim = opened[name]
    if lim then
        return lim
    end
    local err
    lim, err = nginx_zone(name)
    if not lim then
        return nil, "zone " .. config.show(name) .. ": " .. err
    end
    opened[name] = lim
    return lim
end

-- A copy of `opts` with the zone's windows (nginx.conf's rule, with its live limits), or
-- nil, err.
function _M.declared_rule(opts)
    for _, field in ipairs { "windows", "limit", "window_ms", "algorithm" } do
        local v = opts[field]
        if v ~= nil then
            return nil, field .. ' is nginx.conf\'s: store "nginx" takes the windows of its slidewin_zone, got '
                .. field .. " = " .. (type(v) == "table" and "a table" or config.show(v))
        end
    end
    local lim, err = zone_of(opts)
    if not lim then
        return nil, err
    end
    local conf = {}
    for k, v in pairs(opts) do
        conf[k] = v
    end
    conf.windows = lim:rule().windows -- named as nginx.conf names them
    return conf
end

function _M.new(conf)
    local lim, err = zone_of(conf)
    if not lim then
        return nil, err
    end
    -- The zone also counts the would-be refusals of the native module's dry runs.
    return setmetatable({ lim = lim, counts_decisions = true, outcomes = { "would_reject" } },
        { __index = base })
end

return setmetatable(_M, { __index = base })
