-- resty.slidewin.store.redis.slot: the Redis Cluster hash slot of a key (CRC16-XMODEM of the
-- key, or of its hash tag: the text between the first "{" and the next "}" when not empty,
-- mod 16384), as CLUSTER KEYSLOT computes it.

local bit = require "bit"
local band, bxor, lshift, rshift = bit.band, bit.bxor, bit.lshift, bit.rshift
local byte, find, sub = string.byte, string.find, string.sub

local TABLE = {}
for i = 0, 255 do
    local crc = lshift(i, 8)
    for _ = 1, 8 do
        if band(crc, 0x8000) ~= 0 then
            crc = bxor(lshift(crc, 1), 0x1021)
        else
            crc = lshift(crc, 1)
        end
        crc = band(crc, 0xffff)
    end
    TABLE[i] = crc
end

local function crc16(s)
    local crc = 0
    for i = 1, #s do
        crc = bxor(band(lshift(crc, 8), 0xffff), TABLE[band(bxor(rshift(crc, 8), byte(s, i)), 0xff)])
    end
    return crc
end

return function(key)
    local open = find(key, "{", 1, true)
    if open then
        local close = find(key, "}", open + 1, true)
        if close and close > open + 1 then
            key = sub(key, open + 1, close - 1)
        end
    end
    return crc16(key) % 16384
end
