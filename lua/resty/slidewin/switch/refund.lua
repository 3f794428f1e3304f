-- resty.slidewin.switch.refund (option `refund_statuses = { 500, 502, 503, 504 }` or a
-- function(status) -> boolean): an admitted request whose response status is one of them
-- gets its cost back in every window (sw:refund), so an upstream's failure does not cost
-- the client its quota. Needs, where such limiters enforce:
--   log_by_lua_block { require("resty.slidewin").log() }
-- In-process stores (shm, local, zone) give back at once in the log phase; the others
-- (redis: no cosocket in the log phase) from a zero-delay timer (sw:refund decides which).

local invalid = require("resty.slidewin.config").invalid
local http_status = require("slidewin").http_status
local phases = require "resty.slidewin.phases"

local format = string.format
local ngx = ngx

local _M = { option = "refund_statuses" }

-- The predicate for `statuses` (a list or a function), or nil, err.
local function predicate(statuses)
    if type(statuses) == "function" then
        return statuses
    end
    if type(statuses) ~= "table" or #statuses == 0 then
        return invalid("refund_statuses", "a list of HTTP statuses or a function(status)", statuses)
    end
    local set = {}
    for i, status in ipairs(statuses) do
        if not http_status(status) then
            return invalid(format("refund_statuses[%d]", i), "an HTTP status (100 to 599)", status)
        end
        set[status] = true
    end
    return function(status)
        return set[status] == true
    end
end

function _M.configure(statuses, _, hooks)
    local refunds, err = predicate(statuses)
    if not refunds then
        return nil, err
    end
    phases.on_log("refund", _M.log)
    return hooks:add("admitted", function(sw, key, cost)
        local ctx = ngx.ctx
        local list = ctx.slidewin_refunds or {}
        list[#list + 1] = { sw = sw, refunds = refunds, key = key, cost = cost or 1 }
        ctx.slidewin_refunds = list
    end)
end

-- The log phase's part (resty.slidewin.phases): gives back the cost of this request's
-- admissions whose limiter refunds its response status.
function _M.log()
    local ctx = ngx.ctx
    local list = ctx.slidewin_refunds
    if not list then
        return
    end
    ctx.slidewin_refunds = nil
    local status = ngx.status
    for _, admitted in ipairs(list) do
        if admitted.refunds(status) then
            local sw = admitted.sw
            local ok, err = sw:refund(admitted.key, admitted.cost)
            if not ok then
                ngx.log(ngx.ERR, "slidewin ", sw.name, ": refund failed: ", err)
            end
        end
    end
end

return _M
