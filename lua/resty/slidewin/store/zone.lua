-- resty.slidewin.store.zone: a rule in a zone of rules made at run time
-- (resty.slidewin.zone): conf.zone names the zone, conf.size ("64k") is the rule's share of
-- it. Made in any phase: the rule is put in the zone (or found there, when another worker put
-- the same one), exact across workers like store "shm", and counts its own decisions.

local base = require "resty.slidewin.store.local"
local bytes = require("resty.slidewin.config").bytes
local zones = require "resty.slidewin.zone"

local _M = {}

function _M.new(conf)
    local zone, err = zones.get(conf.zone)
    if not zone then
        return nil, err
    end
    local size = bytes(conf.size or "64k")
    if not size then
        return nil, 'size must be a number of bytes or a size like "64k", got ' .. tostring(conf.size)
    end
    local ok, lim = pcall(zone.put, zone, conf.name, {
        windows = conf.windows,
        size = size,
        max_key_bytes = conf.max_key_bytes,
    })
    if not ok then
        return nil, lim
    end
    return setmetatable({ lim = lim, counts_decisions = true }, { __index = base })
end

return setmetatable(_M, { __index = base })
