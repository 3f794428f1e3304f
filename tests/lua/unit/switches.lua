-- The gateway switches: switch.cidr's parsing and matching, every bad switch option, and
-- switch.waiting's places (delay).
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

local slidewin = require "slidewin"
local layer = require("unit.fake_nginx").layer()

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

harness.done()
