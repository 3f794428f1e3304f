-- resty.slidewin.registry: one table of named objects per kind, and their metrics and stats.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq = harness.test, harness.eq

require("unit.fake_nginx").layer() -- the registry loads resty.slidewin

test("registry: one table of named objects per kind, a name made again replaced in place", function()
    local registry = require "resty.slidewin.registry"
    local things = registry.kind("unit thing")
    eq(registry.kind("unit thing"), things, "the same table for every caller")
    things:add { name = "a", v = 1 }
    things:add { name = 'b"\n', v = 2 }
    things:add { name = "a", v = 3 }
    local list = things:each()
    eq(#list, 2)
    eq(list[1].v, 3, "replaced in place")
    eq(list[2].name, 'b"\n')
    eq(things:get("a").v, 3)
    local none, err = things:get("c")
    eq(none, nil)
    eq(err, "no unit thing called c")
    list[1].write_metrics = function(self, out)
        out:sample(require("resty.slidewin.prometheus").family("t_v", "gauge", "V."), { "thing", self.name }, self.v)
    end
    list[2].write_metrics = list[1].write_metrics
    eq(registry.metrics_of("unit thing"), '# HELP t_v V.\n# TYPE t_v gauge\nt_v{thing="a"} 3\nt_v{thing="b\\"\\n"} 2\n')
    list[1].json_stats = function(self) return require("resty.slidewin.json").object { "v", self.v } end
    list[2].json_stats = list[1].json_stats
    eq(require("resty.slidewin.json").encode(registry.stats_of("unit thing")), [[{"a":{"v":3},"b\u0022\u000a":{"v":2}}]])
    eq(registry.stats_of("no such kind"), nil)
end)

harness.done()
