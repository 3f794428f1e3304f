-- resty.slidewin.controllers: the named controllers of one kind (adaptive limits, queue
-- limits), made in init_by_lua*, and the timers that run their tick every interval.
-- A controller is a table with `name`, `interval_ms` and `tick(self)` -> value, or nil, err.

local ngx = ngx
local pcall, tostring, setmetatable, ipairs = pcall, tostring, setmetatable, ipairs

local _M = {}
local mt = { __index = _M }

-- An empty set of controllers called `kind`s ("adaptive limit").
function _M.new(kind)
    return setmetatable({ kind = kind, by_name = {}, names = {} }, mt)
end

-- Keeps `controller` under its name (a later one of the same name replaces it, in place).
function _M.add(self, controller)
    if not self.by_name[controller.name] then
        self.names[#self.names + 1] = controller.name
    end
    self.by_name[controller.name] = controller
end

-- The controller called `name`, or nil, err.
function _M.get(self, name)
    local controller = self.by_name[name]
    if not controller then
        return nil, "no " .. self.kind .. " called " .. tostring(name)
    end
    return controller
end

-- The controllers in the order they were made.
function _M.each(self)
    local list = {}
    for i, name in ipairs(self.names) do
        list[i] = self.by_name[name]
    end
    return list
end

-- init_worker_by_lua: a timer per controller in this worker; a tick that raises or returns an
-- error is logged. true, or nil, err.
function _M.start(self)
    for _, controller in ipairs(self:each()) do
        local ok, err = ngx.timer.every(controller.interval_ms / 1000, function(premature)
            if premature then
                return
            end
            local fine, value, tick_err = pcall(controller.tick, controller)
            if not fine or tick_err then
                ngx.log(ngx.ERR, "slidewin ", self.kind, " ", controller.name, ": ", fine and tick_err or value)
            end
        end)
        if not ok then
            return nil, err
        end
    end
    return true
end

return _M
