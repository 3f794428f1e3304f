-- resty.slidewin.controllers: the timers that run, every interval, the tick of each controller
-- of one kind (adaptive limits, queue limits; kept in resty.slidewin.registry). A controller
-- has `name`, `interval_ms` and `tick(self)` -> value, or nil, err.

local ngx = ngx
local pcall, ipairs = pcall, ipairs

local _M = {}

-- init_worker_by_lua: a timer per controller of `objects` (a resty.slidewin.registry kind) in
-- this worker; a tick that raises or returns an error is logged. true, or nil, err.
function _M.start(objects)
    for _, controller in ipairs(objects:each()) do
        local ok, err = ngx.timer.every(controller.interval_ms / 1000, function(premature)
            if premature then
                return
            end
            local fine, value, tick_err = pcall(controller.tick, controller)
            if not fine or tick_err then
                ngx.log(ngx.ERR, "slidewin ", objects.kind, " ", controller.name, ": ", fine and tick_err or value)
            end
        end)
        if not ok then
            return nil, err
        end
    end
    return true
end

return _M
