-- resty.slidewin.switch: the gateway switches of a limiter's config, each a module of its own
-- around enforce (resty.slidewin.switch.<name>), composed here:
--   exempt (admit listed clients, no store call)
--     -> refund (remember admissions for the log phase: refund_statuses)
--       -> decide, then answer in the style of `headers` with a `body_json` or text refusal,
--          a refusal going to dry_run (mode) or delay, or refused.
-- A config without any switch keeps resty.slidewin's own enforce (the fast path).

local body_json = require "resty.slidewin.switch.body_json"
local delay = require "resty.slidewin.switch.delay"
local dry_run = require "resty.slidewin.switch.dry_run"
local exempt = require "resty.slidewin.switch.exempt"
local headers = require "resty.slidewin.switch.headers"
local refund = require "resty.slidewin.switch.refund"
local respond = require "resty.slidewin.switch.respond"
local show = require("resty.slidewin.config").show

local _M = {}

local OPTIONS = { "mode", "exempt", "headers", "delay", "refund_statuses", "body_json" }

local function unchanged(sw)
    return sw
end

-- compose(sw) -> sw with the switches of `conf` (a validated config), or nil, err naming the
-- option and its value. Called before the store is made, so a bad switch makes nothing.
function _M.plan(conf)
    local any = false
    for _, option in ipairs(OPTIONS) do
        any = any or conf[option] ~= nil
    end
    if not any then
        return unchanged
    end
    local write, err = headers.configure(conf.headers)
    if not write then
        return nil, err
    end
    local refuse
    refuse, err = body_json.configure(conf.body_json)
    if not refuse then
        return nil, err
    end
    local parts = respond.new(write, refuse)
    local delayed, dry
    delayed, err = delay.configure(conf, parts)
    if err then
        return nil, err
    end
    dry, err = dry_run.configure(conf, parts)
    if err then
        return nil, err
    end
    local by_refund, by_exempt
    by_refund, err = refund.configure(conf.refund_statuses)
    if not by_refund then
        return nil, err
    end
    by_exempt, err = exempt.configure(conf.exempt)
    if not by_exempt then
        return nil, err
    end
    local enforce = by_exempt(by_refund(parts.enforce(dry or delayed or parts.refuse)))
    return function(sw)
        -- Called with '.', self is the key: say so, as resty.slidewin's enforce does.
        sw.enforce = function(self, key, cost, opts)
            if self ~= sw then
                error("sw:enforce: self must be the limiter (call sw:enforce(...) with ':'), got " .. show(self), 2)
            end
            key = self:check_call(key, cost, opts, "enforce", 3)
            return enforce(self, key, cost, opts)
        end
        local counters = sw.counters
        counters.outcomes = {}
        counters.dry_run = conf.mode == "dry_run"
        if counters.dry_run then
            counters.outcomes[#counters.outcomes + 1] = "would_reject"
        end
        if conf.exempt ~= nil then
            counters.outcomes[#counters.outcomes + 1] = "exempt"
        end
        counters.delays = conf.delay ~= nil
        return sw
    end
end

return _M
