-- resty.slidewin.switch.cidr: IPv4 and IPv6 addresses and CIDRs as byte lists, and whether a
-- CIDR holds an address. An IPv4-mapped IPv6 address (::ffff:10.1.2.3) is its IPv4 address.

local floor = math.floor
local tonumber = tonumber

local _M = {}

-- "10.1.2.3" as { 10, 1, 2, 3 }, or nil.
local function ipv4(text)
    local a, b, c, d = text:match("^(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)%.(%d%d?%d?)$")
    if not a then
        return nil
    end
    local bytes = { tonumber(a), tonumber(b), tonumber(c), tonumber(d) }
    for i = 1, 4 do
        if bytes[i] > 255 then
            return nil
        end
    end
    return bytes
end

-- The 16-bit groups of one side of "::" ("" is none), appended to `groups`; false when bad.
-- A trailing dotted IPv4 part counts as two groups.
local function groups_of(side, groups, last)
    if side == "" then
        return true
    end
    local parts = {}
    for part in (side .. ":"):gmatch("([^:]*):") do
        parts[#parts + 1] = part
    end
    for i, part in ipairs(parts) do
        local v4 = last and i == #parts and ipv4(part)
        if v4 then
            groups[#groups + 1] = v4[1] * 256 + v4[2]
            groups[#groups + 1] = v4[3] * 256 + v4[4]
        elseif part:find("^%x%x?%x?%x?$") then
            groups[#groups + 1] = tonumber(part, 16)
        else
            return false
        end
    end
    return true
end

-- "2001:db8::1" as its 16 bytes, or nil.
local function ipv6(text)
    local head, tail = text:match("^(.-)::(.*)$")
    local groups, after = {}, {}
    if head then
        if tail:find("::", 1, true) or not (groups_of(head, groups, false) and groups_of(tail, after, true)) then
            return nil
        end
        if #groups + #after > 7 then
            return nil
        end
        for _ = 1, 8 - #groups - #after do
            groups[#groups + 1] = 0
        end
        for _, g in ipairs(after) do
            groups[#groups + 1] = g
        end
    elseif not groups_of(text, groups, true) or #groups ~= 8 then
        return nil
    end
    local bytes = {}
    for i, g in ipairs(groups) do
        bytes[2 * i - 1], bytes[2 * i] = floor(g / 256), g % 256
    end
    return bytes
end

-- An address as 4 bytes (IPv4, and IPv4-mapped IPv6) or 16 bytes (IPv6), or nil.
function _M.address(text)
    if type(text) ~= "string" then
        return nil
    end
    local bytes = ipv4(text)
    if bytes then
        return bytes
    end
    bytes = ipv6(text)
    if bytes and bytes[11] == 255 and bytes[12] == 255 then
        for i = 1, 10 do
            if bytes[i] ~= 0 then
                return bytes
            end
        end
        return { bytes[13], bytes[14], bytes[15], bytes[16] }
    end
    return bytes
end

-- "10.0.0.0/8", "::1/128" or a bare address as { bytes, bits }, or nil.
function _M.parse(text)
    if type(text) ~= "string" then
        return nil
    end
    local addr, bits = text:match("^([^/]+)/(%d%d?%d?)$")
    addr = addr or text
    local bytes = ipv4(addr) or ipv6(addr)
    if not bytes then
        return nil
    end
    bits = bits and tonumber(bits) or #bytes * 8
    if bits > #bytes * 8 then
        return nil
    end
    return { bytes = bytes, bits = bits }
end

-- Whether CIDR `net` (from parse) holds address `bytes` (from address).
function _M.contains(net, bytes)
    local want = net.bytes
    if #want ~= #bytes then
        return false
    end
    local whole = floor(net.bits / 8)
    for i = 1, whole do
        if want[i] ~= bytes[i] then
            return false
        end
    end
    local rest = net.bits - whole * 8
    if rest == 0 then
        return true
    end
    local unit = 2 ^ (8 - rest)
    return floor(want[whole + 1] / unit) == floor(bytes[whole + 1] / unit)
end

return _M
