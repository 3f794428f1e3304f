-- resty.slidewin.zone: zones of rules made, changed and removed while nginx runs.
--
--   init_by_lua_block {
--       require("resty.slidewin.zone").new{ name = "gateway", size = "8m", max_rules = 1024 }
--   }
--   -- then in any worker, any phase (a gateway's plugin config, an admin location):
--   local sw = require("resty.slidewin").new{ name = "plan-free", store = "zone", zone = "gateway",
--       windows = { { limit = 10, window_ms = 1000 }, { limit = 1000, window_ms = 3600000 } },
--       size = "64k" }                    -- the rule's share of the zone
--   sw:enforce(key)
--   require("resty.slidewin.zone").get("gateway"):remove("plan-free")
--
-- The zone is one region of shared memory (made in init_by_lua*, kept by name across reloads)
-- holding up to max_rules rules; a rule's memory comes from the zone's free pages and goes back
-- to them a second after the rule is removed. A rule that does not fit is nil, err naming the
-- bytes it needs. Putting a rule again with other limits keeps its keys' windows; with other
-- windows it replaces the rule, and every worker's limiter follows at its next request, its
-- decisions and its headers alike.

local slidewin = require "slidewin"
local bytes = require("resty.slidewin.config").bytes
local zones = require("resty.slidewin.registry").kind("zone")

local _M = {}

-- A zone, or nil, err. Made in init_by_lua*, so that every worker shares it.
function _M.new(opts)
    if type(opts) ~= "table" then
        return nil, "opts must be a table, got " .. tostring(opts)
    end
    local phase = ngx and ngx.get_phase and ngx.get_phase()
    if phase and phase ~= "init" then
        return nil, "a zone must be made in init_by_lua* (before the workers fork), not in " .. phase
    end
    if type(opts.name) ~= "string" then
        return nil, "name must be a string, got " .. tostring(opts.name)
    end
    local size = bytes(opts.size or "8m")
    if not size then
        return nil, 'size must be a number of bytes or a size like "8m", got ' .. tostring(opts.size)
    end
    local ok, zone = pcall(slidewin.zone, { name = opts.name, size = size, max_rules = opts.max_rules })
    if not ok then
        return nil, zone
    end
    zones:add(zone, opts.name)
    return zone
end

-- The zone called `name`, or nil, err.
function _M.get(name)
    local zone = zones:get(name)
    if not zone then
        return nil, "zone must name a zone made by resty.slidewin.zone.new in init_by_lua*, got "
            .. tostring(name)
    end
    return zone
end

return _M
