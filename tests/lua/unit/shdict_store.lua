-- Store shdict on a fake dict and clock: the core's sliding counter, bad keys, huge costs
-- and long keys (the dict: tests/lua/fake_ngx.lua).
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local fake_now = 0
local layer = require("unit.fake_nginx").layer(function() return fake_now end)

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

harness.done()
