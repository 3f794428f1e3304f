-- resty.slidewin.prometheus: Prometheus text (exposition format 0.0.4) for every producer of
-- /metrics (limiters, window usage, adaptive limits, Redis topologies), written by the core
-- (slidewin::prometheus, as the native module's /metrics is): each family's HELP and TYPE
-- once, every label value escaped.
--
--   local REQUESTS = prometheus.family("slidewin_requests_total", "counter", "Decisions by outcome.")
--   local out = prometheus.new()
--   out:sample(REQUESTS, { "limiter", name, "outcome", "allowed" }, 12)
--   out:sample(RATIO, { "limiter", name, "le", "0.5" }, 3, "_bucket")   -- a histogram's series
--   out:sample(RATIO, { "limiter", name }, sum, "_sum", "%.9g")          -- a C format: %.Ng, %.Nf
--   out:text()   -- families in the order first sampled, each with all its samples
--
-- Labels are a flat list of name, value pairs, written in that order; a value that is not
-- UTF-8 is read as Latin-1. Values: integers as integers, others to 17 significant digits (or
-- as the format says), NaN and the infinities as the format spells them.

local slidewin = require "slidewin"

local error, pcall, tostring = error, pcall, tostring
local make_family = slidewin.prometheus_family

local _M = {}

-- A metric family: its name, type and help text, made once at load.
function _M.family(name, type, help)
    local ok, family = pcall(make_family, name, type, help)
    if not ok then
        error((tostring(family):match("^[^\n]*")), 2)
    end
    return family
end

-- An empty exposition.
_M.new = slidewin.exposition

return _M
