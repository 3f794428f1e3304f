-- resty.slidewin.window_metrics: how full the windows are, in Prometheus text (issue 19),
-- for the limiters whose store can walk its keys (shm, zone: resty.slidewin.top.scan).
--
--   slidewin_window_keys_at_limit{limiter}     live keys whose next request of cost 1 is refused
--   slidewin_window_usage_ratio{limiter,le}    histogram of count / limit over live keys (a
--                                              key of several windows: its nearest its limit)

local concat = table.concat
local format = string.format

local _M = {}

local AT_LIMIT = "slidewin_window_keys_at_limit"
local RATIO = "slidewin_window_usage_ratio"

-- The text of both families for metrics objects `list` (resty.slidewin.metrics: .name and
-- .store) and their scans (`scans[i]`: top.scan(list[i], 0), nil when its store cannot
-- tell), "" when no store can tell.
function _M.render(list, scans)
    local at_limit, ratio = {}, {}
    for i, m in ipairs(list) do
        local u = scans[i]
        if u then
            local limiter = 'limiter="' .. m.name .. '"'
            at_limit[#at_limit + 1] = format("%s{%s} %d\n", AT_LIMIT, limiter, u.at_limit)
            for i, bound in ipairs(u.bounds) do
                ratio[#ratio + 1] = format('%s_bucket{%s,le="%s"} %d\n', RATIO, limiter, bound, u.usage[i])
            end
            ratio[#ratio + 1] = format('%s_bucket{%s,le="+Inf"} %d\n', RATIO, limiter, u.live)
            ratio[#ratio + 1] = format("%s_sum{%s} %.9g\n", RATIO, limiter, u.usage_sum)
            ratio[#ratio + 1] = format("%s_count{%s} %d\n", RATIO, limiter, u.live)
        end
    end
    if #at_limit == 0 then
        return ""
    end
    return "# HELP " .. AT_LIMIT .. " Keys with a full window now: their next request is refused.\n"
        .. "# TYPE " .. AT_LIMIT .. " gauge\n" .. concat(at_limit)
        .. "# HELP " .. RATIO .. " In-window count / limit of the keys whose window holds something"
        .. " (several windows: the one nearest its limit).\n"
        .. "# TYPE " .. RATIO .. " histogram\n" .. concat(ratio)
end

return _M
