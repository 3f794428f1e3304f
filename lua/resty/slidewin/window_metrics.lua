-- resty.slidewin.window_metrics: how full the windows are, in Prometheus text, for the
-- limiters whose store can walk its keys (shm, zone: resty.slidewin.top.scan).
--
--   slidewin_window_keys_at_limit{limiter}     live keys whose next request of cost 1 is refused
--   slidewin_window_usage_ratio{limiter,le}    histogram of count / limit over live keys (a
--                                              key of several windows: its nearest its limit)

local prometheus = require "resty.slidewin.prometheus"

local tostring = tostring

local _M = {}

local AT_LIMIT = prometheus.family("slidewin_window_keys_at_limit", "gauge",
    "Keys with a full window now: their next request is refused.")
local RATIO = prometheus.family("slidewin_window_usage_ratio", "histogram",
    "In-window count / limit of the keys whose window holds something (several windows: the one nearest its limit).")

-- Adds both families to `out` (a resty.slidewin.prometheus exposition) for metrics objects
-- `list` (resty.slidewin.metrics: .name and .store) and their scans (`scans[i]`:
-- top.scan(list[i], 0), nil when its store cannot tell); nothing when no store can tell.
function _M.write(out, list, scans)
    for i, m in ipairs(list) do
        if scans[i] then
            out:sample(AT_LIMIT, { "limiter", m.name }, scans[i].at_limit)
        end
    end
    for i, m in ipairs(list) do
        local u = scans[i]
        if u then
            for j, bound in ipairs(u.bounds) do
                out:sample(RATIO, { "limiter", m.name, "le", tostring(bound) }, u.usage[j], "_bucket")
            end
            out:sample(RATIO, { "limiter", m.name, "le", "+Inf" }, u.live, "_bucket")
            out:sample(RATIO, { "limiter", m.name }, u.usage_sum, "_sum", "%.9g")
            out:sample(RATIO, { "limiter", m.name }, u.live, "_count")
        end
    end
end

return _M
