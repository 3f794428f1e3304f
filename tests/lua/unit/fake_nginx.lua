-- resty.slidewin without nginx, for the files of tests/lua/unit/ that load it: the global ngx
-- with the dict and sha1_bin of tests/lua/fake_ngx.lua, and the slidewin module seen through a
-- clock the caller gives.
--
--   local slidewin = require "slidewin"      -- first: the module with its own (real) clock
--   local layer = require("unit.fake_nginx").layer(function() return fake_now end)

local fake = require "fake_ngx"

local _M = {}

-- require "resty.slidewin", its stores reading ngx.shared.slidewin (a fake dict) and `now_ms`
-- (by default a clock that stays at 0). Once per process: the layer keeps the clock it loaded.
function _M.layer(now_ms)
    assert(package.loaded["resty.slidewin"] == nil, "fake_nginx.layer: resty.slidewin is already loaded")
    local slidewin = require "slidewin"
    package.loaded.slidewin = setmetatable({ now_ms = now_ms or function() return 0 end }, { __index = slidewin })
    ngx = { -- luacheck: ignore (the global the layer reads)
        shared = { slidewin = fake.dict() },
        sha1_bin = fake.sha1_bin,
        encode_base64 = function(s) return s end,
        -- For modules that take them at load (lua-resty-redis); a unit test opens no socket.
        socket = { tcp = function() error("fake_nginx: no sockets in unit tests") end },
        null = setmetatable({}, { __tostring = function() return "null" end }),
    }
    return require "resty.slidewin"
end

return _M
