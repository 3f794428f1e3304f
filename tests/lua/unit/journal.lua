-- resty.slidewin.journal: what a fallback journals per key, bounded, for its replay.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq = harness.test, harness.eq

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
