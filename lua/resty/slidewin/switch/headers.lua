-- resty.slidewin.switch.headers (option `headers`): the style of the rate-limit headers.
--   "draft"       (default) the IETF draft's RateLimit-Policy and RateLimit, as enforce sends
--   "x-ratelimit" X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (UTC epoch
--                 seconds when the window described is empty or, refused, admits again), as GitHub
--   "none"        no header at all, not even Retry-After
-- Retry-After (whole seconds, rounded up) goes with every refusal but in style "none".

local invalid = require("resty.slidewin.config").invalid
local now_ms = require("slidewin").now_ms
local policy = require "resty.slidewin.policy"
local rate_headers = require("resty.slidewin.fast").rate_headers

local ceil = math.ceil
local digits = policy.digits
local seconds = policy.seconds
local ngx = ngx

local _M = {}

-- The limit window `window` decided with: the call's (opts) or the live one.
local function limit_of(sw, opts, window)
    if opts then
        if opts.tier ~= nil then
            return sw.conf.tiers[opts.tier][window]
        end
        if opts.limits then
            return opts.limits[window]
        end
        if opts.limit then
            return opts.limit
        end
    end
    return sw.live[window]
end

local function retry_after(retry_after_ms)
    if retry_after_ms then
        ngx.header["Retry-After"] = seconds(retry_after_ms)
    end
end

-- Each style: write(sw, opts, rate_policy, window, remaining, t_ms, retry_after_ms), where
-- t_ms is when the window described is empty (admitted) or admits again (refused) and
-- retry_after_ms is nil unless the request is refused.
local STYLES = {
    draft = function(sw, _, rate_policy, window, remaining, t_ms, retry_after_ms)
        rate_headers(rate_policy, sw.rate_prefixes[window], remaining, t_ms)
        retry_after(retry_after_ms)
    end,
    ["x-ratelimit"] = function(sw, opts, _, window, remaining, t_ms, retry_after_ms)
        local header = ngx.header
        header["X-RateLimit-Limit"] = digits(limit_of(sw, opts, window))
        header["X-RateLimit-Remaining"] = digits(remaining)
        header["X-RateLimit-Reset"] = digits(ceil((now_ms() + t_ms) / 1000))
        retry_after(retry_after_ms)
    end,
    none = function() end,
}

-- The writer of style `style` (nil: "draft"), or nil, err.
function _M.configure(style)
    local write = STYLES[style == nil and "draft" or style]
    if not write then
        return invalid("headers", '"draft", "x-ratelimit" or "none"', style)
    end
    return write
end

return _M
