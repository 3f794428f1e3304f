-- resty.slidewin.json: quoting and encoding that stay valid JSON.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

test("json: names with quotes, backslashes and control bytes stay valid JSON", function()
    local json = require "resty.slidewin.json"
    eq(json.quote('a"b\\c\nd\1'), [["a\u0022b\u005cc\u000ad\u0001"]])
    eq(json.quote("caf\195\169"), '"caf\195\169"', "UTF-8 as it is")
    eq(json.quote("x\255"), [["x\u00ff"]], "not UTF-8: each high byte as its Latin-1 code point")
    eq(json.quote("\237\160\128"), [["\u00ed\u00a0\u0080"]], "a surrogate is not UTF-8")
    eq(json.encode(json.object { "name", 'a"b', "n", 5, "ratio", 0.25, "none", json.null, "on", true,
        "list", json.array { 1, "x" }, "empty", json.object {}, "raw", json.raw("[1]") }),
        [[{"name":"a\u0022b","n":5,"ratio":0.25,"none":null,"on":true,"list":[1,"x"],"empty":{},"raw":[1]}]])
    eq(json.encode(0 / 0) .. json.encode(math.huge), "nullnull", "no NaN or Infinity in JSON")
    eq(json.encode(2 ^ 53), "9007199254740992")
    eq(raised(json.encode, { 1 }), "json: cannot write a table not made by json.object or json.array")
    eq(raised(json.encode, json.object { "a" }), "json: cannot write a nil")
end)

harness.done()
