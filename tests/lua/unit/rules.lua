-- A zone's rules: what a zone's limiter says of the rule it decided with, and follow()
-- after a put.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"

test("a zone's limiter describes the rule of its last decision, and follows one put again", function()
    local zone = slidewin.zone { name = "unit-rules", size = 1024 * 1024, max_rules = 4 }
    local held = zone:put("r", { windows = { { limit = 10, window_ms = 1000, max_limit = 20, name = "fast" } },
        size = 16384 })
    local first = held:rule()
    eq(#first.windows, 1)
    eq(first.windows[1].name, "fast")
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
    -- Named by the core: window 1 keeps its configured name (same length), window 2 the default.
    eq(now.windows[1].name .. " " .. now.windows[2].name, "fast r-1m")
    eq(zone:get("r"):rule().windows[1].name, "r", "another worker's limiter: the default names")
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

harness.done()
