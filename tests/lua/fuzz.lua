-- A fuzz loop over the Lua API, run inside a real nginx worker (tests/tests/lua_fuzz.rs posts it
-- to test.conf's /eval with ITERATIONS and SEED prepended). Every public function and method is
-- called with random values of every type, methods both with ':' and with '.' (self random).
-- A call may succeed, or fail with a Lua error (or nil, err) whose message is a string naming
-- what was wrong; any other failure is reported. The Rust side checks the worker survived.

local slidewin = require "slidewin"
local layer = require "resty.slidewin"
local registry = require "resty.slidewin.registry"

local random, floor = math.random, math.floor
math.randomseed(SEED) -- luacheck: ignore (prepended by the test)

-- Values of every type: edge numbers, odd and huge strings, tables shaped like options.
local pool = {
    true, false, 0, -0.0, 1, -1, 2, 3, 1.5, 0 / 0, 1 / 0, -1 / 0, 2 ^ 31, 2 ^ 32, 2 ^ 52, 2 ^ 53,
    2 ^ 53 + 2, 2 ^ 63, 2 ^ 64, 1e14, 1e17, 1e300, -1e300, 5e-324,
    "", "a", "42", " ", "\0", "é", ("x"):rep(300), ("y"):rep(70000), "log", "counter", "buckets",
    "local", "shdict", "nosuch", "api", "slidewin",
    {}, { 1, 2 }, { 1, "x" }, { 0 / 0 }, { 1 / 0 }, { limit = 1, window_ms = 1000 },
    { limit = 1e14, window_ms = 5000, name = "big" }, { k = 0 }, { k = 3 }, { k = 2 ^ 40 },
    { window_ms = 1000 }, { window_ms = -1 }, { alpha = 0.5 }, { alpha = 2 }, { half_life_ms = 100 },
    { k = 3, window_ms = 1000 }, { algorithm = "buckets", limit = 5, window_ms = 1000, bucket_ms = 100 },
    { name = "api", limit = 5, window_ms = 1000, store = "shdict", algorithm = "counter", dict = "slidewin" },
    { name = "api", limit = 5, window_ms = 1000, max_key_bytes = 1 },
    print, function() end, coroutine.create(function() end), ngx.null, newproxy(),
}

local function random_value()
    local roll = random(100)
    if roll <= 5 then
        return nil
    elseif roll <= 15 then
        return random(-10, 100)
    elseif roll <= 20 then
        return (random() - 0.5) * 10 ^ random(0, 308)
    elseif roll <= 25 then
        return string.char(random(0, 255)):rep(random(0, 40))
    end
    return pool[random(#pool)]
end

-- Objects whose methods are fuzzed, rebuilt now and then (so collected objects are fuzzed too).
local objects = {}

local function rebuild()
    objects = {
        { "lim", slidewin.limiter { algorithm = "log", limit = 5, window_ms = 1000 },
            { "incoming", "decide", "check", "uncommit", "reset", "stats", "limit" } },
        { "lim", slidewin.limiter { algorithm = "counter", limit = 5, window_ms = 1000, max_key_bytes = 4 },
            { "incoming", "decide", "check", "uncommit", "reset", "stats", "limit" } },
        { "lim", slidewin.limiter { algorithm = "buckets", limit = 5, window_ms = 1000, bucket_ms = 100 },
            { "incoming", "decide", "check", "uncommit", "reset", "stats", "limit" } },
        -- In shared memory (made here in a worker, so only this worker maps it: enough to fuzz).
        { "lim", slidewin.limiter { algorithm = "log", limit = 5, window_ms = 1000, shared = "fuzz",
            size = 65536, max_key_bytes = 16 },
            { "incoming", "decide", "check", "uncommit", "reset", "stats", "limit" } },
        -- Store "shm" is made in init_by_lua only; these are made per request, so "local".
        { "sw", assert(layer.new { name = "fuzz", limit = 5, window_ms = 1000, store = "local" }),
            { "enforce", "stats", "metrics" } },
        { "sw", assert(layer.new { name = "fuzz-shared", algorithm = "counter", limit = 5, window_ms = 1000,
            store = "shdict", dict = "slidewin" }), { "enforce", "stats", "metrics" } },
        { "registry", registry.new { fuzz = { limit = 5, window_ms = 1000, store = "local" }, bad = { limit = -1 } },
            { "get", "enforce", "metrics", "stats_json" } },
    }
    for _, name in ipairs { "mean", "sum", "max", "min", "variance", "stddev", "rate" } do
        objects[#objects + 1] = { "agg", slidewin[name](name == "rate" and { window_ms = 1000 } or { k = 4 }),
            { "push", "push_at", "replace_last", "advance_to", "value", "value_at", "len", "is_full", "clear" } }
    end
    objects[#objects + 1] = { "agg", slidewin.smoothed { alpha = 0.5 },
        { "push", "push_at", "replace_last", "advance_to", "value", "value_at", "len", "is_full", "clear" } }
    -- A stores' seam, called directly.
    local store = objects[6][2].store
    objects[#objects + 1] = { "store", store, { "decide", "refund", "keys" } }
end

local functions = {
    { "slidewin.now_ms", slidewin.now_ms },
    { "slidewin.limiter", slidewin.limiter },
    { "slidewin.sliding_max", slidewin.sliding_max },
    { "slidewin.sliding_min", slidewin.sliding_min },
    { "slidewin.sliding_mean", slidewin.sliding_mean },
    { "slidewin.sliding_sum", slidewin.sliding_sum },
    { "slidewin.ewma", slidewin.ewma },
    { "resty.slidewin.new", layer.new },
    { "resty.slidewin.metrics_text", layer.metrics_text },
    { "resty.slidewin.stats_json", layer.stats_json },
    { "registry.new", registry.new },
}
for _, name in ipairs { "counter_decide", "window_limit", "window_rate", "live_limits", "status_class", "http_status", "loss_ratio",
    "goodput_rps", "peek_used", "seconds_up", "check_rule", "check_limits" } do
    functions[#functions + 1] = { "slidewin." .. name, slidewin[name] }
end
for _, name in ipairs { "mean", "sum", "max", "min", "variance", "stddev", "rate", "smoothed" } do
    functions[#functions + 1] = { "slidewin." .. name, slidewin[name] }
end

-- Messages that mean an unchecked argument reached Lua or Rust internals.
local FORBIDDEN = { "attempt to", "internal error", "unknown reason", "stack traceback", "error converting",
    "stack overflow", "panicked" }

local calls, failures, bad, messages = 0, 0, {}, {}

local function report(where, message)
    if #bad < 30 then
        bad[#bad + 1] = where .. ": " .. message
    end
end

local function judge_message(where, message)
    if type(message) ~= "string" then
        return report(where, "an error that is a " .. type(message) .. ", not a message")
    end
    -- Printable, so the report is text whatever bytes a message echoes (a field's name).
    local first = message:match("^[^\n]*"):gsub("[^\32-\126]", "?")
    for _, pattern in ipairs(FORBIDDEN) do
        if first:find(pattern, 1, true) then
            return report(where, first)
        end
    end
    -- Every argument error says what the argument must be, or which one it is.
    if not (first:find(" must ", 1, true) or first:find("expected", 1, true)
            or first:find("bad argument", 1, true) or first:find("must have", 1, true)
            or first:find("was collected", 1, true) or first:find("needs a sample", 1, true)
            or first:find("no limiter called", 1, true)) then
        return report(where, first)
    end
    messages[(first:gsub("got .*", "got ..."))] = true
end

local function judge(where, ok, first, second)
    calls = calls + 1
    if not ok then
        failures = failures + 1
        return judge_message(where, first)
    end
    -- nil, err: err names the problem too (limiters answer nil, "rejected": a decision).
    if first == nil and type(second) == "string" and second ~= "rejected" then
        failures = failures + 1
        return judge_message(where, second)
    end
end

local function args(n)
    local t = {}
    for i = 1, n do
        t[i] = random_value()
    end
    return t
end

-- enforce ends the request with ngx.exit when it refuses: record instead while fuzzing.
local real_exit, real_print, real_say = ngx.exit, ngx.print, ngx.say
ngx.exit = function(status) return status end
ngx.print = function() return 1 end
ngx.say = function() return 1 end

local ok_all, err_all = pcall(function()
    rebuild()
    for i = 1, ITERATIONS do -- luacheck: ignore (prepended by the test)
        if i % 500 == 0 then
            rebuild()
            collectgarbage("step")
        end
        local roll = random(10)
        local a = args(4)
        if roll <= 3 then
            local f = functions[random(#functions)]
            judge(f[1], pcall(f[2], a[1], a[2], a[3], a[4]))
        else
            local entry = objects[random(#objects)]
            local kind, object, methods = entry[1], entry[2], entry[3]
            local name = methods[random(#methods)]
            local where = kind .. (roll <= 7 and ":" or ".") .. name
            if roll <= 7 then
                judge(where, pcall(object[name], object, a[1], a[2], a[3]))
            else
                judge(where, pcall(object[name], a[1], a[2], a[3], a[4]))
            end
        end
        -- Now and then, a limiter freed through its __gc and still used.
        if i % 997 == 0 then
            local lim = slidewin.limiter { limit = 1, window_ms = 1000 }
            local gc = debug.getmetatable(lim).__gc
            gc(lim)
            gc(lim)
            judge("lim:incoming after __gc", pcall(lim.incoming, lim, "k", true))
        end
    end
end)

ngx.exit, ngx.print, ngx.say = real_exit, real_print, real_say
ngx.status = 200 -- a refusal set it
if not ok_all then
    return "the fuzz loop itself failed: " .. tostring(err_all)
end
local seen = {}
for message in pairs(messages) do
    seen[#seen + 1] = message
end
table.sort(seen)
return string.format("calls=%d failures=%d bad=%d\n%s\n-- messages seen:\n%s", calls, failures, #bad,
    table.concat(bad, "\n"), table.concat(seen, "\n"))
