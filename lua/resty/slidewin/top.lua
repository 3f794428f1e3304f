-- resty.slidewin.top: who is being limited, and one key's windows, as JSON (resty.slidewin.json).
--
--   top.json(limiters, n, now_ms)
--     {"now_ms": N, "limiters": {"<name>": {"live": N, "at_limit": N,
--        "refused": [{"key", "count", "limit", "window", "refused"}, ...], "admitted": [...]}}}
--     the n (default 10) most refused keys and the n nearest their limit, node-wide, each by
--     its window nearest the limit (count / limit of that window, 1-based window), from the
--     shared region (stores shm, zone and nginx: store:walk walks it a set at a time). A store that
--     cannot list its keys gets {"unsupported": "<why>"}.
--   top.window_json(limiters, key, now_ms)
--     {"now_ms": N, "key": "...", "limiters": {"<name>": {"allowed", "count", "limit", "window",
--        "remaining", "retry_after_ms", "refused", "windows": [{"count", "limit"}, ...]}}}:
--     a peek (nothing recorded) of what the next request of cost 1 gets, for every store;
--     count and limit are the decision's window's (the one the RateLimit header describes);
--     refused and windows only where the store keeps them per key (shm, zone).
--   top.scan(sw, n): the top n keys of a limiter whose store can list them (store:walk; with
--     `stats`, the store's counters), else nil, why; top.counters(store): store:stats().
--   Both walk the shared region a step of about STEP_US at a time and, in a phase that can
--   yield (content, access, rewrite, timer), let the worker's other requests run between
--   steps: a scrape of a region of a million keys keeps none of them waiting for its whole
--   walk (a tenth of a second), only for a step.
--   A key held as a digest (longer than max_key_bytes) is listed as its hex digits, "digest": true.

local json = require "resty.slidewin.json"
local peek_used = require("slidewin").peek_used

local ngx = ngx

local _M = {}

local DEFAULT_N = 10
local MAX_N = 10000
-- How long a walk runs before it lets the worker's other requests run.
local STEP_US = 1000
-- A walk in a phase that cannot yield runs in one step.
local ONE_STEP_US = 2 ^ 52
-- The pause between steps: ngx.sleep(0) yields only on an nginx with OpenResty's delayed
-- events patch (elsewhere it warns in error.log at every call); a millisecond's timer yields
-- on every nginx.
local PAUSE_S = 0.001
local YIELDING = { rewrite = true, access = true, content = true, timer = true }

-- store:walk(n) walked to its end (store:step's answer), yielding between steps where it can.
local function walk(store, n)
    local w = store:walk(n)
    local yielding = ngx and ngx.get_phase and YIELDING[ngx.get_phase()]
    local budget = yielding and STEP_US or ONE_STEP_US
    while true do
        local over, why = store:step(w, budget)
        if over ~= false then
            return over, why
        end
        -- The cached clock is a step old: a timer set from it would have expired already.
        ngx.update_time()
        ngx.sleep(PAUSE_S)
    end
end

local function hitters(list)
    local out = {}
    for i, hit in ipairs(list) do
        local members = { "key", hit.key, "count", hit.count, "limit", hit.limit, "window", hit.window,
            "refused", hit.refused }
        if hit.digest then
            members[#members + 1], members[#members + 2] = "digest", true
        end
        out[i] = json.object(members)
    end
    return json.array(out)
end

local PER_WORKER = "store local keeps each worker's keys apart: no node-wide list"
local UNLISTED = "this store cannot list its keys without locking or scanning all of them (stores shm and zone can)"

function _M.scan(sw, n)
    local store = sw.store
    if store.keys_per_worker then
        return nil, PER_WORKER
    end
    if not store.walk then
        return nil, UNLISTED
    end
    return walk(store, n)
end

-- store:stats(), a step at a time for a store over a region (shm, zone).
function _M.counters(store)
    if store.counts_decisions then
        return walk(store).stats
    end
    return store:stats()
end

-- n checked here, so a bad one is the caller's error (nil, err), not a Lua error.
local function check_n(n)
    if n == nil then
        return DEFAULT_N
    end
    if type(n) ~= "number" or n < 0 or n > MAX_N or n % 1 ~= 0 then
        return nil, "n must be an integer from 0 to " .. MAX_N .. ", got " .. tostring(n)
    end
    return n
end

function _M.json(limiters, n, now_ms)
    local err
    n, err = check_n(n)
    if not n then
        return nil, err
    end
    local by_name = {}
    for _, sw in ipairs(limiters) do
        local scan, why = _M.scan(sw, n)
        by_name[#by_name + 1] = sw.name
        if scan then
            by_name[#by_name + 1] = json.object { "live", scan.live, "at_limit", scan.at_limit,
                "refused", hitters(scan.refused), "admitted", hitters(scan.admitted) }
        else
            by_name[#by_name + 1] = json.object { "unsupported", why }
        end
    end
    return json.encode(json.object { "now_ms", now_ms, "limiters", json.object(by_name) })
end

local function windows(list)
    if not list then
        return json.null
    end
    local out = {}
    for i, w in ipairs(list) do
        out[i] = json.object { "count", w.count, "limit", w.limit }
    end
    return json.array(out)
end

-- One limiter's windows for key: store:window where the store has one, else a peek through
-- sw:decide, the path enforce takes (its count: what the peek found counted, slidewin.peek_used).
local function window(sw, key)
    local store = sw.store
    if store.window then
        return store:window(key)
    end
    local allowed, remaining, retry_after_ms, reset_after_ms, _, w = sw:decide(key, 1, false)
    if allowed == nil then
        return nil, remaining
    end
    local limit = sw:limits()[w]
    return { allowed = allowed, count = peek_used(allowed, remaining, limit, 1), limit = limit, window = w,
        remaining = remaining, retry_after_ms = retry_after_ms, reset_after_ms = reset_after_ms }
end

function _M.window_json(limiters, key, now_ms)
    if type(key) ~= "string" then
        return nil, "key must be a string, got " .. type(key)
    end
    local by_name = {}
    for _, sw in ipairs(limiters) do
        local w, err = window(sw, key)
        by_name[#by_name + 1] = sw.name
        if w then
            by_name[#by_name + 1] = json.object { "allowed", w.allowed, "count", w.count, "limit", w.limit,
                "window", w.window, "remaining", w.remaining, "retry_after_ms", w.retry_after_ms or json.null,
                "reset_after_ms", w.reset_after_ms, "refused", w.refused or json.null,
                "windows", windows(w.windows) }
        else
            by_name[#by_name + 1] = json.object { "error", tostring(err) }
        end
    end
    return json.encode(json.object { "now_ms", now_ms, "key", key, "limiters", json.object(by_name) })
end

return _M
