-- resty.slidewin.respond: the one response path of a limiter's enforce: a decision (or a
-- store failure) counted and answered, each switch's hook where it applies: headers on an
-- admission, conf.status with the headers and body on a refusal, conf.on_store_error's answer
-- (one error.log line per error_log_interval_ms) when the store failed.

local answer = require "resty.slidewin.answer"
local slidewin = require "slidewin"

local ngx = ngx
local now_ms = slidewin.now_ms
local send = answer.send

-- Answers a refusal (`out`; nil when the store failed) with conf.status and ends the request.
local function refuse(self, out, store_failed)
    local hooks = self.hooks
    if hooks and hooks.body then
        return hooks.body(self, out, store_failed)
    end
    local conf = self.conf
    ngx.status = conf.status
    ngx.header["Content-Type"] = "text/plain"
    ngx.print(conf.body)
    return ngx.exit(conf.status)
end

-- One error.log line per error_log_interval_ms (per worker) while the store fails, not one per
-- request: an outage at thousands of requests per second must not flood the log.
local function log_store_error(self, err)
    local unlogged = self.errors_unlogged + 1
    local now = now_ms()
    if now - self.error_logged_at < self.conf.error_log_interval_ms then
        self.errors_unlogged = unlogged
        return
    end
    ngx.log(ngx.ERR, "slidewin ", self.name, ": store error: ", err, " (", unlogged,
        " request(s) answered by on_store_error=", self.conf.on_store_error, " since the last line)")
    self.error_logged_at, self.errors_unlogged = now, 0
end

-- The one response path: the decision `out` and its RateLimit-Policy value (out nil: the store
-- failed, with that error in place of the value) counted and answered, each switch's hook
-- where it applies (`waited`: the decision after a wait, which does not wait again).
local function respond(self, key, cost, opts, out, policy_header, decided_locally, waited)
    local hooks = self.hooks
    local counters = self.counters
    if not out then
        local err = policy_header
        counters:incr("store_errors")
        log_store_error(self, err)
        if self.fail_open then
            return true
        end
        return refuse(self, nil, true)
    end
    if out.allowed ~= 0 then
        if self.counts_in_layer then
            counters:incr("allowed")
        end
        if self.sends_headers then
            send(out, self.sends_policy_header and policy_header, false)
        end
        if hooks and hooks.admitted then
            hooks.admitted(self, key, cost)
        end
        return true
    end
    if decided_locally then
        counters:incr("local_refusals")
    end
    if hooks then
        if hooks.wait and not waited and out.has_retry ~= 0 then
            local again, again_header, again_locally = hooks.wait(self, key, cost, opts, out.retry_after_ms)
            if again ~= nil or again_header ~= nil then
                -- The last decision, answered without waiting again.
                return respond(self, key, cost, opts, again, again_header, again_locally, true)
            end
        end
        if hooks.let_through then
            hooks.let_through(self)
            if self.sends_headers then
                send(out, self.sends_policy_header and policy_header, false)
            end
            return true
        end
    end
    if self.counts_in_layer then
        counters:incr("rejected")
    end
    if self.sends_headers then
        send(out, self.sends_policy_header and policy_header, true)
    end
    return refuse(self, out)
end

return respond
