-- LuaJIT-level tests of the slidewin module and resty.slidewin logic that need no nginx.
-- Run by tests/tests/lua_unit.rs: luajit tests/lua/unit.lua (LUA_PATH = lua/ and tests/lua/,
-- LUA_CPATH = slidewin.so).

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

test("stream functions and objects", function()
    local function show(t) return table.concat(t, ",") end
    local xs = { 1, 3, -1, -3, 5, 3, 6, 7 }
    eq(show(slidewin.sliding_max(xs, 3)), "3,3,5,5,6,7")
    eq(show(slidewin.sliding_min(xs, 3)), "-1,-3,-3,-3,3,3")
    eq(show(slidewin.sliding_max({ 1, 2 }, 3)), "", "shorter than k")
    eq(show(slidewin.ewma({ 10, 20, 20 }, 0.5)), "10,15,17.5")
    local max = slidewin.max { window_ms = 1000 }
    eq(max:value(), nil, "empty window")
    max:push_at(10000, 5)
    max:push_at(10400, 2)
    eq(max:value_at(10999), 5)
    eq(max:value_at(11000), 2)
    eq(max:len(), 1)
    local mean = slidewin.mean { k = 3 }
    for _, x in ipairs { 1, 2, 3, 4 } do mean:push(x) end
    eq(mean:value(), 3)
    mean:replace_last(7)
    eq(mean:value(), 4)
    eq(mean:is_full(), true)
    local smooth = slidewin.smoothed { alpha = 0.5 }
    smooth:push(10)
    smooth:push(20)
    eq(smooth:value(), 15)
end)

test("stream arguments are named with their values", function()
    eq(raised(slidewin.sliding_max, { 1, "x" }, 3), 'slidewin.sliding_max: t[2] must be a number, got "x"')
    eq(raised(slidewin.sliding_mean, { 1 }, 0), "slidewin.sliding_mean: k must be a positive integer, got 0")
    eq(raised(slidewin.sliding_sum, 5, 1), "slidewin.sliding_sum: t must be an array of numbers, got 5")
    eq(raised(slidewin.ewma, { 1 }, 2), "slidewin.ewma: alpha must be a number in (0, 1], got 2")
    eq(raised(slidewin.mean, { k = 0 }), "slidewin.mean: k must be a positive integer, got 0")
    eq(raised(slidewin.rate, { window_ms = -5 }), "slidewin.rate: window_ms must be a positive integer, got -5")
    eq(raised(slidewin.max, {}), "slidewin.max: options must have one of k or window_ms")
    local max = slidewin.max { window_ms = 1000 }
    max:push_at(2000, 1)
    eq(raised(max.push_at, max, 1000, 1), "agg:push_at: t_ms must not be earlier than the newest sample (2000), got 1000")
    eq(raised(max.push, max, 0 / 0), "agg:push: x must be a finite number, got NaN")
    eq(max:value(), 1, "a bad sample leaves the window as it was")
end)

-- Huge finite samples, the charting conventions and rolling quantiles.
test("huge finite samples leave no wrong value behind", function()
    local variance = slidewin.variance { k = 3 }
    local mean = slidewin.mean { k = 3 }
    local got_var, got_mean = {}, {}
    for _, x in ipairs { 1.7e308, 1.7e308, 1, 2, 3, 4, 5, 6 } do
        variance:push(x)
        mean:push(x)
        got_var[#got_var + 1] = tostring(variance:value())
        got_mean[#got_mean + 1] = tostring(mean:value())
    end
    eq(table.concat(got_var, ","), "nil,0,inf,inf,1,1,1,1")
    eq(table.concat(got_mean, ",", 1, 2), "1.7e+308,1.7e+308")
    eq(table.concat(got_mean, ",", 5), "2,3,4,5")
    local one = slidewin.variance { k = 3 }
    for _, x in ipairs { 1e155, 1, 2, 3 } do one:push(x) end
    eq(one:value(), 1)
end)

test("population variance and SD, WMA, EMA seeding, Bollinger bands", function()
    local pvar = slidewin.population_variance { k = 4 }
    local psd = slidewin.population_stddev { k = 4 }
    local wma = slidewin.wma { k = 3 }
    for _, x in ipairs { 1, 3, 1, 3 } do pvar:push(x); psd:push(x); wma:push(x) end
    eq(pvar:value(), 1)
    eq(psd:value(), 1)
    eq(wma:value(), (3 + 2 * 1 + 3 * 3) / 6)
    local sma = slidewin.ema { period = 3, seed = "sma" }
    local first = slidewin.ema { period = 3 }
    local got = {}
    for _, x in ipairs { 2, 4, 6, 8 } do
        sma:push(x)
        first:push(x)
        got[#got + 1] = tostring(sma:value())
    end
    eq(table.concat(got, ","), "nil,nil,4,6")
    eq(first:value(), ((2 * 0.5 + 4 * 0.5) * 0.5 + 6 * 0.5) * 0.5 + 8 * 0.5)
    local bb = slidewin.bollinger { k = 4 }
    eq(bb:bands(), nil, "no bands for an empty window")
    for _, x in ipairs { 1, 3, 1, 3 } do bb:push(x) end
    local lower, middle, upper = bb:bands()
    eq(lower .. "," .. middle .. "," .. upper, "0,2,4")
    eq(bb:value(), 2)
    local plain = slidewin.mean { k = 1 }
    plain:push(1)
    eq(select("#", plain:bands()), 3, "bands() of an aggregate without any: nil, nil, nil")
    eq(plain:bands(), nil)
    eq(raised(slidewin.ema, { period = 3, seed = "last" }), 'slidewin.ema: seed must be "first" or "sma", got "last"')
    eq(raised(slidewin.ema, {}), "slidewin.ema: period must be a number, got nil")
    eq(raised(slidewin.bollinger, { k = 3, width = -1 }), "slidewin.bollinger: width must be a finite number >= 0, got -1")
end)

-- The q-quantile of a sorted copy (linear interpolation between the nearest ranks).
local function sorted_quantile(xs, q)
    if #xs == 0 then return nil end
    local sorted = {}
    for i, x in ipairs(xs) do sorted[i] = x end
    table.sort(sorted)
    local h = (#sorted - 1) * q
    local floor = math.floor(h)
    local fraction = h - floor
    if fraction > 0 and sorted[floor + 2] then
        return (1 - fraction) * sorted[floor + 1] + fraction * sorted[floor + 2]
    end
    return sorted[floor + 1]
end

test("quantiles equal a sort of the window (count and time windows, replace_last)", function()
    math.randomseed(13)
    for _, case in ipairs { { k = 1 }, { k = 9 }, { k = 64 }, { window_ms = 30 }, { window_ms = 300 } } do
        for _, q in ipairs { 0, 0.5, 0.95, 0.99, 1, math.random() } do
            local p = slidewin.quantile { k = case.k, window_ms = case.window_ms, q = q }
            local samples, t = {}, 0
            for step = 1, 600 do
                local x = math.random(0, 200) / 4 - 10
                if #samples > 0 and p:len() > 0 and math.random() < 0.15 then
                    p:replace_last(x)
                    samples[#samples].x = x
                else
                    t = t + math.random(0, 9)
                    if case.k then p:push(x) else p:push_at(t, x) end
                    samples[#samples + 1] = { t = t, x = x }
                end
                local window = {}
                for i, s in ipairs(samples) do
                    if (case.k and i > #samples - case.k) or (case.window_ms and s.t > t - case.window_ms) then
                        window[#window + 1] = s.x
                    end
                end
                eq(p:value(), sorted_quantile(window, q), string.format("%s q=%s step %d", case.k or case.window_ms, q, step))
            end
        end
    end
    eq(raised(slidewin.quantile, { k = 3 }), "slidewin.quantile: q must be a number, got nil")
    eq(raised(slidewin.quantile, { k = 3, q = 1.5 }), "slidewin.quantile: q must be a number in [0, 1], got 1.5")
end)

test("now_ms is integer milliseconds", function()
    local now = slidewin.now_ms()
    eq(now % 1, 0, "fraction")
    assert(math.abs(now - os.time() * 1000) < 2000, "now_ms near os.time()")
end)

test("a zone's limiter describes the rule of its last decision, and follows one put again", function()
    local zone = slidewin.zone { name = "unit-rules", size = 1024 * 1024, max_rules = 4 }
    local held = zone:put("r", { limit = 10, window_ms = 1000, max_limit = 20, size = 16384 })
    local first = held:rule()
    eq(#first.windows, 1)
    eq(first.windows[1].algorithm, "log")
    eq(first.windows[1].max_limit, 20)
    zone:put("r", { windows = {
        { limit = 3, window_ms = 1000, max_limit = 20 },
        { algorithm = "buckets", limit = 5, window_ms = 60000, bucket_ms = 1000 },
    }, size = 16384 })
    eq(held:rule().version, first.version, "no call since: the rule it decided with")
    local version = select(7, held:decide("k", 1, true))
    assert(version ~= first.version, "a new rule, a new version")
    local now = held:rule()
    eq(now.version, version, "the version the decision answered")
    eq(#now.windows, 2)
    eq(now.windows[1].limit, 3)
    eq(now.windows[2].algorithm, "buckets")
    eq(now.windows[2].bucket_ms, 1000)
    eq(now.windows[2].window_ms, 60000)
    -- Limits only: the same rule, a new version; follow() moves to it before any decision.
    zone:put("r", { windows = {
        { limit = 4, window_ms = 1000, max_limit = 20 },
        { algorithm = "buckets", limit = 5, window_ms = 60000, bucket_ms = 1000 },
    }, size = 16384 })
    local followed = held:follow()
    assert(followed ~= version, "a limit changed")
    eq(held:rule().version, followed)
    eq(held:rule().windows[1].limit, 4)
    eq(held:limits()[1], 4)
    zone:remove("r")
    eq(raised(held.follow, held), "lim:follow: the rule was removed from its zone")
end)

test("the core's formulas: values, and errors naming the argument and the value", function()
    -- The sliding counter over counts kept elsewhere: the core's documented vector.
    local allowed, remaining, retry, reset = slidewin.counter_decide(100, 1000, 100, 0, 1001, 1, true)
    eq(allowed, false)
    eq(remaining, 0)
    eq(retry, 9)
    eq(reset, 999)
    allowed, remaining, retry, reset = slidewin.counter_decide(100, 1000, 100, 0, 1010, 1, true)
    eq(allowed, true)
    eq(remaining, 0)
    eq(retry, 0)
    eq(reset, 1990, "a recorded cost lasts to the end of the next window")
    eq(select(4, slidewin.counter_decide(100, 1000, 100, 0, 1010, 1, false)), 990, "a peek records nothing")
    eq(select(3, slidewin.counter_decide(100, 1000, 0, 0, 5, 1e17)), nil, "a cost above 2^53 never fits")
    eq(raised(slidewin.counter_decide, 100, 1000, 100, 0, 1001),
        "slidewin.counter_decide: cost must be a number, got no value")
    eq(raised(slidewin.counter_decide, 100, "x", 100, 0, 1001, 1),
        "slidewin.counter_decide: window_ms must be a number, got string")
    eq(raised(slidewin.counter_decide, 0, 1000, 0, 0, 1, 1),
        "slidewin.counter_decide: limit must be a positive integer, got 0")
    eq(raised(slidewin.counter_decide, 10, 1000, -1, 0, 1, 1),
        "slidewin.counter_decide: previous must be a non-negative integer, got -1")
    eq(raised(slidewin.counter_decide, 10, 1000, 0, 0.5, 1, 1),
        "slidewin.counter_decide: current must be a non-negative integer, got 0.5")
    -- The FFI door (store shdict's, per request) answers as the C function, errors included.
    local by_ffi = require("resty.slidewin.answer").counter_decide
    math.randomseed(11)
    for i = 1, 500 do
        local args = { math.random(1, 20), math.random(1, 3) * 500, math.random(0, 25), math.random(0, 25),
            math.random(0, 5000), math.random(0, 22), math.random() < 0.5 }
        local got, want = { by_ffi(unpack(args)) }, { slidewin.counter_decide(unpack(args)) }
        for at = 1, 4 do
            eq(got[at], want[at], "call " .. i .. " value " .. at)
        end
    end
    eq(raised(by_ffi, 10, 1000, -1, 0, 1, 1), "slidewin.counter_decide: previous must be a non-negative integer, got -1")
    -- A header's seconds: rounded up, the one rule of every header.
    eq(slidewin.seconds_up(1001), 2)
    eq(slidewin.seconds_up(1000), 1)
    eq(slidewin.seconds_up(0), 0)
    eq(raised(slidewin.seconds_up, -1), "slidewin.seconds_up: ms must be a non-negative integer, got -1")
    -- A rate as a window's limit: rounded up once, within 1..max_limit.
    eq(slidewin.window_limit(12.5, 10000, 1000), 125)
    eq(slidewin.window_limit(1001 / 3, 3000, 5000), 1001)
    eq(slidewin.window_limit(0, 1000, 10), 1)
    eq(slidewin.window_limit(1e9, 1000, 10), 10)
    eq(slidewin.window_rate(125, 10000), 12)
    eq(slidewin.window_rate(1, 3600000), 1, "at least 1")
    eq(raised(slidewin.window_rate, 0, 1000), "slidewin.window_rate: limit must be a positive integer, got 0")
    eq(raised(slidewin.window_limit, -1, 1000, 10), "slidewin.window_limit: per_second must be a finite number >= 0, got -1")
    eq(raised(slidewin.window_limit, 1, 0, 10), "slidewin.window_limit: window_ms must be a positive integer, got 0")
    -- The reload rule: window by window, the live limit while the config keeps its limit.
    local limits = slidewin.live_limits({ 20, 100 }, { 10, 100 }, { 5, 50 })
    eq(#limits, 2)
    eq(limits[1], 20)
    eq(limits[2], 50)
    eq(slidewin.live_limits({ 20, 100 }, nil, nil)[2], 100, "none set: the configured limits")
    eq(slidewin.live_limits({ 20, 100 }, { 20 }, { 5 })[1], 20, "set under another rule")
    eq(raised(slidewin.live_limits, { 1 }, { -1 }, { 1 }), "slidewin.live_limits: set_under must be a non-negative integer, got -1")
    eq(raised(slidewin.live_limits, 5), "slidewin.live_limits: configured must be a list of limits, got 5")
    -- What an answer tells of the upstream.
    eq(slidewin.status_class(200, nil), "ok")
    eq(slidewin.status_class(200, "502, 200"), "ok", "the last upstream tried counts")
    eq(slidewin.status_class(502, "504 : 503"), "loss")
    eq(slidewin.status_class(200, "200, 503"), "backpressure")
    eq(slidewin.status_class(429, nil), "backpressure")
    eq(slidewin.status_class(499, "200"), "loss", "the client gave up")
    eq(raised(slidewin.status_class, "200"), 'slidewin.status_class: status must be a number, got "200"')
    eq(raised(slidewin.status_class, 200, 5), "slidewin.status_class: upstream_status must be a string or nil, got 5")
    eq(slidewin.http_status(503), 503)
    eq(slidewin.http_status(99), nil)
    eq(slidewin.http_status(200.5), nil)
    eq(slidewin.http_status("200"), nil)
    -- The adaptive limit's interval figures.
    eq(slidewin.loss_ratio(8, 1, 1), 0.2)
    eq(slidewin.loss_ratio(0, 0, 0), 0)
    eq(slidewin.goodput_rps(8, 2000), 4)
    eq(slidewin.goodput_rps(8, 0), 0)
    eq(raised(slidewin.loss_ratio, 1, -1, 0), "slidewin.loss_ratio: loss must be a non-negative integer, got -1")
    eq(raised(slidewin.goodput_rps, 1, 0.5), "slidewin.goodput_rps: elapsed_ms must be an integer, got 0.5")
    -- A peek's count: the limit less the room it found.
    eq(slidewin.peek_used(true, 4, 10, 2), 4)
    eq(slidewin.peek_used(false, 1, 10, 2), 9)
    eq(raised(slidewin.peek_used, 1, 1, 10, 2), "slidewin.peek_used: allowed must be a boolean, got 1")
    -- A window's name when its config gives none: the rule's, then the rule's with the length.
    eq(slidewin.default_window_name("api", 1, 1000), "api")
    eq(slidewin.default_window_name("api", 2, 3600000), "api-1h")
    eq(slidewin.default_window_name("api", 3, 1500), "api-1500ms")
    eq(raised(slidewin.default_window_name, "api", 0, 1000),
        "slidewin.default_window_name: i must be a positive integer, got 0")
    eq(raised(slidewin.default_window_name, 5, 1, 1000),
        "slidewin.default_window_name: name must be a UTF-8 string, got 5")
    -- A rule's windows, checked as slidewin.limiter checks them.
    eq(slidewin.check_rule { limit = 1, window_ms = 1000 }, true)
    eq(select(2, slidewin.check_rule { windows = { { limit = 1, window_ms = 1000 }, { limit = 0, window_ms = 10 } } }),
        "windows[2].limit must be a positive integer, got 0")
    eq(select(2, slidewin.check_rule { algorithm = "buckets", limit = 1, window_ms = 1000, bucket_ms = 300 }),
        "bucket_ms must be a divisor of window_ms, got 300")
    eq(select(2, slidewin.check_rule { windows = { { limit = 5, window_ms = 10, max_limit = 4 } } }),
        "windows[1].max_limit must be at least the window's limit, got 4")
    eq(raised(slidewin.check_rule, 5), "slidewin.check_rule: conf must be a table, got 5")
    local windows = { { max_limit = 5 }, { max_limit = 50 } }
    eq(slidewin.check_limits(windows, { 5, 1 }, "limits"), true)
    eq(select(2, slidewin.check_limits(windows, { 5, 51 }, "limits")),
        "limits[2] must be a positive integer at most max_limit (50), got 51")
    eq(select(2, slidewin.check_limits(windows, { 5 }, "tiers.gold")),
        "tiers.gold must be a list of 2 limit(s), one per window, got table")
    -- A name with a line break stays on the message's one line.
    eq(select(2, slidewin.check_limits(windows, { 5 }, "\nodd")),
        "\\nodd must be a list of 2 limit(s), one per window, got table")
end)

-- resty.slidewin without nginx: config validation and the shdict store on a fake dict and clock.

local fake_now = 0
local layer = require("unit.fake_nginx").layer(function() return fake_now end)

test("new returns nil, err naming the field and the value", function()
    local cases = {
        { { name = "api", limit = -1, window_ms = 1000 }, "limit must be a positive integer, got -1" },
        { { name = "api", limit = 1, window_ms = 0 }, "window_ms must be a positive integer, got 0" },
        { { name = "api", limit = 1, window_ms = 10, algorithm = "sliding" },
            'algorithm must be "log", "buckets" or "counter", got "sliding"' },
        { { name = "a b", limit = 1, window_ms = 10 }, 'name must be a string of letters, digits, _ . -, got "a b"' },
        { { name = "api", limit = 1, window_ms = 10, status = 200 }, "status must be an HTTP error status, got 200" },
        { { name = "api", limit = 1, window_ms = 10, on_store_error = "retry" },
            'on_store_error must be "allow", "deny" or "local", got "retry"' },
        { { name = "api", limit = 1, window_ms = 10, algorithm = "counter", store = "shdict", dict = "nope" },
            'dict must name a lua_shared_dict, got "nope"' },
        { { name = "api", limit = 1, window_ms = 10, metrics_dict = "nope" },
            'metrics_dict must name a lua_shared_dict, got "nope"' },
        { { name = "api", limit = 1, window_ms = 10, store = "shdict", dict = "slidewin" },
            'algorithm must be "counter" with store "shdict", got "log"' },
        { { name = "api", limit = 1, window_ms = 10, key_var = "$remote_addr" },
            'key_var must be an nginx variable\'s name without the $ (e.g. "remote_addr"), got "$remote_addr"' },
        { { name = "api", limit = 1, window_ms = 10, key_var = 7 },
            'key_var must be an nginx variable\'s name without the $ (e.g. "remote_addr"), got 7' },
        { { name = "api", store = "nginx" }, 'zone "api": the native module (ngx_http_slidewin_module) is not loaded' },
        { { name = "api", store = "nginx", zone = "" }, 'zone must be the name of a slidewin_zone in nginx.conf, got ""' },
        { { name = "api", store = "nginx", windows = {} },
            'windows is nginx.conf\'s: store "nginx" takes the windows of its slidewin_zone, got windows = a table' },
    }
    for _, case in ipairs(cases) do
        local sw, err = layer.new(case[1])
        eq(sw, nil, case[2])
        eq(err, case[2])
    end
    local sw, err = layer.new { name = "api", limit = 1, window_ms = 10, store = "nosuch" }
    eq(sw, nil)
    assert(err:find('^store must be a resty.slidewin.store module, got "nosuch"'), err)
    assert(layer.new { name = "api", limit = 30, window_ms = 5000 }, "a good config")
end)

test("the FFI answer decides as lim:decide, errors included, with the core's header values", function()
    local ffi = require "ffi"
    local answer = require "resty.slidewin.answer"
    local windows = {
        { algorithm = "log", limit = 5, window_ms = 1000 },
        { algorithm = "buckets", limit = 12, window_ms = 4000, bucket_ms = 500 },
    }
    local by_ffi = slidewin.limiter { windows = windows }
    local by_api = slidewin.limiter { windows = windows }
    local headers = slidewin.headers("draft")
    local block, headers_block = answer.handles(by_ffi, headers)
    local named = { { name = "a", limit = 5, window_ms = 1000 }, { name = "a-4s", limit = 12, window_ms = 4000 } }
    eq(headers:set(by_ffi:rule().version, named), '"a";q=5;w=1, "a-4s";q=12;w=4')
    local function values(out)
        local v = {}
        for i = 0, 4 do
            v[i + 1] = out.len[i] > 0 and ffi.string(out.text + out.start[i], out.len[i]) or false
        end
        return v
    end
    math.randomseed(7)
    for i = 1, 2000 do
        local key, cost, commit = "k" .. math.random(3), math.random(0, 3), math.random() < 0.8
        local out = answer.decide(block, headers_block, key, cost, commit)
        local got = { out.allowed ~= 0, out.remaining, out.has_retry ~= 0, out.window, out.version }
        local want = { by_api:decide(key, cost, commit) }
        eq(out.rendered, 1, "call " .. i .. " rendered")
        eq(got[1], want[1], "call " .. i .. " allowed")
        eq(got[2], want[2], "call " .. i .. " remaining")
        eq(got[3], want[3] ~= nil, "call " .. i .. ": retry_after_ms nil alike")
        eq(got[4], want[6], "call " .. i .. " window")
        -- The values are the core's for this decision (t moves with the clock: its form only).
        local v = values(out)
        local t_ms = out.allowed == 0 and out.has_retry ~= 0 and out.retry_after_ms or out.reset_after_ms
        eq(v[1], string.format('"%s";r=%d;t=%d', named[out.window].name, out.remaining, math.ceil(t_ms / 1000)),
            "call " .. i .. " RateLimit")
        eq(v[2], out.allowed == 0 and out.has_retry ~= 0 and tostring(math.ceil(out.retry_after_ms / 1000)),
            "call " .. i .. " Retry-After")
    end
    eq(raised(answer.decide, block, headers_block, "k", 1.5, true),
        "lim:decide: cost must be a non-negative integer, got 1.5")
    eq(raised(answer.decide, block, headers_block, "k", -1, true),
        "lim:decide: cost must be a non-negative integer, got -1")
    eq(raised(answer.decide, block, headers_block, "k", 1, true, { 3, -1 }),
        "lim:decide: limit must be a non-negative integer, got -1")
    -- Per-call limits and number keys cross the same way.
    local out = answer.decide(block, headers_block, 42, 1, false, { 3, 12 })
    eq(out.remaining, select(2, by_ffi:decide("42", 1, false, { 3, 12 })))
    eq(out.limit, 3)
    -- A decision made elsewhere (a remote store's) renders alike, in every style.
    local x = slidewin.headers("x-ratelimit")
    x:set(0, named)
    local _, x_block = answer.handles(nil, x)
    local v = values(answer.render(x_block, false, 0, 1500, 4000, 2, 12))
    eq(v[2], "2")
    eq(v[3], "12")
    eq(v[4], "0")
    eq(v[1], false, "no draft value in style x-ratelimit")
    local none = slidewin.headers("none")
    none:set(0, named)
    local _, none_block = answer.handles(nil, none)
    eq(answer.retry_after(answer.render(none_block, false, 0, 1500, 4000, 2, 12)), "2",
        "the wait is rendered for a body even when no header is sent")
    eq(select(2, slidewin.headers("github")), 'headers must be "draft", "x-ratelimit" or "none", got "github"')
    eq(raised(headers.set, headers, 1, { { name = 'a"b', limit = 1, window_ms = 1 } }),
        [[headers:set: windows[1].name must be at most 200 bytes without '"' or '\', got "a"b"]])
    eq(raised(headers.policy, headers, {}), "headers:policy: windows must list 1 to 8 windows, got 0")
    -- Other limits for the same windows: limits[i] stands for windows[i].limit.
    eq(headers:policy(named, { 7, 30 }), '"a";q=7;w=1, "a-4s";q=30;w=4')
    eq(named[1].limit, 5, "the windows are left as they are")
    eq(raised(headers.policy, headers, named, { 7 }),
        "headers:policy: limit must be a number, got nil")
    eq(raised(headers.set, "x", 1, {}),
        [[headers:set: self must be a slidewin headers object (call headers:set(...) with ':'), got "x"]])
end)

test("shdict store counts like slidewin::SlidingCounter", function()
    local sw = assert(layer.new {
        name = "c", algorithm = "counter", limit = 100, window_ms = 1000, store = "shdict", dict = "slidewin",
    })
    local store = sw.store
    -- The core's documented vector: a full window at t = 999, then 1 at 1001 waits 9 ms.
    fake_now = 999
    local allowed, remaining, retry, reset = store:decide("k", 100, true)
    eq(allowed, true)
    eq(remaining, 0)
    eq(retry, 0)
    eq(reset, 1001)
    fake_now = 1001
    allowed, remaining, retry, reset = store:decide("k", 1, true)
    eq(allowed, false)
    eq(remaining, 0)
    eq(retry, 9)
    eq(reset, 999)
    fake_now = 1010
    allowed, remaining = store:decide("k", 1, true)
    eq(allowed, true)
    eq(remaining, 0)
    -- 100 more fit only once the current window's 1 has slid out: the end of the next window.
    allowed, remaining, retry = store:decide("k", 100, false)
    eq(allowed, false)
    eq(retry, 990 + 1000)
    -- Uncommit gives back; a peek records nothing; a cost above the limit never fits.
    eq(store:refund("k", 1), true)
    eq((store:decide("k", 1, false)), true)
    eq((store:decide("k", 1, false)), true)
    local _, _, never = store:decide("k", 101, true)
    eq(never, nil)
    eq(store:keys(), 1)
    -- Every count the store creates expires after 2 x window_ms (in seconds for the dict).
    local created = 0
    for key, ttl in pairs(ngx.shared.slidewin.ttls) do
        eq(ttl, 2, "init_ttl of " .. key)
        created = created + 1
    end
    assert(created >= 3, "counts for windows 0 and 1 and the keys count")
end)

test("shm store (the default): size as bytes or nginx units, errors naming it", function()
    local sw = assert(layer.new { name = "shm-a", limit = 3, window_ms = 1000, size = "64k" })
    eq(sw.store.counts_decisions, true)
    for i = 1, 3 do
        eq((sw.store.lim:decide("k", 1, true)), true, "call " .. i)
    end
    eq((sw.store.lim:decide("k", 1, true)), false)
    local stats = sw.store:stats()
    eq(stats.allowed, 3)
    eq(stats.rejected, 1)
    eq(stats.keys, 1)
    local cases = {
        { { name = "shm-b", limit = 1, window_ms = 10, size = "10q" },
            'size must be a number of bytes or a size like "10m", got 10q' },
        { { name = "shm-c", limit = 1000, window_ms = 60000, size = 4096 },
            "slidewin.limiter: size must be at least 129472 bytes (8 keys of this limit, window and "
                .. "max_key_bytes), got 4096" },
        { { name = "shm-d", limit = 1, window_ms = 10, max_key_bytes = 8 },
            "slidewin.limiter: max_key_bytes must be from 16 to 65536, got 8" },
    }
    for _, case in ipairs(cases) do
        local none, err = layer.new(case[1])
        eq(none, nil, case[2])
        eq(err, case[2])
    end
end)

test("a limit up to 2^53 is written in headers as exact digits", function()
    for limit, q in pairs { [1e14] = "100000000000000", [123456789012345] = "123456789012345",
        [2 ^ 53 - 1] = "9007199254740991", [30] = "30" } do
        local sw = assert(layer.new { name = "api", limit = limit, window_ms = 5000 })
        eq(sw.policy_header, '"api";q=' .. q .. ";w=5")
    end
end)

test("methods called with '.' and bad limiter lists say so", function()
    local sw = assert(layer.new { name = "api", limit = 3, window_ms = 1000 })
    eq(raised(sw.enforce, "alice"),
        'sw:enforce: self must be a resty.slidewin limiter (call sw:enforce(...) with \':\'), got "alice"')
    eq(raised(sw.stats), "sw:stats: self must be a resty.slidewin limiter (call sw:stats(...) with ':'), got nil")
    eq(raised(sw.metrics, 5), "sw:metrics: self must be a resty.slidewin limiter (call sw:metrics(...) with ':'), got 5")
    eq(raised(layer.stats_json, { 1, 2 }), "slidewin.stats_json: limiters[1] must be a resty.slidewin limiter, got 1")
    eq(raised(layer.stats_json, { sw }, 7), "slidewin.stats_json: members must be an array of JSON members, got 7")
    eq(raised(layer.stats_json, { sw }, { true }),
        "slidewin.stats_json: members[1] must be a string (a JSON member), got true")
    assert(layer.stats_json({ sw }, { '"extra":{}' }):find(',"extra":{}}$'))
    eq(raised(layer.metrics_text, "x"), 'slidewin.metrics_text: limiters must be an array of limiters, got "x"')
    eq(raised(sw.enforce, sw, nil), "sw:enforce: key must be a string or a finite number, got nil")
    assert(raised(sw.enforce, sw, {}):find("^sw:enforce: key must be a string or a finite number, got table"))
    local mean = slidewin.mean { k = 3 }
    eq(raised(mean.push, 5), "agg:push: self must be a slidewin aggregate (call agg:push(...) with ':'), got 5")
    local registry = require("resty.slidewin.registry").new { api = { limit = 1, window_ms = 1000 } }
    eq(raised(registry.enforce, "api", "alice"),
        'registry:enforce: self must be a registry (call registry:enforce(...) with \':\'), got "api"')
end)

test("shdict store: bad keys are errors, never a concatenation failure", function()
    local sw = assert(layer.new {
        name = "k", algorithm = "counter", limit = 3, window_ms = 1000, store = "shdict", dict = "slidewin",
    })
    for _, case in ipairs { { nil, "nil" }, { {}, "table" }, { true, "boolean" }, { 0 / 0, tostring(0 / 0) } } do
        eq(raised(sw.store.decide, sw.store, case[1], 1, true),
            "store:decide: key must be a string or a finite number, got " .. case[2])
    end
    eq(raised(sw.store.refund, sw.store, "a", "x"), "store:refund: cost must be a non-negative integer, got x")
    local sw2, err = layer.new {
        name = "k2", algorithm = "counter", limit = 2 ^ 40, window_ms = 2 ^ 11, store = "shdict", dict = "slidewin",
    }
    eq(sw2, nil)
    eq(err, "max_limit x window_ms must be at most 2^50 with store shdict (exact counts), got 1099511627776 x 2048")
end)

test("shdict store: a huge cost is refused and resets nothing", function()
    local store = assert(layer.new {
        name = "h", algorithm = "counter", limit = 3, window_ms = 1000, store = "shdict", dict = "slidewin",
    }).store
    fake_now = 5000
    eq((store:decide("k", 3, true)), true)
    for _, cost in ipairs { 4, 2 ^ 53, 1e17 } do
        local allowed, remaining, retry = store:decide("k", cost, true)
        eq(allowed, false, "cost " .. cost)
        eq(remaining, 0)
        eq(retry, nil)
    end
    eq((store:decide("k", 1, true)), false, "the count was not rounded back to 0")
    eq(store:refund("k", 1e17), true)
    eq((store:decide("k", 3, true)), true, "a huge refund empties the key exactly")
end)

test("shdict store: a key longer than max_key_bytes is one digest key, never a failure", function()
    local store = assert(layer.new {
        name = "l", algorithm = "counter", limit = 2, window_ms = 1000, store = "shdict", dict = "slidewin",
        max_key_bytes = 64,
    }).store
    fake_now = 9000
    local long = string.rep("y", 70000) -- longer than the dict's key limit too
    eq((store:decide(long, 1, true)), true)
    eq((store:decide(long, 1, true)), true)
    eq((store:decide(long, 1, true)), false, "the same long key is one count")
    eq((store:decide(long .. "z", 1, true)), true, "another long key is another count")
    for key in pairs(ngx.shared.slidewin.values) do
        assert(#key < 100, "a dict key of " .. #key .. " bytes")
    end
end)

test("switch.cidr: IPv4 and IPv6 CIDRs, IPv4-mapped addresses, bad text is nil", function()
    local cidr = require "resty.slidewin.switch.cidr"
    local function holds(net, addr)
        return cidr.contains(assert(cidr.parse(net), net), assert(cidr.address(addr), addr))
    end
    local cases = {
        { "10.0.0.0/8", "10.255.3.4", true }, { "10.0.0.0/8", "11.0.0.1", false },
        { "192.168.1.128/25", "192.168.1.200", true }, { "192.168.1.128/25", "192.168.1.127", false },
        { "0.0.0.0/0", "203.0.113.9", true }, { "127.0.0.1", "127.0.0.1", true },
        { "127.0.0.1", "127.0.0.2", false }, { "::1/128", "::1", true }, { "::1", "::2", false },
        { "2001:db8::/32", "2001:db8:ffff::1", true }, { "2001:db8::/33", "2001:db8:ffff::1", false },
        { "2001:db8:0:0:0:0:0:1/128", "2001:db8::1", true }, { "::/0", "fe80::1", true },
        { "127.0.0.0/8", "::ffff:127.9.0.1", true }, { "::/0", "10.0.0.1", false },
        { "10.0.0.0/8", "::a00:1", false }, { "fe80::/10", "febf::1", true }, { "fe80::/10", "fec0::1", false },
    }
    for _, case in ipairs(cases) do
        eq(holds(case[1], case[2]), case[3], case[1] .. " holds " .. case[2])
    end
    for _, bad in ipairs { "1.2.3.256", "1.2.3", "1.2.3.4/33", "::1/129", "1::2::3", "1:2:3:4:5:6:7:8:9",
        "12345::", "x", "", "10.0.0.0/", "::1/-1" } do
        eq(cidr.parse(bad), nil, bad)
    end
    eq(cidr.address("10.0.0.0/8"), nil, "an address has no prefix")
    eq(cidr.parse(42), nil)
    eq(#cidr.address("1:2:3:4:5:6:1.2.3.4"), 16, "a dotted tail is two groups")
end)

test("gateway switches: bad options are nil, err naming the option and the value", function()
    local function new(switches)
        local conf = { name = "api", limit = 5, window_ms = 1000, store = "local" }
        for k, v in pairs(switches) do
            conf[k] = v
        end
        return layer.new(conf)
    end
    local cases = {
        { { mode = "shadow" }, 'mode must be "enforce" or "dry_run", got "shadow"' },
        { { headers = "github" }, 'headers must be "draft", "x-ratelimit" or "none", got "github"' },
        { { body_json = "yes" }, 'body_json must be a boolean, got "yes"' },
        { { exempt = "127.0.0.1" }, 'exempt must be a table { cidrs = {...}, keys = {...} }, got "127.0.0.1"' },
        { { exempt = { cidrs = { "::1/128", "10.0.0.0/33" } } },
            'exempt.cidrs[2] must be an IPv4 or IPv6 CIDR ("10.0.0.0/8", "::1/128"), got "10.0.0.0/33"' },
        { { exempt = { cidrs = "10.0.0.0/8" } }, 'exempt.cidrs must be a list of CIDRs, got "10.0.0.0/8"' },
        { { exempt = { keys = { "a", true } } }, "exempt.keys[2] must be a string or a number, got true" },
        { { exempt = { cidrs = {}, address = "x-forwarded-for" } },
            'exempt.address must be a function returning the client\'s address, got "x-forwarded-for"' },
        { { delay = 1000 }, "delay must be a table { max_ms = N, max_waiting = M }, got 1000" },
        { { delay = {} }, "delay.max_ms must be a positive integer, got nil" },
        { { delay = { max_ms = 100, max_waiting = 0 } },
            "delay.max_waiting must be a positive integer at most 65536, got 0" },
        { { delay = { max_ms = 100, max_waiting = 65537 } },
            "delay.max_waiting must be a positive integer at most 65536, got 65537" },
        { { delay = { max_ms = 100 }, mode = "dry_run" },
            'delay must be unset with mode = "dry_run" (a dry run refuses nothing), got ' },
        { { refund_statuses = 503 }, "refund_statuses must be a list of HTTP statuses or a function(status), got 503" },
        { { refund_statuses = { 503, 700 } }, "refund_statuses[2] must be an HTTP status (100 to 599), got 700" },
    }
    for _, case in ipairs(cases) do
        local sw, err = new(case[1])
        eq(sw, nil, case[2])
        eq(err:sub(1, #case[2]), case[2])
    end
    local sw = assert(layer.new { name = "switched", limit = 5, window_ms = 1000, mode = "dry_run", headers = "none", body_json = true, refund_statuses = { 503 },
        exempt = { cidrs = { "10.0.0.0/8" }, keys = { "partner" } } })
    eq(sw:enforce("partner"), true, "an exempt key needs no nginx")
    eq(sw:stats().exempt, 1)
    eq(sw:stats().allowed, 0)
    eq(raised(sw.enforce, "partner"),
        'sw:enforce: self must be a resty.slidewin limiter (call sw:enforce(...) with \':\'), got "partner"')
    -- Bad arguments name the call the user made, not the switches' sw:decide.
    eq(raised(sw.enforce, sw, nil), "sw:enforce: key must be a string or a finite number, got nil")
    eq(raised(sw.enforce, sw, "k", -1), "sw:enforce: cost must be a non-negative integer, got -1")
    eq(raised(sw.enforce, sw, "k", 1, 5),
        "sw:enforce: opts must be a table ({ limit = N }, { limits = {...} } or { tier = name }), got 5")
    local delayed = assert(layer.new { name = "delayed", limit = 5, window_ms = 1000, store = "local",
        delay = { max_ms = 100 } })
    assert(raised(delayed.enforce, delayed, {}):find("^sw:enforce: key must be a string or a finite number, got table"))
    assert(layer.new { name = "plain", limit = 5, window_ms = 1000, store = "local" }.enforce == layer.enforce,
        "a config without switches keeps the layer's enforce")
end)

test("switch.waiting: at most max places taken at once, each given back", function()
    local waiting = require "resty.slidewin.switch.waiting"
    local places = assert(waiting.new("places", 2, 1000))
    local a, b = places:take(), places:take()
    assert(a and b, "two places")
    eq(places:take(), nil, "a third place")
    places:give(a)
    assert(places:take(), "a place given back is taken again")
    eq(places:take(), nil, "still two at most")
    -- A place never given back (its request dropped while it waited) is freed after its hold.
    local lease = assert(waiting.new("places-lease", 1, 30))
    assert(lease:take(), "the one place")
    eq(lease:take(), nil, "taken")
    local until_ms = slidewin.now_ms() + 40
    repeat until slidewin.now_ms() >= until_ms
    assert(lease:take(), "freed once held 30 ms")
    local none, err = waiting.new("places-bad", 2, 0)
    eq(none, nil)
    assert(err:find("^delay: slidewin.concurrency: max_hold_ms must be a positive integer, got 0"), err)
    -- After the fork, a region would be one worker's: refused, not silently per worker.
    ngx.get_phase = function() return "content" end
    none, err = layer.new { name = "late", limit = 5, window_ms = 1000, store = "local", delay = { max_ms = 100 } }
    ngx.get_phase = nil
    eq(none, nil)
    eq(err, "delay must be configured in init_by_lua* (its max_waiting places are shared by every worker), "
        .. "not in content")
end)

test("guard: a token that cannot be read or a bad option is an error naming it", function()
    local guard = require "resty.slidewin.guard"
    local function file_with(text)
        local path = os.tmpname()
        local f = assert(io.open(path, "wb"))
        f:write(text)
        f:close()
        return path
    end
    local missing = os.tmpname()
    os.remove(missing)
    local blank = file_with(" \n")
    local cases = {
        { { token_file = missing }, string.format('token_file must be a readable file, got "%s": %s: '
            .. "No such file or directory", missing, missing) },
        { { token_file = blank }, string.format('token_file must be a non-empty token, got "%s": it holds no token', blank) },
        { { token_env = "SLIDEWIN_UNIT_UNSET_VARIABLE" }, 'token_env must be a set environment variable '
            .. '(declare it with "env NAME;" in nginx.conf), got "SLIDEWIN_UNIT_UNSET_VARIABLE"' },
        { { token_file = blank, token_env = "X" }, 'token_env must be nil when token_file is given (one token source), got "X"' },
        { { tokenfile = "/etc/token" }, 'an option\'s name must be token_file, token_env or allowed_origins, got "tokenfile"' },
        { { allowed_origins = "https://a.example" }, 'allowed_origins must be a non-empty list of origins like '
            .. '"https://ops.example.com", got "https://a.example"' },
        { { allowed_origins = { "https://a.example/" } }, 'allowed_origins[1] must be an origin like '
            .. '"https://ops.example.com" (scheme://host[:port]), got "https://a.example/"' },
    }
    for _, case in ipairs(cases) do
        eq(raised(guard.new, case[1]), "resty.slidewin.guard: " .. case[2])
    end
    os.remove(blank)
    local token = file_with("s3cret-token\n")
    eq(guard.new{ token_file = token }.token, "s3cret-token", "the file's token without its newline")
    os.remove(token)
    eq(guard.new{ allowed_origins = { "HTTPS://Ops.Example.com:443", "http://a.example:8080" } }.origins["https://ops.example.com"],
        true, "an origin as the browser writes it")
    eq(guard.is_guard(guard.new()), true)
    eq(guard.is_guard({}), false)
end)

test("guard: the token comparison looks at every byte", function()
    local same = require("resty.slidewin.guard").same_secret
    eq(same("abcdef", "abcdef"), true)
    eq(same("abcdeg", "abcdef"), false)
    eq(same("abcde", "abcdef"), false)
    eq(same("abcdefg", "abcdef"), false)
    eq(same("", "abcdef"), false)
end)

test("json: names with quotes, backslashes and control bytes stay valid JSON", function()
    local json = require "resty.slidewin.json"
    eq(json.quote('a"b\\c\nd\1'), [["a\u0022b\u005cc\u000ad\u0001"]])
    eq(json.quote("caf\195\169"), '"caf\195\169"', "UTF-8 as it is")
    eq(json.quote("x\255"), [["x\u00ff"]], "not UTF-8: each high byte as its Latin-1 code point")
    eq(json.quote("\237\160\128"), [["\u00ed\u00a0\u0080"]], "a surrogate is not UTF-8")
    eq(json.encode(json.object { "name", 'a"b', "n", 5, "ratio", 0.25, "none", json.null, "on", true,
        "list", json.array { 1, "x" }, "empty", json.object {}, "raw", json.raw("[1]") }),
        [[{"name":"a\u0022b","n":5,"ratio":0.25,"none":null,"on":true,"list":[1,"x"],"empty":{},"raw":[1]}]])
    eq(json.encode(0 / 0) .. json.encode(math.huge), "nullnull", "no NaN or Infinity in JSON")
    eq(json.encode(2 ^ 53), "9007199254740992")
    eq(raised(json.encode, { 1 }), "json: cannot write a table not made by json.object or json.array")
    eq(raised(json.encode, json.object { "a" }), "json: cannot write a nil")
end)

test("prometheus: HELP and TYPE once per family, label values escaped", function()
    local prometheus = require "resty.slidewin.prometheus"
    local A = prometheus.family("t_a_total", "counter", "A's help\\with\nlines.")
    local B = prometheus.family("t_b", "histogram", "B.")
    local out = prometheus.new()
    out:sample(A, { "limiter", 'a"b\\c\nd' }, 1)
    out:sample(B, { "limiter", "x", "le", "+Inf" }, 2, "_bucket")
    out:sample(A, { "limiter", "x\255" }, 2.5)
    out:sample(B, { "limiter", "x" }, 0.1, "_sum", "%.3f")
    out:sample(A, {}, 0 / 0)
    eq(out:text(), "# HELP t_a_total A's help\\\\with\\nlines.\n# TYPE t_a_total counter\n"
        .. 't_a_total{limiter="a\\"b\\\\c\\nd"} 1\n'
        .. 't_a_total{limiter="x\195\191"} 2.5\n'
        .. "t_a_total NaN\n"
        .. "# HELP t_b B.\n# TYPE t_b histogram\n"
        .. 't_b_bucket{limiter="x",le="+Inf"} 2\n'
        .. 't_b_sum{limiter="x"} 0.100\n')
    eq(prometheus.new():text(), "")
    eq(raised(prometheus.family, "t-x", "gauge", "h"), "prometheus.family: name must be a metric name, got t-x")
    eq(raised(prometheus.family, "t_x", "meter", "h"),
        "prometheus.family: type must be a Prometheus metric type, got meter")
end)

test("registry: one table of named objects per kind, a name made again replaced in place", function()
    local registry = require "resty.slidewin.registry"
    local things = registry.kind("unit thing")
    eq(registry.kind("unit thing"), things, "the same table for every caller")
    things:add { name = "a", v = 1 }
    things:add { name = 'b"\n', v = 2 }
    things:add { name = "a", v = 3 }
    local list = things:each()
    eq(#list, 2)
    eq(list[1].v, 3, "replaced in place")
    eq(list[2].name, 'b"\n')
    eq(things:get("a").v, 3)
    local none, err = things:get("c")
    eq(none, nil)
    eq(err, "no unit thing called c")
    list[1].write_metrics = function(self, out)
        out:sample(require("resty.slidewin.prometheus").family("t_v", "gauge", "V."), { "thing", self.name }, self.v)
    end
    list[2].write_metrics = list[1].write_metrics
    eq(registry.metrics_of("unit thing"), '# HELP t_v V.\n# TYPE t_v gauge\nt_v{thing="a"} 3\nt_v{thing="b\\"\\n"} 2\n')
    list[1].json_stats = function(self) return require("resty.slidewin.json").object { "v", self.v } end
    list[2].json_stats = list[1].json_stats
    eq(require("resty.slidewin.json").encode(registry.stats_of("unit thing")), [[{"a":{"v":3},"b\u0022\u000a":{"v":2}}]])
    eq(registry.stats_of("no such kind"), nil)
end)

test("phases: one log and one init_worker serve every kind's hook, once per worker", function()
    local phases = require "resty.slidewin.phases"
    local ran = {}
    phases.on_log("concurrency", function() ran[#ran + 1] = "concurrency" end)
    -- A limiter's refund_statuses put the refund hook in; another of that name changes nothing.
    assert(require("resty.slidewin.switch.refund").configure({ 500 }, {}, { add = function() return true end }))
    phases.on_log("refund", function() ran[#ran + 1] = "refund again" end)
    phases.on_log("adaptive", function() ran[#ran + 1] = "adaptive" end)
    ngx.ctx = { slidewin_refunds = {} }
    ngx.status = 200
    phases.log()
    eq(table.concat(ran, " "), "adaptive concurrency", "in order, each once")
    eq(ngx.ctx.slidewin_refunds, nil, "the refund hook took the request's admissions")
    ngx.ctx, ngx.status = nil, nil
    eq(raised(phases.on_log, "other", print), "phases.on_log: name must be one of refund, adaptive, concurrency, got other")
    local started = 0
    phases.on_init_worker("timers", function() started = started + 1 return true end)
    eq(phases.init_worker(), true)
    eq(phases.init_worker(), true)
    eq(started, 1, "a second init_worker starts nothing more")
    local layer = require "resty.slidewin"
    eq(layer.log, phases.log)
    eq(layer.init_worker, phases.init_worker)
end)

test("journal: entries per key merged into the newest past the bound, keys bounded, none dropped", function()
    local journal = require("resty.slidewin.journal").new(2)
    for i = 1, 40 do
        journal:add("a", 1000 + i, 1)
    end
    journal:add(7, 5000, 3) -- a number key is its own key
    local a = journal.keys.a
    eq(#a, 64, "32 entries")
    eq(a[63], 1040, "the newest stamped at the latest time")
    eq(a[64], 9, "and holding the 9 past the bound")
    eq(journal:takes("a"), true)
    eq(journal:takes("b"), false, "a third key")
    local batch = journal:take()
    eq(journal.count, 0)
    eq(journal:takes("b"), false, "the keys of a replay in flight count")
    eq(journal:takes("a"), true, "and take more")
    journal:add("a", 6000, 2)
    journal:recorded("a")
    eq(journal:takes("b"), false, "a and 7 (put back below)")
    local seven = batch[7]
    journal:put_back(7, seven)
    eq(batch[7], nil, "a replayed key leaves the batch")
    eq(journal.count, 2)
    eq(table.concat(journal.keys[7], " "), "5000 3")
    eq(table.concat(journal.keys.a, " "), "6000 2")
    local again = journal:take()
    journal:recorded("a")
    journal:recorded(7)
    eq(again.a, nil)
    eq(journal:take(), nil, "nothing left")
    eq(journal:takes("b"), true)
end)

harness.done()
