-- resty.slidewin.policy: the IETF draft's header values for a rule's windows
-- (draft-ietf-httpapi-ratelimit-headers): every window an item of RateLimit-Policy, and the
-- one window a decision describes in RateLimit.
--
--   RateLimit-Policy: "api";q=10;w=1, "api-1h";q=1000;w=3600
--   RateLimit: "api-1h";r=0;t=1800

local ceil = math.ceil
local concat = table.concat
local format = string.format

local _M = {}

-- A whole number as header digits: concatenation writes 1e14 and above in exponent form
-- ("1e+14"), which is no structured-field integer.
local function digits(n)
    if n < 1e14 then
        return n
    end
    return format("%d", n)
end
_M.digits = digits

-- Milliseconds as whole seconds, rounded up.
function _M.seconds(ms)
    return digits(ceil(ms / 1000))
end

-- RateLimit-Policy for `windows` under `limits` (one per window).
function _M.policy(windows, limits)
    local items = {}
    for i, w in ipairs(windows) do
        items[i] = concat { '"', w.name, '";q=', digits(limits[i]), ";w=", digits(ceil(w.window_ms / 1000)) }
    end
    return concat(items, ", ")
end

-- The start of each window's RateLimit value: '"api";r='.
function _M.rate_prefixes(windows)
    local prefixes = {}
    for i, w in ipairs(windows) do
        prefixes[i] = '"' .. w.name .. '";r='
    end
    return prefixes
end

return _M
