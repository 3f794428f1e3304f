-- The slidewin module's plain functions: the clock, and the core's formulas (the sliding
-- counter, headers' seconds, window limits, reload limits, status classes, rule checks),
-- through the module and through the FFI door of resty.slidewin.answer.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"

test("now_ms is integer milliseconds", function()
    local now = slidewin.now_ms()
    eq(now % 1, 0, "fraction")
    assert(math.abs(now - os.time() * 1000) < 2000, "now_ms near os.time()")
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
    -- A rule's windows, checked as slidewin.limiter checks them and completed: defaults, and
    -- each window named (its config's name, else the rule's, then the rule's with the length).
    local rule = slidewin.check_rule { name = "api", windows = { { limit = 1, window_ms = 1000 },
        { algorithm = "buckets", limit = 9, window_ms = 3600000, bucket_ms = 60000 },
        { limit = 2, window_ms = 1500, max_limit = 4, name = "burst" }, { limit = 3, window_ms = 1500 } } }
    local joined = table.concat
    eq(joined({ rule[1].name, rule[2].name, rule[3].name, rule[4].name }, " "), "api api-1h burst api-1500ms")
    eq(joined({ rule[1].algorithm, rule[1].max_limit, rule[2].bucket_ms, rule[3].max_limit }, " "), "log 1 60000 4")
    local one = slidewin.check_rule { name = "one", limit = 1, window_ms = 1000 }
    eq(#one, 1)
    eq(joined({ one[1].algorithm, one[1].limit, one[1].window_ms, one[1].max_limit, one[1].name,
        tostring(one[1].bucket_ms) }, " "), "log 1 1000 1 one nil")
    eq(select(2, slidewin.check_rule { name = "api", windows = { { limit = 1, window_ms = 1000 }, { limit = 0, window_ms = 10 } } }),
        "windows[2].limit must be a positive integer, got 0")
    eq(select(2, slidewin.check_rule { name = "api", algorithm = "buckets", limit = 1, window_ms = 1000, bucket_ms = 300 }),
        "bucket_ms must be a divisor of window_ms, got 300")
    eq(select(2, slidewin.check_rule { name = "api", windows = { { limit = 5, window_ms = 10, max_limit = 4 } } }),
        "windows[1].max_limit must be at least the window's limit, got 4")
    eq(select(2, slidewin.check_rule { name = "api", windows = { { limit = 5, window_ms = 10 }, { limit = 5, window_ms = 20, name = "api" } } }),
        'windows[2].name must be unique in the rule, got "api"')
    eq(select(2, slidewin.check_rule { name = "api", windows = { { limit = 5, window_ms = 10, name = "a b" } } }),
        'windows[1].name must be a string of letters, digits, _ . -, got "a b"')
    eq(select(2, slidewin.check_rule { name = "api", windows = { { limit = 5, window_ms = 10, name = 7 } } }),
        "windows[1].name must be a string of letters, digits, _ . -, got 7")
    eq(select(2, slidewin.check_rule { limit = 5, window_ms = 10 }),
        "name must be a string of letters, digits, _ . -, got nil")
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

harness.done()
