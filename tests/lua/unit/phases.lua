-- resty.slidewin.phases: one log and one init_worker for every kind's hook.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

require("unit.fake_nginx").layer() -- the hooks load resty.slidewin; the test reads ngx.ctx

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
    eq(raised(phases.on_log, "other", print), "phases.on_log: name must be one of llm, refund, adaptive, concurrency, got other")
    local started = 0
    phases.on_init_worker("timers", function() started = started + 1 return true end)
    eq(phases.init_worker(), true)
    eq(phases.init_worker(), true)
    eq(started, 1, "a second init_worker starts nothing more")
    local layer = require "resty.slidewin"
    eq(layer.log, phases.log)
    eq(layer.init_worker, phases.init_worker)
end)

harness.done()
