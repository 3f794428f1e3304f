-- resty.slidewin.json: the one JSON writer of the operator's pages (/stats.json, /slidewin/top,
-- the admin locations), so that every name and key is escaped the same way. No cjson: it is
-- not on every nginx, and these pages need only ordered objects of numbers and strings.
--
--   json.encode(json.object{ "name", "api", "limit", 5, "keys", json.null })
--     -> {"name":"api","limit":5,"keys":null}
--   json.object{ k1, v1, k2, v2, ... }   members in that order (a value nil: write json.null)
--   json.array{ v1, v2, ... }            elements in order
--   json.raw(text)                       text that is JSON already, written as it is
--   json.quote(s)                        a JSON string for any bytes
--
-- Strings (RFC 8259): quote, backslash and control bytes (below 0x20, and DEL) as \u00XX. A
-- string that is not UTF-8 is read as Latin-1: each byte of 128 and above as \u00XX too, so
-- that any bytes give valid JSON and none is lost. Numbers: integers as integers, others to 17
-- significant digits; NaN and the infinities, which JSON cannot write, as null.

local byte = string.byte
local concat = table.concat
local format = string.format
local gsub = string.gsub
local huge = math.huge
local getmetatable, setmetatable, type, tostring = getmetatable, setmetatable, type, tostring

local _M = {}

local OBJECT = { __name = "json object" }
local ARRAY = { __name = "json array" }
local RAW = { __name = "json raw" }

_M.null = setmetatable({ "null" }, RAW)

-- Whether s is UTF-8 (no overlong forms, surrogates or code points above U+10FFFF).
local function is_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local c = byte(s, i)
        local len, low, high = 1, 0x80, 0xBF
        if c >= 0xC2 and c <= 0xDF then
            len = 2
        elseif c >= 0xE0 and c <= 0xEF then
            len = 3
            low = c == 0xE0 and 0xA0 or low
            high = c == 0xED and 0x9F or high
        elseif c >= 0xF0 and c <= 0xF4 then
            len = 4
            low = c == 0xF0 and 0x90 or low
            high = c == 0xF4 and 0x8F or high
        elseif c >= 0x80 then
            return false
        end
        for j = i + 1, i + len - 1 do
            local cc = byte(s, j)
            if not cc or cc < (j == i + 1 and low or 0x80) or cc > (j == i + 1 and high or 0xBF) then
                return false
            end
        end
        i = i + len
    end
    return true
end
_M.is_utf8 = is_utf8

local function escape(c)
    return format("\\u%04x", byte(c))
end

function _M.quote(s)
    local special = is_utf8(s) and '[%c"\\]' or '[%c"\\\128-\255]'
    return '"' .. gsub(s, special, escape) .. '"'
end
local quote = _M.quote

function _M.object(members)
    return setmetatable(members, OBJECT)
end

function _M.array(elements)
    return setmetatable(elements, ARRAY)
end

function _M.raw(text)
    return setmetatable({ text }, RAW)
end

local function number(v)
    if v ~= v or v == huge or v == -huge then
        return "null"
    end
    if v % 1 == 0 and v > -2 ^ 53 and v < 2 ^ 53 then
        return format("%d", v)
    end
    return format("%.17g", v)
end

local write

-- Appends the text of `v` to `out`.
function write(out, v)
    local t = type(v)
    if t == "string" then
        out[#out + 1] = quote(v)
    elseif t == "number" then
        out[#out + 1] = number(v)
    elseif t == "boolean" then
        out[#out + 1] = tostring(v)
    elseif t == "table" and getmetatable(v) == RAW then
        out[#out + 1] = v[1]
    elseif t == "table" and getmetatable(v) == OBJECT then
        out[#out + 1] = "{"
        for i = 1, #v, 2 do
            out[#out + 1] = i > 1 and "," .. quote(v[i]) .. ":" or quote(v[i]) .. ":"
            write(out, v[i + 1])
        end
        out[#out + 1] = "}"
    elseif t == "table" and getmetatable(v) == ARRAY then
        out[#out + 1] = "["
        for i = 1, #v do
            if i > 1 then
                out[#out + 1] = ","
            end
            write(out, v[i])
        end
        out[#out + 1] = "]"
    else
        error("json: cannot write a " .. (t == "table" and "table not made by json.object or json.array" or t), 0)
    end
end

function _M.encode(v)
    local out = {}
    write(out, v)
    return concat(out)
end

return _M
