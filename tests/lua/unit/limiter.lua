-- The slidewin module's limiters: arguments named with their values, the hidden metatable
-- and __gc, huge costs, long keys, incoming/uncommit/reset/check and every algorithm.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"

test("limiter arguments are named with their values", function()
    local cases = {
        { { limit = 30, window_ms = -5 }, "slidewin.limiter: window_ms must be a positive integer, got -5" },
        { { limit = -1, window_ms = 5 }, "slidewin.limiter: limit must be a positive integer, got -1" },
        { { limit = 1.5, window_ms = 5 }, "slidewin.limiter: limit must be a positive integer, got 1.5" },
        { { limit = "x", window_ms = 5 }, 'slidewin.limiter: limit must be a number, got "x"' },
        { { window_ms = 5 }, "slidewin.limiter: limit must be a positive integer, got nil" },
        { { limit = 1, window_ms = 5, algorithm = "nope" },
            'slidewin.limiter: algorithm must be "log", "buckets" or "counter", got "nope"' },
        { { limit = 1, window_ms = 1000, algorithm = "buckets" },
            "slidewin.limiter: bucket_ms must be a positive integer, got nil" },
        { { limit = 1, window_ms = 5, max_keys = 0 }, "slidewin.limiter: max_keys must be a positive integer, got 0" },
    }
    for _, case in ipairs(cases) do
        eq(raised(slidewin.limiter, case[1]), case[2])
    end
    eq(raised(slidewin.limiter, 5), "slidewin.limiter: options must be a table, got 5")
end)

test("method arguments are named with their values", function()
    local lim = slidewin.limiter { limit = 3, window_ms = 1000 }
    eq(raised(lim.incoming, lim, nil, true), "lim:incoming: key must be a string or a finite number, got nil")
    eq(raised(lim.incoming, lim, "a", true, 1.5), "lim:incoming: cost must be a non-negative integer, got 1.5")
    eq(raised(lim.incoming, lim, "a", true, -2), "lim:incoming: cost must be a non-negative integer, got -2")
    eq(raised(lim.check, lim, {}), "lim:check: key must be a string or a finite number, got table")
    eq(raised(lim.uncommit, lim, "a", "x"), 'lim:uncommit: cost must be a number, got "x"')
    eq(raised(lim.reset, lim, true), "lim:reset: key must be a string or a finite number, got boolean")
    eq(raised(lim.incoming, lim, 0 / 0, true), "lim:incoming: key must be a string or a finite number, got NaN")
    assert(raised(lim.incoming, "a", true):find("slidewin.limiter expected, got string", 1, true))
    assert(raised(lim.stats, {}):find("slidewin.limiter expected, got table", 1, true))
end)

test("a limiter's __gc cannot free it twice (SIGSEGV)", function()
    local lim = slidewin.limiter { limit = 1, window_ms = 1000 }
    eq(getmetatable(lim), false, "the metatable is hidden")
    assert(not pcall(function() return getmetatable(lim).__gc(lim) end), "no __gc through getmetatable")
    local gc = debug.getmetatable(lim).__gc
    gc(lim)
    gc(lim)
    eq(raised(lim.incoming, lim, "a", true), "lim:incoming: the limiter was collected (its __gc ran)")
    eq(raised(lim.stats, lim), "lim:stats: the limiter was collected (its __gc ran)")
    lim = nil
    collectgarbage()
    collectgarbage()
end)

test("a whole cost above 2^53 is refused like any cost above the limit", function()
    local lim = slidewin.limiter { limit = 3, window_ms = 60000 }
    for _, cost in ipairs { 2 ^ 53, 1e17, 1e300 } do
        local delay, err, retry = lim:incoming("a", true, cost)
        eq(delay, nil, "delay for cost " .. cost)
        eq(err, "rejected")
        eq(retry, nil, "retry for cost " .. cost)
        eq(lim:check("a", 1e17).remaining, 3, "nothing recorded")
    end
    eq(raised(lim.incoming, lim, "a", true, 1 / 0), "lim:incoming: cost must be a non-negative integer, got inf")
    eq(lim:uncommit("a", 1e17), true, "a huge refund empties the key")
end)

test("keys longer than max_key_bytes are kept as a digest: bounded bytes, still one key each", function()
    local lim = slidewin.limiter { limit = 2, window_ms = 60000, max_key_bytes = 16 }
    local long = string.rep("x", 100000)
    eq(lim:incoming(long, true), 0)
    eq(lim:incoming(long, true), 0)
    eq(lim:incoming(long, true), nil, "the same long key is one key")
    eq(lim:incoming(long .. "y", true), 0, "another long key is another key")
    eq(lim:incoming(string.rep("x", 16), true), 0, "a key at the bound is kept as it is")
    eq(lim:stats().keys, 3)
    eq(raised(slidewin.limiter, { limit = 1, window_ms = 5, max_key_bytes = 0 }),
        "slidewin.limiter: max_key_bytes must be a positive integer, got 0")
end)

test("incoming follows lua-resty-limit-traffic", function()
    local lim = slidewin.limiter { algorithm = "log", limit = 3, window_ms = 60000 }
    for want = 2, 0, -1 do
        local delay, remaining = lim:incoming("a", true)
        eq(delay, 0, "delay")
        eq(remaining, want, "remaining")
    end
    local delay, err, retry_after_ms = lim:incoming("a", true)
    eq(delay, nil, "delay")
    eq(err, "rejected")
    assert(retry_after_ms > 59000 and retry_after_ms <= 60000, "retry_after_ms " .. retry_after_ms)
    -- commit = false decides without recording.
    local other = slidewin.limiter { limit = 1, window_ms = 60000 }
    eq(other:incoming("b", false), 0)
    eq(other:incoming("b", false), 0)
    eq(other:incoming("b", true), 0)
    eq(other:incoming("b", false), nil)
    -- A cost above the limit can never be admitted: no retry time.
    local _, _, never = other:incoming("c", true, 2)
    eq(never, nil, "retry_after_ms when cost > limit")
end)

test("uncommit gives back, reset forgets, numbers and strings are one key", function()
    local lim = slidewin.limiter { algorithm = "counter", limit = 2, window_ms = 60000 }
    lim:incoming(42, true)
    lim:incoming("42", true)
    eq(lim:incoming(42, true), nil, "third call on key 42")
    eq(lim:uncommit("42"), true)
    eq(lim:incoming(42, true), 0)
    lim:reset(42)
    local d = lim:check("42", 1)
    eq(d.allowed, true)
    eq(d.limit, 2)
    eq(d.remaining, 1)
    eq(d.retry_after_ms, 0)
    assert(d.reset_after_ms > 0)
    local stats = lim:stats()
    eq(stats.keys, 1)
    eq(stats.evictions, 0)
    eq(stats.allowed, 4)
    eq(stats.rejected, 1)
end)

test("every algorithm limits", function()
    for _, conf in ipairs {
        { algorithm = "log", limit = 5, window_ms = 60000 },
        { algorithm = "counter", limit = 5, window_ms = 60000 },
        { algorithm = "buckets", limit = 5, window_ms = 60000, bucket_ms = 1000 },
    } do
        local lim = slidewin.limiter(conf)
        local admitted = 0
        for _ = 1, 8 do
            if lim:incoming("k", true) then
                admitted = admitted + 1
            end
        end
        eq(admitted, 5, conf.algorithm)
    end
end)

harness.done()
