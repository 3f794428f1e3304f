-- resty.slidewin.switch.respond: enforce for a limiter with switches, in parts the switches
-- replace. A decision (sw:decide) is answered: an admission counted and described in the
-- configured header style, a store failure as on_store_error says, and a refusal handed to a
-- strategy (refuse, by default; dry_run lets it through, delay waits and decides again).
-- Every enforce here returns true, committed (whether the store recorded the cost), or ends
-- the request.

local _M = {}

-- The parts for header writer `write` (switch.headers) and refusal answer `refuse`
-- (switch.body_json): { refuse = strategy, answer = function, enforce = function }.
function _M.new(write, refuse)
    local parts = { write = write }

    -- The default strategy: count, describe, answer conf.status.
    function parts.refuse(sw, _, _, opts, remaining, retry_after_ms, reset_after_ms, window, rate_policy)
        if sw.counts_in_layer then
            sw.counters:incr("rejected")
        end
        write(sw, opts, rate_policy, window, remaining, retry_after_ms or reset_after_ms, retry_after_ms)
        return refuse(sw, retry_after_ms)
    end

    -- The answer to sw:decide's answer (the arguments after `refused`).
    function parts.answer(sw, key, cost, opts, refused, allowed, remaining, retry_after_ms, reset_after_ms,
                          decided_locally, window, rate_policy)
        local counters = sw.counters
        if allowed == nil then
            counters:incr("store_errors")
            sw:log_store_error(remaining)
            if sw.fail_open then
                return true, false
            end
            return refuse(sw, nil, true)
        end
        if allowed then
            if sw.counts_in_layer then
                counters:incr("allowed")
            end
            write(sw, opts, rate_policy, window, remaining, reset_after_ms)
            return true, true
        end
        if decided_locally then
            counters:incr("local_refusals")
        end
        return refused(sw, key, cost, opts, remaining, retry_after_ms, reset_after_ms, window, rate_policy)
    end

    -- enforce(sw, key, cost, opts) whose refusals go to strategy `refused`.
    function parts.enforce(refused)
        local answer = parts.answer
        return function(sw, key, cost, opts)
            return answer(sw, key, cost, opts, refused, sw:decide(key, cost, true, opts))
        end
    end

    return parts
end

return _M
