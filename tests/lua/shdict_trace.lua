-- Drives store shdict over a trace, for tests/tests/shdict_vs_core.rs: each line of stdin is
-- "<limit> <window_ms> <op> <key> <cost> <now_ms>" (op: c commits, p peeks, u gives back), and
-- each answer is a line of stdout: "<allowed> <remaining> <retry_after_ms or nil>
-- <reset_after_ms>", or "true" for a give-back. One store per (limit, window_ms), in one dict.

local slidewin = require "slidewin"
local fake = dofile((arg[0]:match("^(.*/)") or "./") .. "fake_ngx.lua")

local now = 0
package.loaded.slidewin = setmetatable({ now_ms = function() return now end }, { __index = slidewin })
ngx = { -- luacheck: ignore (the global the layer reads)
    shared = { slidewin = fake.dict() },
    sha1_bin = fake.sha1_bin,
    encode_base64 = function(s) return s end,
}
local layer = require "resty.slidewin"

local stores = {}
local function store(limit, window_ms)
    local name = limit .. "-" .. window_ms
    if not stores[name] then
        stores[name] = assert(layer.new { name = "t" .. name, algorithm = "counter", limit = limit,
            window_ms = window_ms, store = "shdict", dict = "slidewin" }).store
    end
    return stores[name]
end

local out = {}
for line in io.lines() do
    local limit, window_ms, op, key, cost, at = line:match("^(%d+) (%d+) (%a) (%S+) (%d+) (%d+)$")
    assert(limit, "a trace line: " .. line)
    now = tonumber(at)
    local s = store(tonumber(limit), tonumber(window_ms))
    if op == "u" then
        out[#out + 1] = tostring(assert(s:refund(key, tonumber(cost))))
    else
        local allowed, remaining, retry, reset = s:decide(key, tonumber(cost), op == "c")
        out[#out + 1] = string.format("%s %d %s %d", tostring(allowed), remaining,
            retry and string.format("%d", retry) or "nil", reset)
    end
end
io.write(table.concat(out, "\n"), "\n")
