-- resty.slidewin.switch.delay (option `delay = { max_ms = N, max_waiting = M }`): a request
-- refused with retry_after_ms <= max_ms waits (ngx.sleep: the worker serves others meanwhile)
-- and is decided again, until admitted or until its next wait would end more than max_ms
-- after its first refusal; then it is refused. At most max_waiting (default 100) requests of
-- this limiter wait at once across every worker of this nginx (resty.slidewin.switch.waiting:
-- made in init_by_lua*); the others are refused at once. Each wait is counted
-- (slidewin_delay_waits_total); only the final answer counts as allowed or rejected.

local config = require "resty.slidewin.config"
local waiting = require "resty.slidewin.switch.waiting"
local now_ms = require("slidewin").now_ms

local invalid = config.invalid
local positive_integer = config.positive_integer
local error, pcall = error, pcall
local ngx = ngx

-- How long past max_ms a place may stay taken before it is freed anyway (a request dropped
-- while it waited): the last decision and the sleep's lateness fit well within it.
local HOLD_MARGIN_MS = 1000
-- The most places a slidewin.concurrency key holds.
local MAX_WAITING = 65536

local _M = { option = "delay" }

function _M.configure(delay, conf, hooks)
    if type(delay) ~= "table" then
        return invalid("delay", "a table { max_ms = N, max_waiting = M }", delay)
    end
    if conf.mode == "dry_run" then
        return invalid("delay", 'unset with mode = "dry_run" (a dry run refuses nothing)', delay)
    end
    local max_ms, max_waiting = delay.max_ms, delay.max_waiting or 100
    if not positive_integer(max_ms) then
        return invalid("delay.max_ms", "a positive integer", max_ms)
    end
    if not (positive_integer(max_waiting) and max_waiting <= MAX_WAITING) then
        return invalid("delay.max_waiting", "a positive integer at most " .. MAX_WAITING, max_waiting)
    end
    local places, err = waiting.new(conf.name, max_waiting, max_ms + HOLD_MARGIN_MS)
    if not places then
        return nil, err
    end

    -- Sleeps and decides again while refused within the bound; the last decision.
    local function wait(sw, key, cost, opts, retry_after_ms)
        local deadline = now_ms() + max_ms
        local answer, policy, decided_locally
        repeat
            sw.counters:incr("waits")
            ngx.sleep(retry_after_ms / 1000)
            answer, policy, decided_locally = sw:answer(key, cost, true, opts)
            retry_after_ms = answer and answer.has_retry ~= 0 and answer.retry_after_ms
        until not answer or answer.allowed ~= 0 or not retry_after_ms or now_ms() + retry_after_ms > deadline
        return answer, policy, decided_locally
    end

    -- wait() holding a place, given back even when wait raises.
    local function wait_in(place, ok, ...)
        places:give(place)
        if not ok then
            error(..., 0)
        end
        return ...
    end

    return hooks:add("wait", function(sw, key, cost, opts, retry_after_ms)
        local place = retry_after_ms <= max_ms and places:take()
        if not place then
            return nil
        end
        return wait_in(place, pcall(wait, sw, key, cost, opts, retry_after_ms))
    end)
end

return _M
