-- resty.slidewin.held: what a limiter holds of its rule between decisions: the windows
-- (named by the core), the live limits and their RateLimit-Policy value, for the version of the
-- rule its last decision answered; the limits a call asks for, checked against them.
--
--   held.windows(sw, windows, limits)        -- the configured rule, in new()
--   held.hold(sw, version)                   -- after a decision of `version` (no-op when held)
--   held.follow(sw)                          -- the rule in force, before a check made ahead
--   held.call_limits(sw, opts, method, level) -> limits, policy value | nil (raises on bad opts)
--   held.limits(sw, limits)                  -- live limits set here or polled
--   held.poll(sw)                            -- limits set on another node (once a second)
--   held.window_index(sw, window) -> index | nil, err

local config = require "resty.slidewin.config"
local slidewin = require "slidewin"

local error = error
local format = string.format
local ipairs = ipairs
local max = math.max
local now_ms = slidewin.now_ms
local show = config.show
local type = type

-- How often a worker asks a store shared by several nodes for limits set elsewhere.
local POLL_LIMITS_MS = 1000

local _M = {}

-- The live limits and the RateLimit-Policy they make, for decisions of `version`: the value
-- the headers hold for it already (a decision through the FFI took it from the limiter), else
-- made from the windows held here (a store elsewhere, or a version no decision answered yet).
local function hold_limits(self, limits, version)
    self.live = limits
    local headers = self.headers
    self.policy_header = version and headers:held(version) or headers:set(version or -1, self.windows, limits)
end

-- The rule's windows (named), their limits and what is derived from them: the largest cost
-- that can fit, the policy of the limits and the tiers'.
local function hold_windows(self, windows, limits, version)
    local max_limit = 0
    for _, w in ipairs(windows) do
        max_limit = max(max_limit, w.max_limit)
    end
    self.windows, self.max_limit, self.tier_policy_headers = windows, max_limit, {}
    hold_limits(self, limits, version)
end

-- The rule the store's limiter decided with at `version` (a version it answered), held unless
-- it is the one held already. A zone's rule put again with other windows is a new version,
-- its windows named by the core (a window keeps its configured name while it keeps its length).
local function hold(self, version)
    if version == nil or version == self.rule_version then
        return
    end
    local rule = self.store:rule()
    local limits = {}
    for i, w in ipairs(rule.windows) do
        limits[i] = w.limit
    end
    hold_windows(self, rule.windows, limits, rule.version)
    self.rule_version = rule.version
end

-- Holds the rule in force (which a decision follows by itself) before reading the windows for
-- a check made ahead of the decision.
local function follow(self)
    local store = self.store
    if store.follow then
        hold(self, store:follow())
    end
end


-- The limits `opts` asks for (nil: the live ones) and their RateLimit-Policy, or raises.
local function call_limits(self, opts, method, level)
    if opts == nil then
        return nil
    end
    if type(opts) ~= "table" then
        error(format("sw:%s: opts must be a table ({ limit = N }, { limits = {...} } or { tier = name }), got %s",
            method, show(opts)), level or 4)
    end
    follow(self)
    local tier = opts.tier
    if tier ~= nil then
        local limits = self.conf.tiers and self.conf.tiers[tier]
        if not limits then
            error(format("sw:%s: tier must be a tier of the config, got %s", method, show(tier)), level or 4)
        end
        local cached = self.tier_policy_headers[tier]
        if not cached then
            -- Checked with the config, but the rule in force may have other windows.
            local ok, err = config.check_limits(self.windows, limits, "tiers." .. tostring(tier))
            if not ok then
                error(format("sw:%s: %s", method, err), level or 4)
            end
            cached = self.headers:policy(self.windows, limits)
            self.tier_policy_headers[tier] = cached
        end
        return limits, cached
    end
    local limits = opts.limits
    if limits == nil and opts.limit ~= nil then
        if #self.windows ~= 1 then
            error(format("sw:%s: limit is for a rule of one window; this one has %d (give limits = {...})",
                method, #self.windows), level or 4)
        end
        limits = { opts.limit }
    end
    if limits == nil then
        return nil
    end
    local ok, err = config.check_limits(self.windows, limits, "limits")
    if not ok then
        error(format("sw:%s: %s", method, err), level or 4)
    end
    return limits, self.headers:policy(self.windows, limits)
end

-- Limits set on another node, at most once a second (stores shared by nodes).
local function poll_limits(self)
    local store = self.store
    if not store.poll_limits then
        return
    end
    local now = now_ms()
    if now - self.polled_at < POLL_LIMITS_MS then
        return
    end
    self.polled_at = now
    local limits = store:poll_limits(now)
    if limits then
        hold_limits(self, limits)
    end
end


-- The 1-based index of window `window` (an index or a window's name), or nil, err.
local function window_index(self, window)
    if window == nil then
        return 1
    end
    for i, w in ipairs(self.windows) do
        if window == i or window == w.name then
            return i
        end
    end
    return nil, "window must be a window's index (1 to " .. #self.windows .. ") or name, got " .. show(window)
end

_M.windows, _M.hold, _M.follow, _M.limits = hold_windows, hold, follow, hold_limits
_M.call_limits, _M.poll, _M.window_index = call_limits, poll_limits, window_index

return _M
