-- resty.slidewin.phases: the one log-phase entry and the one init_worker entry of every kind
-- of object, so that a config names each phase once whatever it uses:
--
--   init_worker_by_lua_block { assert(require("resty.slidewin").init_worker()) }
--   log_by_lua_block { require("resty.slidewin").log() }            -- http level
--
-- log() serves, for the request ending: the settlements of language-model calls, the refunds of limiters with refund_statuses, the
-- counting of adaptive limits (which must come before their slots go back), and the release of
-- every concurrency slot it holds. init_worker() starts the timers of adaptive limits (every
-- worker) and queue limits (worker 0), and makes the registries' limiters of store "nginx".
-- Each kind adds its hook here when its first object is made, so a config without that kind
-- pays nothing for it.
--
-- The entries of each kind stay as aliases of these, for the configs that name them:
-- resty.slidewin.adaptive.log, resty.slidewin.concurrency.log (the same log()), and
-- resty.slidewin.adaptive.start, resty.slidewin.queue.start (the same init_worker()).
-- Both are idempotent: a second log() in the same request finds nothing left to do (each hook
-- takes its request's state), a second init_worker() in a worker starts nothing more.

local ipairs, tostring = ipairs, tostring

local _M = {}

-- The log hooks run in this order: the adaptive counts read the request before the slots it
-- counts go back.
local LOG_ORDER = { "llm", "refund", "adaptive", "concurrency" }

local log_hooks, log_ordered, worker_hooks = {}, {}, {}
local started = false

-- on_log(name, fn): fn() runs in every log() from now on, in LOG_ORDER (name one of it).
function _M.on_log(name, fn)
    local known = false
    for _, n in ipairs(LOG_ORDER) do
        known = known or n == name
    end
    if not known then
        error("phases.on_log: name must be one of " .. table.concat(LOG_ORDER, ", ") .. ", got " .. tostring(name), 2)
    end
    if log_hooks[name] then
        return
    end
    log_hooks[name] = fn
    local ordered = {}
    for _, n in ipairs(LOG_ORDER) do
        ordered[#ordered + 1] = log_hooks[n]
    end
    log_ordered = ordered
end

-- on_init_worker(name, fn): fn() -> true | nil, err runs in init_worker(), once per name.
function _M.on_init_worker(name, fn)
    for _, h in ipairs(worker_hooks) do
        if h.name == name then
            return
        end
    end
    worker_hooks[#worker_hooks + 1] = { name = name, hook = fn }
end

-- For log_by_lua*: every kind's work for the request ending.
function _M.log()
    for i = 1, #log_ordered do
        log_ordered[i]()
    end
end

-- For init_worker_by_lua*: every kind's timers, once per worker. true, or nil, err (the
-- first hook that failed, by name).
function _M.init_worker()
    if started then
        return true
    end
    started = true
    for _, h in ipairs(worker_hooks) do
        local ok, err = h.hook()
        if not ok then
            return nil, h.name .. ": " .. tostring(err)
        end
    end
    return true
end

return _M
