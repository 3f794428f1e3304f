-- resty.slidewin.switch.dry_run (option `mode = "dry_run"`): every request decided and
-- recorded as usual, none refused. A would-be refusal is counted (outcome "would_reject"),
-- keeps the configured headers (no Retry-After: the request goes on) and is summed into one
-- error.log line (warn) per error_log_interval_ms per worker:
--   slidewin api: dry run: 15 request(s) would have been refused since the last line

local invalid = require("resty.slidewin.config").invalid
local now_ms = require("slidewin").now_ms

local huge = math.huge
local ngx = ngx

local _M = { option = "mode" }

function _M.configure(mode, conf, hooks)
    if mode == "enforce" then
        return true
    end
    if mode ~= "dry_run" then
        return invalid("mode", '"enforce" or "dry_run"', mode)
    end
    local interval = conf.error_log_interval_ms
    local unlogged, logged_at = 0, -huge
    hooks.outcomes[#hooks.outcomes + 1] = "would_reject"
    return hooks:add("let_through", function(sw)
        sw.counters:incr("would_reject")
        unlogged = unlogged + 1
        local now = now_ms()
        if now - logged_at >= interval then
            ngx.log(ngx.WARN, "slidewin ", sw.name, ": dry run: ", unlogged,
                " request(s) would have been refused since the last line")
            unlogged, logged_at = 0, now
        end
    end)
end

return _M
