-- resty.slidewin.config: a limiter's config checked and completed, or nil, err naming the
-- field and the value. The windows of a rule are always in conf.windows (one window for a
-- config that names algorithm, limit and window_ms at its top level), each with algorithm,
-- limit, window_ms, bucket_ms, max_limit and name (its RateLimit-Policy item).

local slidewin = require "slidewin"

local format = string.format

local _M = {}

local ON_STORE_ERROR = { allow = true, deny = true, ["local"] = true }

local function show(v)
    if type(v) == "string" then
        return '"' .. v .. '"'
    end
    return tostring(v)
end
_M.show = show

local function invalid(field, expected, v)
    return nil, field .. " must be " .. expected .. ", got " .. show(v)
end
_M.invalid = invalid

local function positive_integer(v)
    return type(v) == "number" and v >= 1 and v % 1 == 0 and v < 2 ^ 53
end
_M.positive_integer = positive_integer

local UNITS = { [""] = 1, k = 1024, m = 1024 * 1024, g = 1024 * 1024 * 1024 }

-- A size as bytes: a positive integer, or digits with k/m/g (as nginx sizes); nil otherwise.
function _M.bytes(size)
    if type(size) == "number" then
        return size
    end
    if type(size) == "string" then
        local digits, unit = size:lower():match("^(%d+)([kmg]?)$")
        if digits then
            return tonumber(digits) * UNITS[unit]
        end
    end
    return nil
end

-- conf.windows from conf.windows or from the top-level fields, checked and completed by the
-- core (slidewin.check_rule, the check every limiter of the module makes): defaults filled in,
-- each window named as every door names it.
local windows_of = slidewin.check_rule

-- conf.tiers: { name = { limit per window } }, each limit within its window's max_limit.
local function check_tiers(conf)
    if conf.tiers == nil then
        return true
    end
    if type(conf.tiers) ~= "table" then
        return invalid("tiers", "a table of tier name = { limit per window }", conf.tiers)
    end
    for tier, limits in pairs(conf.tiers) do
        local ok, err = _M.check_limits(conf.windows, limits, format("tiers.%s", tostring(tier)))
        if not ok then
            return nil, err
        end
    end
    return true
end

-- `limits` (one per window of `windows`) checked: true, or nil, err naming `field`.
_M.check_limits = slidewin.check_limits

local LEASE_FIELDS = { validity_ms = true, max_validity_ms = true, margin_ms = true,
    max_units = true, keys = true, replicas = true, wait_timeout_ms = true }

-- conf.lease (store "redis"): true, or nil, err naming the field. Which windows can be leased
-- is the core's (slidewin.check_rule), and so are the numbers' bounds (slidewin.lease_table
-- checks them when the store is made).
local function check_lease(conf)
    local lease = conf.lease
    if lease == nil then
        return true
    end
    if type(lease) ~= "table" then
        return invalid("lease", "a table ({ validity_ms = N, ... })", lease)
    end
    if conf.store ~= "redis" then
        return nil, 'lease is for store "redis", got store ' .. show(conf.store)
    end
    for k in pairs(lease) do
        if not LEASE_FIELDS[k] then
            return nil, "lease." .. tostring(k) .. " is not an option (validity_ms, max_validity_ms, "
                .. "margin_ms, max_units, keys, replicas, wait_timeout_ms)"
        end
    end
    if lease.validity_ms == nil then
        return nil, "lease.validity_ms is required (how long a lease is spent, ms)"
    end
    for _, field in ipairs { "validity_ms", "max_validity_ms", "max_units", "keys", "replicas",
            "wait_timeout_ms" } do
        if lease[field] ~= nil and not positive_integer(lease[field]) then
            return invalid("lease." .. field, "a positive integer", lease[field])
        end
    end
    local margin = lease.margin_ms
    if margin ~= nil and not (type(margin) == "number" and positive_integer(margin + 1)) then
        return invalid("lease.margin_ms", "a non-negative integer", lease.margin_ms)
    end
    if lease.wait_timeout_ms ~= nil and lease.replicas == nil then
        return nil, "lease.wait_timeout_ms goes with lease.replicas, got no replicas"
    end
    return true
end

-- A copy of opts with defaults filled in, or nil, err naming the field and the value.
function _M.validate(opts)
    if type(opts) ~= "table" then
        return invalid("config", "a table", opts)
    end
    local conf = {}
    for k, v in pairs(opts) do
        conf[k] = v
    end
    conf.store = conf.store or "shm"
    conf.max_keys = conf.max_keys or 100000
    conf.max_key_bytes = conf.max_key_bytes or 64
    conf.status = conf.status or 429
    conf.body = conf.body or "Too Many Requests\n"
    conf.on_store_error = conf.on_store_error or "allow"
    conf.error_log_interval_ms = conf.error_log_interval_ms or 10000

    if type(conf.name) ~= "string" or not conf.name:find("^[%w_.-]+$") then
        return invalid("name", "a string of letters, digits, _ . -", conf.name)
    end
    local windows, err = windows_of(conf)
    if not windows then
        return nil, err
    end
    conf.windows = windows
    -- The first window's fields stay at the top level for stores of one window (shdict).
    conf.algorithm, conf.limit, conf.window_ms, conf.bucket_ms =
        windows[1].algorithm, windows[1].limit, windows[1].window_ms, windows[1].bucket_ms
    for _, field in ipairs { "max_keys", "max_key_bytes" } do
        if not positive_integer(conf[field]) then
            return invalid(field, "a positive integer", conf[field])
        end
    end
    local ok
    ok, err = check_tiers(conf)
    if not ok then
        return nil, err
    end
    if type(conf.store) ~= "string" or not conf.store:find("^[%w_]+$") then
        return invalid("store", "a store module name", conf.store)
    end
    if not (positive_integer(conf.status) and conf.status >= 400 and conf.status <= 599) then
        return invalid("status", "an HTTP error status", conf.status)
    end
    if type(conf.body) ~= "string" then
        return invalid("body", "a string", conf.body)
    end
    if not ON_STORE_ERROR[conf.on_store_error] then
        return invalid("on_store_error", '"allow", "deny" or "local"', conf.on_store_error)
    end
    if (conf.on_store_error == "local") ~= (conf.fallback ~= nil) then
        return nil, 'on_store_error = "local" and fallback = { limit = N } go together, got on_store_error = '
            .. show(conf.on_store_error) .. " and fallback = " .. show(conf.fallback)
    end
    if conf.full ~= nil and conf.full ~= "evict" and conf.full ~= "refuse" then
        return invalid("full", '"evict" or "refuse"', conf.full)
    end
    if conf.full ~= nil and conf.store ~= "shm" then
        return nil, 'full is an option of store "shm", got full = ' .. show(conf.full)
            .. " with store = " .. show(conf.store)
    end
    if not positive_integer(conf.error_log_interval_ms) then
        return invalid("error_log_interval_ms", "a positive integer", conf.error_log_interval_ms)
    end
    if conf.key_var ~= nil and not (type(conf.key_var) == "string" and conf.key_var:find("^[%w_]+$")) then
        return invalid("key_var", "an nginx variable's name without the $ (e.g. \"remote_addr\")", conf.key_var)
    end
    if conf.local_refusal_cache ~= nil and type(conf.local_refusal_cache) ~= "boolean" then
        return invalid("local_refusal_cache", "a boolean", conf.local_refusal_cache)
    end
    ok, err = check_lease(conf)
    if not ok then
        return nil, err
    end
    return conf
end

return _M
