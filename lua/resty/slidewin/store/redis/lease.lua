-- resty.slidewin.store.redis.lease: store "redis" with `lease = { validity_ms = V, ... }`. Redis
-- grants this node units of a key's rule (every window at once); every worker spends them from
-- one shared-memory table (slidewin.lease_table, the core's shared::Leases), so most decisions
-- make no call, and the limit still holds across every node (docs/leases.md has the proof).
--
--   store:answer(headers_block, key, cost, commit, limits, in_hand_only) -> out, decided_locally
--       | nil, err
--       out: resty.slidewin.answer's buffer, header values rendered. in_hand_only: decided by
--       the lease in hand (or a refusal Redis gave) or not at all (while the fallback decides). A commit is spent from the
--       key's lease in one FFI call (the monotonic clock read inside); no lease, or too few
--       units: one lease call now (`action lease`, cost = the request's; a cold key's, wanting
--       its cost alone, as a check ahead), or, while another request's lease call of the key
--       is in flight on this node, a wait for it (1 ms sleeps, at
--       most connect_timeout_ms + read_timeout_ms); a refusal Redis gave is answered by the
--       table until Redis's retry time. A peek asks Redis every time.
--       reserving (sw:reserve): a per-request check in Redis (the table's units are not used),
--       recorded at Redis's now, which the answer carries as its stamp_ms.
--   store:refund(key, cost): given back to the lease it came from, else to Redis;
--   store:refund(key, cost, stamp_ms[, owe]) (a reservation settled): given back (or owed)
--       in Redis at the stamp, as without leases.
--   store:record(key, text): as the Redis store's (the fallback's journal; leases spent while
--       it decides were granted, not admitted by it, and are not in it).
--   store:lease_stats() -> { calls, granted, spent, returned, expired, local, refusals_cached,
--       repairs, evictions, validity_ms, capacity }: node-wide counters of the table, and the
--       validity lease calls ask for now.
-- Every call of this store, whatever its action, carries the key's lease hash (so Redis counts
-- outstanding leases) and the key's settle list (leases that ended: spent, last spend). A
-- lease half spent, or half way to its end, is fetched again in the background by the worker
-- that saw it first (ngx.timer.at); a lease that ended with units unspent is settled by a sweep
-- (one worker per period, ngx.timer.every, started by the first request of each worker).
-- lease.replicas = R: each lease call is followed by WAIT R wait_timeout_ms on the same
-- connection; fewer replicas: the grant is never spent (settled with nothing spent) and the
-- call is a store error.

local ffi = require "ffi"
local answer = require "resty.slidewin.answer"
local slidewin = require "slidewin"

local ngx = ngx
local ffi_str = ffi.string
local now_ms = slidewin.now_ms
local error, type, tostring, setmetatable = error, type, tostring, setmetatable

-- slidewin_lease_call_t and the functions below are declared by resty.slidewin.answer.
local lib = answer.lib
local out = answer.out
local call = ffi.new("slidewin_lease_call_t")
local call_limits = ffi.new("double[8]")
local reply = ffi.new("double[5]")
local INSTALLED, NOT_ADMITTED = 0, 2
local PREFETCH = 1
local LATE_CHECKS_MS = 10000
-- slidewin_lease_spend's answer while another request's call of the key is in flight, and how
-- long a request sleeps before it asks again.
local WAIT, WAIT_STEP_MS = 3, 1
-- Keys a sweep settles at most per period per node (each a call).
local SWEEP_KEYS = 256
-- The answer of a decision asked of the lease in hand only (the fallback's turn) that needs Redis.
local NOT_IN_HAND = "no lease in hand"


local _M = {}
local mt = { __index = _M }

-- A send (resty.slidewin.store.redis's call_script) of the script and then WAIT `replicas`
-- `timeout_ms` on the same connection: the reply, with `replicas` set.
local function send_and_wait(replicas, timeout_ms)
    return function(base, red, asking, args)
        local res, err = base:send_script(red, asking, args)
        if not res then
            return nil, err
        end
        res.replicas, err = red:wait(replicas, timeout_ms)
        if not res.replicas then
            return nil, "WAIT: " .. tostring(err)
        end
        return res
    end
end

-- The store `base` (resty.slidewin.store.redis) spending leases of conf.lease.
function _M.new(base, conf)
    local lease = conf.lease
    local ok, leases = pcall(slidewin.lease_table, {
        name = conf.name, validity_ms = lease.validity_ms, margin_ms = lease.margin_ms,
        max_validity_ms = lease.max_validity_ms, max_units = lease.max_units, keys = lease.keys,
        -- Only which keys the table keeps as they are (the rest as a digest): any length works.
        max_key_bytes = math.min(math.max(conf.max_key_bytes, 16), 65536),
    })
    if not ok then
        -- "slidewin.lease_table: margin_ms must be ...", its first line -> "lease.margin_ms must be ..."
        return nil, (tostring(leases):match("^[^\n]*"):gsub("^slidewin%.lease_table: ", "lease."))
    end
    local self = setmetatable({
        base = base,
        leases = leases,
        handle = ffi.cast("void *", leases:ffi_handle()),
        name = conf.name,
        -- The validity this worker last saw the table ask for (it logs each raise it sees).
        validity_ms = leases:validity_ms(),
        max_validity_ms = leases:max_validity_ms(),
        -- Leases that came too late to spend, and until when checks decide after the last.
        late = 0,
        checks_until = 0,
        ahead_ms = leases:ahead_ms(),
        replicas = lease.replicas,
        wait_timeout_ms = lease.wait_timeout_ms or 10,
        configured = base.configured,
    }, mt)
    -- With lease.replicas, each lease call is followed by WAIT on its connection.
    self.send = lease.replicas and send_and_wait(lease.replicas, self.wait_timeout_ms)
    self.sweep_ms = math.max(math.floor(lease.validity_ms / 2), 10)
    -- A request waits for another's call no longer than it would wait for its own.
    self.max_wait_ms = base.opts.connect_timeout_ms + base.opts.read_timeout_ms
    return self
end

function _M.set_limits(self, limits)
    return self.base:set_limits(limits)
end

function _M.poll_limits(self, now)
    return self.base:poll_limits(now)
end

function _M.keys()
    return nil
end

function _M.record(self, key, text)
    return self.base:record(key, text)
end

function _M.lease_stats(self)
    return self.leases:stats()
end

-- A lease call for `key`: { granted, remaining, retry_after_ms, reset_after_ms, window }, or
-- nil, err (with lease.replicas: also when fewer replicas took it). `recorded`: a call that
-- wants its cost alone (a cold key) goes as a check ahead, which Redis records at once
-- ahead_ms ahead: no id, nothing left in the lease hash to settle.
local function lease_call(self, key, cost, limits, seq, want, validity_ms, settle, recorded)
    local options, action
    if recorded then
        action, options = "check", { "ahead_ms", self.ahead_ms }
    else
        action = "lease"
        options = { "want", want, "validity_ms", validity_ms, "id", self.leases:id(seq) }
    end
    if settle ~= "" then
        options[#options + 1], options[#options + 2] = "settle", settle
    end
    local res, err = self.base:call_script(key, cost, action, limits, options, self.send)
    if res and recorded then
        -- A check's allowed (1/0) as a grant of the cost.
        res[1] = res[1] == 1 and cost or 0
        res.recorded = true
    end
    if res and self.replicas and res.replicas < self.replicas then
        return nil, "redis: WAIT " .. self.replicas .. " " .. self.wait_timeout_ms .. " answered "
            .. res.replicas .. " replica(s): the lease is not used"
    end
    return res, err
end

-- Redis's answer to call `seq` (sent at `sent_ms`) taken into the table: the remaining of the
-- request it admitted (false: refused, or answered too late to spend) and the reply; nil, err
-- when the call failed.
local function fetch(self, key, cost, limits, seq, want, sent_ms, validity_ms, settle)
    local recorded = cost > 0 and want == cost and self.ahead_ms ~= nil
    local res, err = lease_call(self, key, cost, limits, seq, want, validity_ms, settle, recorded)
    if not res then
        self.leases:fail(key, seq, sent_ms)
        return nil, err
    end
    local n = #limits
    for i = 1, n do
        call_limits[i - 1] = limits[i]
    end
    for i = 1, 5 do
        reply[i - 1] = res[i]
    end
    local rc
    if type(key) == "string" then
        rc = lib.slidewin_lease_install(self.handle, key, #key, 0, seq, sent_ms, validity_ms, cost,
            call_limits, n, reply, recorded and 1 or 0, out)
    else
        rc = lib.slidewin_lease_install(self.handle, nil, 0, key, seq, sent_ms, validity_ms, cost,
            call_limits, n, reply, recorded and 1 or 0, out)
    end
    if rc == INSTALLED then
        return out.remaining, res
    elseif rc == NOT_ADMITTED then
        return false, res
    end
    error(ffi_str(out.message, out.message_len), 0)
end

local function prefetch(premature, self, key, limits, seq, want, sent_ms, validity_ms, settle)
    if premature then
        return
    end
    local ok, err = fetch(self, key, 0, limits, seq, want, sent_ms, validity_ms, settle)
    if ok == nil then
        ngx.log(ngx.INFO, "slidewin: lease prefetch of ", key, ": ", err)
    end
end

-- Settles the leases that ended with units unspent (the table lets one worker a period).
local function sweep(premature, self)
    if premature then
        return
    end
    local due = self.leases:sweep(self.sweep_ms, SWEEP_KEYS)
    for i = 1, #due do
        local item = due[i]
        local res = self.base:call_script(item.key, 0, "peek", self.base.configured,
            { "settle", item.settle })
        if res then
            self.leases:settled(item.key, item.seq)
        end
    end
end

local function start_sweeping(self)
    self.sweeping = true
    local ok, err = ngx.timer.every(self.sweep_ms / 1000, sweep, self)
    if not ok then
        self.sweeping = false
        ngx.log(ngx.ERR, "slidewin: cannot start the lease sweep: ", err)
    end
end

-- A per-request check (no lease): false and the numbers of Redis's answer, or nil, err.
local function check(self, key, cost, limits)
    local allowed, remaining, retry_after_ms, reset_after_ms, _, window =
        self.base:decide(key, cost, true, limits)
    if allowed == nil then
        return nil, remaining
    end
    return false, allowed, remaining, retry_after_ms, reset_after_ms, window
end

-- Whether this worker decides by per-request checks, not lease calls (for LATE_CHECKS_MS
-- after a lease came late).
local function checking(self)
    local until_ms = self.checks_until
    if until_ms == 0 then
        return false
    elseif now_ms() < until_ms then
        return true
    end
    self.checks_until = 0
    return false
end

-- A lease Redis granted that came after validity_ms - margin_ms, too late to spend: the table
-- ended it (the sweep settles it with nothing spent) and a per-request check decides, which
-- keeps the proof (it is stamped at the decision). Redis answered: no store error. The table
-- raised the validity the next calls ask for (room for a round trip twice as long, at most
-- lease.max_validity_ms); said once per raise. A check ahead that came late (`recorded`:
-- stamped V / 2 ahead, which no raise moves) ends this worker's checks ahead: cold keys go as
-- lease calls. At the ceiling, lease calls that come late cost two calls and hold their grants
-- away until settled, so for LATE_CHECKS_MS this worker decides what its table does not hold
-- by per-request checks; said once per worker.
local function decide_late(self, key, cost, limits, recorded)
    self.ahead_ms = nil
    local validity_ms = self.leases:validity_ms()
    if validity_ms > self.validity_ms then
        ngx.log(ngx.WARN, "slidewin ", self.name, ": a lease came after validity_ms - margin_ms (",
            self.validity_ms, " ms less the margin): lease calls now ask for validity_ms ",
            validity_ms, " (at most lease.max_validity_ms ", self.max_validity_ms, ")")
        self.validity_ms = validity_ms
        return check(self, key, cost, limits)
    elseif recorded or validity_ms < self.max_validity_ms then
        -- A check ahead, or a call sent before the last raise.
        return check(self, key, cost, limits)
    end
    self.late = self.late + 1
    if self.late == 1 then
        ngx.log(ngx.WARN, "slidewin ", self.name, ": a lease came after validity_ms - margin_ms (",
            validity_ms, " ms less the margin, at lease.max_validity_ms): per-request checks ",
            "decide for ", LATE_CHECKS_MS / 1000, " s after each; raise lease.max_validity_ms ",
            "above the lease call's round trip")
    end
    self.checks_until = now_ms() + LATE_CHECKS_MS
    return check(self, key, cost, limits)
end

-- A commit of `cost` for `key` under `limits`: `out` when the table decided (its header values
-- rendered when `headers_block` is given), else false and the numbers of Redis's answer
-- (allowed, remaining, retry_after_ms, reset_after_ms, window); nil, err when the call failed,
-- or, `in_hand_only`, when the table cannot decide without a call.
local function spend(self, headers_block, key, cost, limits, in_hand_only)
    if not self.sweeping then
        start_sweeping(self)
    end
    -- What the table cannot decide goes to a per-request check, not a lease call.
    local checks = not in_hand_only and checking(self)
    local table_only = in_hand_only or checks
    local n = #limits
    local rc, waited = WAIT, 0
    while rc == WAIT do
        for i = 1, n do
            call_limits[i - 1] = limits[i]
        end
        if type(key) == "string" then
            rc = lib.slidewin_lease_spend(self.handle, headers_block, key, #key, 0, cost, call_limits, n, out, call)
        else
            rc = lib.slidewin_lease_spend(self.handle, headers_block, nil, 0, key, cost, call_limits, n, out, call)
        end
        if rc == WAIT and checks then
            return check(self, key, cost, limits)
        elseif rc == WAIT and in_hand_only then
            return nil, NOT_IN_HAND
        elseif rc == WAIT then
            -- Another request's call of this key is in flight: its lease will likely pay.
            if waited >= self.max_wait_ms then
                return nil, "redis: waited " .. waited .. " ms for this node's lease call of the key"
            end
            ngx.sleep(WAIT_STEP_MS / 1000)
            waited = waited + WAIT_STEP_MS
        end
    end
    if rc == 1 then
        error(ffi_str(out.message, out.message_len), 0)
    end
    if rc == 0 and call.status ~= PREFETCH then
        return out
    end
    -- The buffers are this worker's: read the call before anything yields.
    local seq, want, sent_ms, validity_ms = call.seq, call.want, call.sent_ms, call.validity_ms
    local settle = ffi_str(call.settle, call.settle_len)
    if rc == 0 and checks then
        -- Decided; no next lease while checks decide.
        self.leases:fail(key, seq, sent_ms)
        return out
    elseif rc == 0 then
        -- Decided; this worker claimed the next lease's fetch.
        local ok, err = ngx.timer.at(0, prefetch, self, key, limits, seq, want, sent_ms,
            validity_ms, settle)
        if not ok then
            self.leases:fail(key, seq, sent_ms)
            ngx.log(ngx.WARN, "slidewin: cannot fetch the next lease of ", key, ": ", err)
        end
        return out
    end
    if table_only then
        -- The claim of a call made for nothing: released as a call that failed.
        self.leases:fail(key, seq, sent_ms)
        if checks then
            return check(self, key, cost, limits)
        end
        return nil, NOT_IN_HAND
    end
    local remaining, res = fetch(self, key, cost, limits, seq, want, sent_ms, validity_ms, settle)
    if remaining == nil then
        return nil, res
    end
    if remaining then
        return false, true, remaining, 0, res[4], res[5]
    end
    if res[1] > 0 then
        return decide_late(self, key, cost, limits, res.recorded)
    end
    local retry = res[3]
    return false, false, res[2], retry >= 0 and retry or nil, res[4], res[5]
end

-- The layer's per-request entry (see the top of this file).
function _M.answer(self, headers_block, key, cost, commit, limits, in_hand_only, reserving)
    if in_hand_only and (reserving or not commit) then
        return nil, NOT_IN_HAND
    elseif reserving or not commit then
        -- A peek, or a reservation: Redis decides this call (a reservation's check is stamped
        -- at Redis's now, which keeps the proof as a late lease's checks do).
        local allowed, remaining, retry_after_ms, reset_after_ms, _, window, stamp_ms =
            self.base:decide(key, cost, commit, limits)
        if allowed == nil then
            return nil, remaining
        end
        return answer.render(headers_block, allowed, remaining, retry_after_ms, reset_after_ms,
            window, limits[window], stamp_ms), false
    end
    local decided, allowed, remaining, retry_after_ms, reset_after_ms, window =
        spend(self, headers_block, key, cost, limits, in_hand_only)
    if decided then
        return decided, true
    elseif decided == nil then
        return nil, allowed
    end
    return answer.render(headers_block, allowed, remaining, retry_after_ms, reset_after_ms, window,
        limits[window]), false
end

-- A reservation (stamp_ms) was recorded in Redis, not spent from a lease: what it did not use
-- goes back there, what it used above it is owed there.
_M.refunds_at_stamp, _M.owes = true, true

function _M.refund(self, key, cost, stamp_ms, owe)
    if not stamp_ms and not owe and self.leases:refund(key, cost) then
        return true
    end
    return self.base:refund(key, cost, stamp_ms, owe)
end

return _M
