-- resty.slidewin.switch: the gateway switches, each a module of its own that hooks into the one
-- response path of resty.slidewin's enforce. A switch is a module with
--   option                    its config key
--   configure(value, conf, hooks) -> true | nil, err   (called only when conf[option] is set)
-- that adds the hooks it needs with hooks:add(point, fn):
--   exempt(sw, key) -> true          admit without asking the store (counted "exempt")
--   admitted(sw, key, cost)          after an admission the store recorded
--   wait(sw, key, cost, opts, retry_after_ms) -> nil | the next decision (sw:answer's)
--                                    a refusal that may wait and be decided again
--   let_through(sw)                  a refusal that goes on (counted by the switch)
--   body(sw, answer, store_failed)   the refusal's response (default: conf.body, text)
-- Several switches may watch `admitted` and `let_through`, and `exempt` is asked of each in
-- turn; `wait` and `body` decide the answer, so one switch at most sets each.
-- hooks.outcomes[#+1] = name gives a switch a counter of its own in the metrics.
-- Adding a switch: its module, and one line in SWITCHES.

local SWITCHES = {
    require "resty.slidewin.switch.exempt",
    require "resty.slidewin.switch.refund",
    require "resty.slidewin.switch.delay",
    require "resty.slidewin.switch.dry_run",
    require "resty.slidewin.switch.body_json",
}

local format = string.format

local _M = {}

-- How two hooks at one point make one.
local COMBINE = {
    exempt = function(first, second)
        return function(sw, key)
            return first(sw, key) or second(sw, key)
        end
    end,
    admitted = function(first, second)
        return function(sw, key, cost)
            first(sw, key, cost)
            second(sw, key, cost)
        end
    end,
    let_through = function(first, second)
        return function(sw)
            first(sw)
            second(sw)
        end
    end,
}

local hooks_mt = { __index = {} }

-- hooks:add(point, fn): true, or nil, err when `point` takes one hook and has it.
function hooks_mt.__index.add(hooks, point, fn)
    local held = hooks[point]
    if held == nil then
        hooks[point] = fn
        return true
    end
    local combine = COMBINE[point]
    if not combine then
        return nil, format("two switches answer %s: set one of them", point)
    end
    hooks[point] = combine(held, fn)
    return true
end

-- The hooks of `conf`'s switches (nil when it sets none), or nil, err naming the option and its
-- value. Called before the store is made, so a bad switch makes nothing.
function _M.configure(conf)
    local hooks
    for _, switch in ipairs(SWITCHES) do
        local value = conf[switch.option]
        if value ~= nil then
            hooks = hooks or setmetatable({ outcomes = {} }, hooks_mt)
            local ok, err = switch.configure(value, conf, hooks)
            if not ok then
                return nil, err
            end
        end
    end
    return hooks
end

return _M
