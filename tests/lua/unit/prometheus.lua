-- resty.slidewin.prometheus: HELP and TYPE once per family, label values escaped.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

test("prometheus: HELP and TYPE once per family, label values escaped", function()
    local prometheus = require "resty.slidewin.prometheus"
    local A = prometheus.family("t_a_total", "counter", "A's help\\with\nlines.")
    local B = prometheus.family("t_b", "histogram", "B.")
    local out = prometheus.new()
    out:sample(A, { "limiter", 'a"b\\c\nd' }, 1)
    out:sample(B, { "limiter", "x", "le", "+Inf" }, 2, "_bucket")
    out:sample(A, { "limiter", "x\255" }, 2.5)
    out:sample(B, { "limiter", "x" }, 0.1, "_sum", "%.3f")
    out:sample(A, {}, 0 / 0)
    eq(out:text(), "# HELP t_a_total A's help\\\\with\\nlines.\n# TYPE t_a_total counter\n"
        .. 't_a_total{limiter="a\\"b\\\\c\\nd"} 1\n'
        .. 't_a_total{limiter="x\195\191"} 2.5\n'
        .. "t_a_total NaN\n"
        .. "# HELP t_b B.\n# TYPE t_b histogram\n"
        .. 't_b_bucket{limiter="x",le="+Inf"} 2\n'
        .. 't_b_sum{limiter="x"} 0.100\n')
    eq(prometheus.new():text(), "")
    eq(raised(prometheus.family, "t-x", "gauge", "h"), "prometheus.family: name must be a metric name, got t-x")
    eq(raised(prometheus.family, "t_x", "meter", "h"),
        "prometheus.family: type must be a Prometheus metric type, got meter")
end)

harness.done()
