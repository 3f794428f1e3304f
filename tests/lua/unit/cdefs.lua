-- The FFI declarations: what LuaJIT made of slidewin.cdefs() (declared by
-- resty.slidewin.answer) against the Rust layout of each struct (slidewin.ffi_layout(): size_of
-- and offset_of!), and every function the module exports declared and found.
-- Run by tests/tests/lua_unit.rs (the harness: tests/lua/unit/harness.lua).

local harness = require "unit.harness"
local test, eq = harness.test, harness.eq

local ffi = require "ffi"
local slidewin = require "slidewin"
local answer = require "resty.slidewin.answer"

-- The bytes LuaJIT writes for field `name` of `obj` (a struct of `size` bytes at `offset`): an
-- array's size, else the bytes a write of 0 clears in a struct filled with 0xAA.
local function field_size(obj, size, name, offset)
    local value = obj[name]
    if type(value) == "cdata" then
        return ffi.sizeof(value)
    end
    ffi.fill(obj, size, 0xAA)
    obj[name] = 0
    local bytes = ffi.cast("const unsigned char *", obj)
    local n = 0
    while offset + n < size and bytes[offset + n] == 0 do
        n = n + 1
    end
    return n
end

test("each struct's size, field offsets and field sizes in LuaJIT are Rust's", function()
    local layouts = slidewin.ffi_layout()
    eq(#layouts, 2, "structs")
    for _, layout in ipairs(layouts) do
        local ct = ffi.typeof(layout.name)
        local size = ffi.sizeof(ct)
        local obj = ffi.new(ct)
        for _, field in ipairs(layout.fields) do
            local what = layout.name .. "." .. field.name
            eq(ffi.offsetof(ct, field.name), field.offset, what .. " offset")
            eq(field_size(obj, size, field.name, field.offset), field.size, what .. " size")
        end
        eq(size, layout.size, layout.name .. " size")
    end
end)

test("the structs are the ones the Lua side uses", function()
    local names = {}
    for _, layout in ipairs(slidewin.ffi_layout()) do
        names[#names + 1] = layout.name
    end
    eq(table.concat(names, " "), "slidewin_answer_t slidewin_lease_call_t")
    eq(ffi.sizeof(answer.out), ffi.sizeof("slidewin_answer_t"), "answer.out")
end)

-- The functions slidewin.cdefs() declares.
local function declared()
    local names = {}
    for name in slidewin.cdefs():gmatch("\n[%w_ ]-[%w_]+ %*?(slidewin_[%w_]+)%(") do
        names[#names + 1] = name
    end
    table.sort(names)
    return names
end

test("every slidewin_ function the module exports is declared, and found through the FFI", function()
    local path = assert(package.searchpath("slidewin", package.cpath))
    local nm = assert(io.popen("nm -D --defined-only '" .. path .. "' 2>&1"))
    local exported = {}
    for name in nm:read("*a"):gmatch(" T (slidewin_[%w_]+)") do
        exported[#exported + 1] = name
    end
    nm:close()
    table.sort(exported)
    eq(#exported > 0, true, "slidewin_ symbols in " .. path .. " (nm, from binutils)")
    eq(table.concat(declared(), " "), table.concat(exported, " "), "declared functions")
    for _, name in ipairs(exported) do
        eq(type(answer.lib[name]), "cdata", name)
    end
end)

test("the lease store loads on the declarations resty.slidewin.answer made", function()
    require "resty.slidewin.store.redis.lease"
    eq(ffi.sizeof("slidewin_lease_call_t"), slidewin.ffi_layout()[2].size)
end)

harness.done()
