-- The harness every file of tests/lua/unit/ requires (require "unit.harness", with tests/lua/
-- on LUA_PATH): test(name, fn) runs one test, eq and raised check, and done() prints the
-- summary tests/tests/lua_unit.rs reads ("N passed, 0 failed") and exits 1 if any failed.

local _M = {}

local passed, failed = 0, 0

function _M.test(name, fn)
    local ok, err = pcall(fn)
    if ok then
        passed = passed + 1
    else
        failed = failed + 1
        print("FAIL " .. name .. ": " .. tostring(err))
    end
end

function _M.eq(got, want, what)
    if got ~= want then
        error((what or "value") .. ": want " .. tostring(want) .. ", got " .. tostring(got), 2)
    end
end

-- The first line of the error `fn(...)` raises (the module appends a traceback).
function _M.raised(fn, ...)
    local ok, err = pcall(fn, ...)
    assert(not ok, "no error raised")
    return (tostring(err):match("^[^\n]*"))
end

-- The summary line, then the exit status: the last call of a file.
function _M.done()
    print(string.format("%d passed, %d failed", passed, failed))
    os.exit(failed == 0 and 0 or 1)
end

return _M
