-- resty.slidewin.switch: the gateway switches, each a module of its own that hooks into the one
-- response path of resty.slidewin's enforce. A switch is a module with
--   option                    its config key
--   configure(value, conf, hooks) -> true | nil, err   (called only when conf[option] is set)
-- that sets the hooks it needs:
--   hooks.exempt(sw, key) -> true          admit without asking the store (counted "exempt")
--   hooks.admitted(sw, key, cost)          after an admission the store recorded
--   hooks.wait(sw, key, cost, opts, retry_after_ms) -> nil | the next decision (sw:answer's)
--                                          a refusal that may wait and be decided again
--   hooks.let_through(sw)                  a refusal that goes on (counted by the switch)
--   hooks.body(sw, answer, store_failed)   the refusal's response (default: conf.body, text)
--   hooks.outcomes[#+1] = name             a counter of its own in the metrics
-- Adding a switch: its module, and one line in SWITCHES.

local SWITCHES = {
    require "resty.slidewin.switch.exempt",
    require "resty.slidewin.switch.refund",
    require "resty.slidewin.switch.delay",
    require "resty.slidewin.switch.dry_run",
    require "resty.slidewin.switch.body_json",
}

local _M = {}

-- The hooks of `conf`'s switches (nil when it sets none), or nil, err naming the option and its
-- value. Called before the store is made, so a bad switch makes nothing.
function _M.configure(conf)
    local hooks
    for _, switch in ipairs(SWITCHES) do
        local value = conf[switch.option]
        if value ~= nil then
            hooks = hooks or { outcomes = {} }
            local ok, err = switch.configure(value, conf, hooks)
            if not ok then
                return nil, err
            end
        end
    end
    return hooks
end

return _M
