-- resty.slidewin.switch.body_json (option `body_json = true`): refusals answered with a JSON
-- body and Content-Type application/json instead of conf.body as text/plain:
--   {"error":"rate_limited","limiter":"api","status":429,"retry_after_s":3}
-- (retry_after_s is null when the cost can never fit; a store failure under
-- on_store_error = "deny" gives "error":"store_error").

local invalid = require("resty.slidewin.config").invalid
local quote = require("resty.slidewin.json").quote
local retry_after = require("resty.slidewin.answer").retry_after

local format = string.format
local ngx = ngx

local _M = { option = "body_json" }

-- Answers the refusal `answer` (nil: the store failed) and ends the request.
local function json(sw, answer, store_failed)
    local status = sw.conf.status
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.print(format('{"error":"%s","limiter":%s,"status":%d,"retry_after_s":%s}\n',
        store_failed and "store_error" or "rate_limited", quote(sw.name), status,
        answer and retry_after(answer) or "null"))
    return ngx.exit(status)
end

function _M.configure(on, _, hooks)
    if type(on) ~= "boolean" then
        return invalid("body_json", "a boolean", on)
    end
    return not on or hooks:add("body", json)
end

return _M
