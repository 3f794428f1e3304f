-- The slidewin module's stream functions and aggregates: values, arguments named with their
-- values, huge finite samples, the charting conventions and rolling quantiles.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"

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

harness.done()
