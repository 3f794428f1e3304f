-- resty.slidewin.switch.body_json (option `body_json = true`): refusals answered with a JSON
-- body and Content-Type application/json instead of conf.body as text/plain:
--   {"error":"rate_limited","limiter":"api","status":429,"retry_after_s":3}
-- (retry_after_s is null when the cost can never fit; a store failure under
-- on_store_error = "deny" gives "error":"store_error").

local invalid = require("resty.slidewin.config").invalid
local quote = require("resty.slidewin.json").quote
local seconds = require("resty.slidewin.policy").seconds

local format = string.format
local ngx = ngx

local _M = {}

-- conf.body as text, as resty.slidewin's own enforce answers.
local function plain(sw)
    return sw:refuse()
end

-- refuse(sw, retry_after_ms, store_failed): answers the refusal and ends the request.
local function json(sw, retry_after_ms, store_failed)
    local status = sw.conf.status
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.print(format('{"error":"%s","limiter":%s,"status":%d,"retry_after_s":%s}\n',
        store_failed and "store_error" or "rate_limited", quote(sw.name), status,
        retry_after_ms and seconds(retry_after_ms) or "null"))
    return ngx.exit(status)
end

-- The refusal answer for body_json = `on` (nil: conf.body as text), or nil, err.
function _M.configure(on)
    if on ~= nil and type(on) ~= "boolean" then
        return invalid("body_json", "a boolean", on)
    end
    return on and json or plain
end

return _M
