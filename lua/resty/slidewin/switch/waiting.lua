-- resty.slidewin.switch.waiting: the places of one limiter's delay switch, shared by every
-- worker of this nginx (a slidewin.concurrency region of one key, made in init_by_lua*).
-- A place is given back by `give`, or when its worker dies, or once it has been held for
-- max_hold_ms (a request dropped while it waited): a crash never leaks one for good.

local concurrency = require("slidewin").concurrency

local pcall = pcall
local ngx = ngx

local _M = {}
local mt = { __index = _M }

local KEY = "waiting"

-- `max` places for limiter `name`, each held at most `max_hold_ms`, or nil, err.
function _M.new(name, max, max_hold_ms)
    local phase = ngx and ngx.get_phase and ngx.get_phase()
    if phase and phase ~= "init" then
        return nil, "delay must be configured in init_by_lua* (its max_waiting places are shared by "
            .. "every worker), not in " .. phase
    end
    local ok, slots = pcall(concurrency, {
        name = name .. ".delay", limit = max, max_hold_ms = max_hold_ms, keys = 1,
    })
    if not ok then
        return nil, "delay: " .. tostring(slots)
    end
    return setmetatable({ slots = slots }, mt)
end

-- A place (its token), or nil when all are taken.
function _M.take(self)
    local admitted, _, _, token = self.slots:enter(KEY)
    return admitted and token or nil
end

function _M.give(self, token)
    self.slots:leave(KEY, token)
end

return _M
