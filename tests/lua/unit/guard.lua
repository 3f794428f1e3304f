-- resty.slidewin.guard: token sources and options with errors naming them, and the token
-- comparison.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq, raised = harness.test, harness.eq, harness.raised

test("guard: a token that cannot be read or a bad option is an error naming it", function()
    local guard = require "resty.slidewin.guard"
    local function file_with(text)
        local path = os.tmpname()
        local f = assert(io.open(path, "wb"))
        f:write(text)
        f:close()
        return path
    end
    local missing = os.tmpname()
    os.remove(missing)
    local blank = file_with(" \n")
    local cases = {
        { { token_file = missing }, string.format('token_file must be a readable file, got "%s": %s: '
            .. "No such file or directory", missing, missing) },
        { { token_file = blank }, string.format('token_file must be a non-empty token, got "%s": it holds no token', blank) },
        { { token_env = "SLIDEWIN_UNIT_UNSET_VARIABLE" }, 'token_env must be a set environment variable '
            .. '(declare it with "env NAME;" in nginx.conf), got "SLIDEWIN_UNIT_UNSET_VARIABLE"' },
        { { token_file = blank, token_env = "X" }, 'token_env must be nil when token_file is given (one token source), got "X"' },
        { { tokenfile = "/etc/token" }, 'an option\'s name must be token_file, token_env or allowed_origins, got "tokenfile"' },
        { { allowed_origins = "https://a.example" }, 'allowed_origins must be a non-empty list of origins like '
            .. '"https://ops.example.com", got "https://a.example"' },
        { { allowed_origins = { "https://a.example/" } }, 'allowed_origins[1] must be an origin like '
            .. '"https://ops.example.com" (scheme://host[:port]), got "https://a.example/"' },
    }
    for _, case in ipairs(cases) do
        eq(raised(guard.new, case[1]), "resty.slidewin.guard: " .. case[2])
    end
    os.remove(blank)
    local token = file_with("s3cret-token\n")
    eq(guard.new{ token_file = token }.token, "s3cret-token", "the file's token without its newline")
    os.remove(token)
    eq(guard.new{ allowed_origins = { "HTTPS://Ops.Example.com:443", "http://a.example:8080" } }.origins["https://ops.example.com"],
        true, "an origin as the browser writes it")
    eq(guard.is_guard(guard.new()), true)
    eq(guard.is_guard({}), false)
end)

test("guard: the token comparison looks at every byte", function()
    local same = require("resty.slidewin.guard").same_secret
    eq(same("abcdef", "abcdef"), true)
    eq(same("abcdeg", "abcdef"), false)
    eq(same("abcde", "abcdef"), false)
    eq(same("abcdefg", "abcdef"), false)
    eq(same("", "abcdef"), false)
end)

harness.done()
