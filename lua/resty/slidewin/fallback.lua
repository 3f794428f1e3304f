-- resty.slidewin.fallback: while a store elsewhere (Redis) cannot answer, this node limits each
-- key exactly in its own shared memory at smaller limits (conf.fallback), instead of admitting
-- everything or refusing everything (on_store_error = "local").
--
--   require("resty.slidewin").new{ name = "api", limit = 100, window_ms = 1000,
--       store = "redis", on_store_error = "local", fallback = { limit = 30 } }
--
-- conf.fallback: `limit` (a rule of one window) or `limits` (one per window), each at most the
-- window's max_limit; `retry_ms` (1000): how long a worker decides locally after a store error
-- before it asks the store again (one request then tries it); `size` ("1m"): the region's
-- bytes. The fallback limits hold for every call, whatever its limits or tier. The fallback
-- decides on a store "shm" of its own (made in init_by_lua*, named "<name>.fallback"), kept
-- across reloads (a node that falls back twice in a minute counts both spells in the same
-- windows), and holds its rule as a limiter does (resty.slidewin.held).
-- Each way is one error.log line per worker ("deciding locally", "answers again") and the
-- fallback's decisions are counted (slidewin_fallback_decisions_total).
-- What the fallback admits is journaled per worker (resty.slidewin.journal; `journal_keys`
-- (10000): the most keys it holds, a key beyond them is refused) and, once retry_ms has passed,
-- replayed in the store (store:record, one call per key, off the request path) before the store
-- decides for this worker again: until the replay is done the fallback decides, and a replay
-- that fails keeps the journal and retries after retry_ms (docs/redis.md has the bounds).

local slidewin = require "slidewin"
local answer = require "resty.slidewin.answer"
local config = require "resty.slidewin.config"
local held = require "resty.slidewin.held"
local journal_of = require("resty.slidewin.journal").new
local shm = require "resty.slidewin.store.shm"

local ngx = ngx
local format = string.format
local concat = table.concat
local max = math.max
local pairs, tostring = pairs, tostring
local now_ms = slidewin.now_ms
local invalid, positive_integer = config.invalid, config.positive_integer

local _M = {}
local mt = { __index = _M }

local FIELDS = { limit = true, limits = true, retry_ms = true, size = true, journal_keys = true }

-- conf.fallback's limits (one per window), or nil, err naming the field and the value.
local function limits_of(conf)
    local given = conf.fallback
    if type(given) ~= "table" then
        return invalid("fallback", "a table ({ limit = N } or { limits = {...} })", given)
    end
    for k in pairs(given) do
        if not FIELDS[k] then
            return nil, "fallback." .. tostring(k) .. " is not an option (limit, limits, retry_ms, size, journal_keys)"
        end
    end
    if (given.limit == nil) == (given.limits == nil) then
        return nil, "fallback needs one of limit (a rule of one window) or limits (one per window)"
    end
    local limits = given.limits
    if given.limit ~= nil then
        if #conf.windows ~= 1 then
            return nil, format("fallback.limit is for a rule of one window; this one has %d (give fallback.limits)",
                #conf.windows)
        end
        limits = { given.limit }
    end
    local ok, err = config.check_limits(conf.windows, limits, "fallback.limits")
    if not ok then
        return nil, err
    end
    return limits
end

-- The fallback of limiter config `conf` (on_store_error = "local") for store `remote`, or
-- nil, err. Made in init_by_lua*, as every shared region. A store with store:record is told
-- what the fallback admitted; others are not (nothing is journaled).
function _M.new(conf, remote)
    local limits, err = limits_of(conf)
    if not limits then
        return nil, err
    end
    local given = conf.fallback
    local retry_ms = given.retry_ms or 1000
    if not positive_integer(retry_ms) then
        return invalid("fallback.retry_ms", "a positive integer", retry_ms)
    end
    local journal_keys = given.journal_keys or 10000
    if not positive_integer(journal_keys) then
        return invalid("fallback.journal_keys", "a positive integer", journal_keys)
    end
    local size = config.bytes(given.size or "1m")
    if not size then
        return invalid("fallback.size", 'a number of bytes or a size like "1m"', given.size)
    end
    local phase = ngx.get_phase()
    if phase ~= "init" then
        return nil, "fallback must be made in init_by_lua* (before the workers fork), not in " .. phase
    end
    local windows = {}
    for i, w in ipairs(conf.windows) do
        windows[i] = { algorithm = w.algorithm, limit = limits[i], window_ms = w.window_ms,
            bucket_ms = w.bucket_ms, max_limit = w.max_limit, name = w.name }
    end
    local store
    store, err = shm.new { name = conf.name .. ".fallback", windows = windows, size = size,
        max_key_bytes = conf.max_key_bytes }
    if not store then
        return nil, "fallback: " .. tostring(err)
    end
    local headers
    headers, err = slidewin.headers(conf.headers or "draft")
    if not headers then
        return nil, err
    end
    local self = setmetatable({ name = conf.name, store = store, headers = headers, limits = limits,
        retry_ms = retry_ms, until_ms = 0, engaged = false, remote = remote,
        journal = remote.record and journal_of(journal_keys), replaying = false, told_full = false }, mt)
    self.block, self.headers_block = answer.handles(store, headers)
    held.windows(self, windows, limits)
    return self
end

-- "AGE_MS:UNITS ..." (the script's record option) of a key's journaled entries at `now`.
local function ages(list, now)
    local parts = {}
    for i = 1, #list, 2 do
        parts[#parts + 1] = max(now - list[i], 0) .. ":" .. list[i + 1]
    end
    return concat(parts, " ")
end

-- Records this worker's journal in the store key by key, again while admissions made meanwhile
-- joined it (a timer: also when the worker exits, its last chance). A call that fails puts the
-- keys not recorded back and the fallback decides retry_ms more.
local function replay(_, self)
    local journal, remote = self.journal, self.remote
    local keys, units = 0, 0
    local batch = journal:take()
    while batch do
        for key, list in pairs(batch) do
            local ok, err = remote:record(key, ages(list, now_ms()))
            if not ok then
                for rest, entries in pairs(batch) do
                    journal:put_back(rest, entries)
                end
                self.replaying = false
                ngx.log(ngx.INFO, "slidewin ", self.name, ": the fallback's journal is kept: ", err)
                self:engage(err, now_ms())
                return
            end
            journal:recorded(key)
            keys = keys + 1
            for i = 2, #list, 2 do
                units = units + list[i]
            end
        end
        batch = journal:take()
    end
    self.replaying = false
    ngx.log(ngx.NOTICE, "slidewin ", self.name, ": told the store of ", units, " unit(s) of ", keys,
        " key(s) the fallback admitted in this worker")
end

-- Whether this worker decides locally now: a store error less than retry_ms ago, or admissions
-- of its fallback the store was not told of yet (the replay that tells it starts here).
function _M.active(self, now)
    if self.replaying or now < self.until_ms then
        return true
    end
    local journal = self.journal
    if not journal or journal.count == 0 then
        return false
    end
    local ok, err = ngx.timer.at(0, replay, self)
    if not ok then
        ngx.log(ngx.ERR, "slidewin ", self.name, ": cannot replay the fallback's journal: ", err)
        self:engage(err, now)
        return true
    end
    self.replaying = true
    return true
end

-- The store failed with `err` at `now`: decide locally for retry_ms, said once a spell.
function _M.engage(self, err, now)
    self.until_ms = now + self.retry_ms
    if not self.engaged then
        self.engaged = true
        ngx.log(ngx.ERR, "slidewin ", self.name, ": store error: ", err, "; deciding locally at limits ",
            table.concat(self.limits, " "), " (fallback) until the store answers again")
    end
end

-- The store answered: back to it, said when this worker had fallen back.
function _M.release(self)
    if self.engaged then
        self.engaged, self.told_full = false, false
        ngx.log(ngx.NOTICE, "slidewin ", self.name, ": the store answers again; fallback ended")
    end
end

-- A key the full journal cannot take, refused: admitted, the store would never learn of it.
-- Said once a spell.
local function refuse_unjournaled(self, out)
    if not self.told_full then
        self.told_full = true
        ngx.log(ngx.WARN, "slidewin ", self.name, ": the fallback's journal holds fallback.journal_keys = ",
            self.journal.max_keys, " keys: other keys are refused until the store is told of them")
    end
    return answer.render(self.headers_block, false, 0, self.retry_ms, out.reset_after_ms, out.window,
        self.limits[out.window])
end

-- The local decision (resty.slidewin.answer's buffer) and its RateLimit-Policy value. A commit
-- admitted is journaled.
function _M.decide(self, key, cost, commit)
    local journal = commit and cost > 0 and self.journal
    local takes = not journal or journal:takes(key)
    local out = answer.decide(self.block, self.headers_block, key, cost, commit and takes, nil)
    held.hold(self, out.version)
    if journal and out.allowed ~= 0 then
        if takes then
            journal:add(key, now_ms(), cost)
        else
            out = refuse_unjournaled(self, out)
        end
    end
    return out, self.policy_header
end

return _M
