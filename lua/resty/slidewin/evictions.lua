-- resty.slidewin.evictions: one timer per worker tells error.log when a region of store shm
-- (or nginx) is full, i.e. evicts keys with units in their windows and so forgets windows.
--
--   evictions.watch(name, store, interval_ms) -- in new(), for a store that counts decisions
--   evictions.start()                         -- from init_worker(), else a first decision

local phases = require "resty.slidewin.phases"

local ngx = ngx

local _M = {}

-- Limiters of store shm whose evictions are watched (keys evicted with units in their
-- windows: a region too small for its keys), on one timer per worker for all of them; each
-- limiter object keeps what this worker told (store:evictions_to_tell).
local watched, watching = {}, false
local WATCH_EVERY_S = 1

-- Tells error.log of each watched limiter's evictions, at most once per its
-- error_log_interval_ms: each eviction forgets a window.
local function tell_evictions(premature)
    if premature then
        return
    end
    for i = 1, #watched do
        local w = watched[i]
        local told = w.store:evictions_to_tell(w.interval_ms)
        if told then
            ngx.log(ngx.WARN, "slidewin ", w.name, " is full: ", told,
                ': raise size or set full = "refuse"')
        end
    end
end

-- Starts this worker's watch (from init_worker(), else its first decision: timers cannot
-- start in init_by_lua*), counting from what the regions hold now; once per worker.
local function start()
    if watching then
        return true
    end
    watching = true
    if #watched == 0 or not ngx.timer then
        return true -- nothing to watch, or Lua outside nginx
    end
    tell_evictions(false)
    local ok, err = ngx.timer.every(WATCH_EVERY_S, tell_evictions)
    if not ok then
        ngx.log(ngx.ERR, "slidewin: evictions go untold: ", err)
    end
    return true
end

_M.start = start

-- Watches the store of limiter `name`, told at most every `interval_ms`.
function _M.watch(name, store, interval_ms)
    watched[#watched + 1] = { name = name, store = store, interval_ms = interval_ms }
    phases.on_init_worker("evictions", start)
end

return _M
