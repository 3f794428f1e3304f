-- Store shm (the default): its size as bytes or nginx units, and errors naming it.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq = harness.test, harness.eq

local layer = require("unit.fake_nginx").layer()

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

harness.done()
