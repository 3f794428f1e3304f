-- Stand-ins for what resty.slidewin's stores read of nginx, for the LuaJIT-level tests
-- (tests/lua/unit/fake_nginx.lua, tests/lua/shdict_trace.lua): require or dofile it, it returns
-- { dict, sha1_bin }.

local _M = {}

-- ngx.shared.DICT's get/set/incr over a table; `ttls` records the init_ttl of created keys.
function _M.dict()
    local values, ttls = {}, {}
    return {
        ttls = ttls,
        values = values,
        get = function(_, k) return values[k] end,
        set = function(_, k, v) values[k] = v end,
        add = function(_, k, v)
            if values[k] == nil then values[k] = v end
        end,
        incr = function(_, k, n, init, init_ttl)
            local v = values[k]
            if v == nil then
                if init == nil then
                    return nil, "not found"
                end
                v, ttls[k] = init, init_ttl
            end
            values[k] = v + n
            return values[k]
        end,
    }
end

-- sha1_bin: a stand-in digest of 20 bytes, enough to tell keys apart in these tests.
function _M.sha1_bin(s)
    local h1, h2 = 5381, 7
    for i = 1, #s do
        local b = s:byte(i)
        h1, h2 = (h1 * 33 + b) % 4294967291, (h2 * 31 + b) % 4294967279
    end
    return string.format("%010d%010d", h1, h2)
end

return _M
