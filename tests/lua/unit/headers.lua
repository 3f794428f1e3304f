-- The rate-limit headers: the FFI answer (resty.slidewin.answer) against lim:decide with the
-- core's header values in every style, and limits up to 2^53 written as exact digits.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"
local layer = require("unit.fake_nginx").layer()

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

test("a limit up to 2^53 is written in headers as exact digits", function()
    for limit, q in pairs { [1e14] = "100000000000000", [123456789012345] = "123456789012345",
        [2 ^ 53 - 1] = "9007199254740991", [30] = "30" } do
        local sw = assert(layer.new { name = "api", limit = limit, window_ms = 5000 })
        eq(sw.policy_header, '"api";q=' .. q .. ";w=5")
    end
end)

test("a named limiter's answer is rendered with the policy of its decision's version, in one call", function()
    local ffi = require "ffi"
    local answer = require "resty.slidewin.answer"
    local lim = slidewin.limiter { name = "named-ffi", windows = {
        { limit = 5, window_ms = 1000, max_limit = 50, name = "fast" },
        { limit = 100, window_ms = 3600000, max_limit = 500 } } }
    local headers = slidewin.headers("draft")
    local block, headers_block = answer.handles(lim, headers)
    local function rate(out)
        return ffi.string(out.text + out.start[0], out.len[0])
    end
    local out = answer.decide(block, headers_block, "k", 1, true)
    eq(out.rendered, 1, "no policy set by the caller")
    eq(rate(out), '"fast";r=4;t=1')
    local version = out.version
    lim:set_limit(2, 1)
    out = answer.decide(block, headers_block, "k", 1, true)
    assert(out.version ~= version, "a live limit moved the version")
    eq(out.rendered, 1, "rendered at once with the new limits")
    eq(rate(out), '"fast";r=0;t=1')
    -- What the layer holds of that version: the value the decision took, made once.
    eq(headers:held(out.version), '"fast";q=2;w=1, "named-ffi-1h";q=100;w=3600')
    eq(headers:held(version), nil, "the version before is no longer held")
    eq(headers:held(-1), nil, "nor the version of a store elsewhere")
    local ok, err = pcall(headers.held, headers, "v")
    assert(not ok and tostring(err):find("headers:held: version must be a number, got \"v\"", 1, true), err)
    -- And the same policy when the layer makes it from the rule, names from the limiter.
    local rule = lim:rule()
    eq(headers:set(rule.version, rule.windows), '"fast";q=2;w=1, "named-ffi-1h";q=100;w=3600')
    -- An unnamed limiter's answer waits for its caller's policy.
    local unnamed = slidewin.limiter { limit = 5, window_ms = 1000 }
    local fresh = slidewin.headers("draft") -- held: the block lives as long as the object
    local unnamed_block, fresh_block = answer.handles(unnamed, fresh)
    eq(answer.decide(unnamed_block, fresh_block, "k", 1, true).rendered, 0)
end)

harness.done()
