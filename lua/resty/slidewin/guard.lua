-- resty.slidewin.guard: which HTTP requests may read or change state through an admin location
-- (resty.slidewin.admin uses it; a location of your own calls it the same way).
--
--   init_by_lua_block {            -- made once, in the master: a bad option stops nginx here
--       package.loaded.admin_guard = require("resty.slidewin.guard").new{
--           token_file = "/etc/nginx/slidewin-admin.token",  -- or token_env = "SLIDEWIN_ADMIN_TOKEN"
--           allowed_origins = { "https://ops.example.com" },   -- default: this server on loopback
--       }
--   }
--   -- in a handler, before reading:   local who = guard:allow_read()
--   --               before changing:  local who = guard:allow_change("GET, HEAD, POST")
--
-- Each refuses by answering and exiting (logged at WARN, never with the token), or returns who
-- asked ("127.0.0.1 with the bearer token") for the handler's own log line. A change must:
--   - use one of the methods listed (the location's Allow header) other than GET and HEAD,
--     which never change anything: 405 with Allow;
--   - carry the token, when there is one: `Authorization: Bearer <token>`, else 401 with
--     WWW-Authenticate (reads need it too);
--   - come from the admin's own origin: an Origin header must be one of allowed_origins
--     (default: http(s)://127.0.0.1, localhost and [::1] on this server's port, never the
--     request's Host, which a DNS-rebinding page sets to its own name); without Origin,
--     Sec-Fetch-Site must be absent, "same-origin" or "none": 403;
--   - be one a browser sends cross-site only after a CORS preflight (which this location never
--     answers): an X-Slidewin-Admin header or a JSON Content-Type, so a plain form POST is 403.

local bit = require "bit"

local bor, bxor = bit.bor, bit.bxor
local byte, concat, format = string.byte, table.concat, string.format
local ngx = ngx

local _M = {}
local mt = { __index = _M }

local OPTIONS = { token_file = true, token_env = true, allowed_origins = true }
local DEFAULT_PORTS = { http = "80", https = "443" }

local function show(v)
    return type(v) == "string" and format("%q", v) or tostring(v)
end

-- Raised while making a guard; new() raises it again at its caller.
local function fail(option, expected, value, why)
    error(option .. " must be " .. expected .. ", got " .. show(value) .. (why and ": " .. why or ""), 0)
end

-- The token of `option` (its text without surrounding blanks), or an error naming it.
local function token_of(option, value, text, why)
    if not text then
        fail(option, option == "token_file" and "a readable file" or
            'a set environment variable (declare it with "env NAME;" in nginx.conf)', value, why)
    end
    local token = text:match("^%s*(.-)%s*$")
    if token == "" then
        fail(option, "a non-empty token", value, "it holds no token")
    end
    if token:find("[%s%c]") then
        fail(option, "one token without blanks or control characters", value)
    end
    return token
end

local function read_token(opts)
    local file, env = opts.token_file, opts.token_env
    if file ~= nil and env ~= nil then
        fail("token_env", "nil when token_file is given (one token source)", env)
    end
    if file ~= nil then
        if type(file) ~= "string" then
            fail("token_file", "a path", file)
        end
        local f, err = io.open(file, "rb")
        local text = f and f:read("*a")
        if f then
            f:close()
        end
        return token_of("token_file", file, text, err)
    end
    if env ~= nil then
        if type(env) ~= "string" then
            fail("token_env", "an environment variable's name", env)
        end
        return token_of("token_env", env, os.getenv(env))
    end
end

-- Origins as the browser writes them: lower case, no default port, no trailing slash.
local function origin_set(list)
    if list == nil then
        return nil
    end
    if type(list) ~= "table" or #list == 0 then
        fail("allowed_origins", 'a non-empty list of origins like "https://ops.example.com"', list)
    end
    local set = {}
    for i, origin in ipairs(list) do
        local scheme, host, port = tostring(origin):lower():match("^(https?)://([^/:%s]+):?(%d*)$")
        if type(origin) ~= "string" or not scheme then
            fail("allowed_origins[" .. i .. "]", 'an origin like "https://ops.example.com" (scheme://host[:port])', origin)
        end
        set[scheme .. "://" .. host .. ((port == "" or port == DEFAULT_PORTS[scheme]) and "" or ":" .. port)] = true
    end
    return set
end

-- A guard from `opts` (nil: no token, loopback origins). Raises an error naming the option and
-- its value on a bad one: an admin whose token cannot be read must not start open.
local function build(opts)
    opts = opts == nil and {} or opts
    if type(opts) ~= "table" then
        fail("opts", "a table", opts)
    end
    for k in pairs(opts) do
        if not OPTIONS[k] then
            fail("an option's name", "token_file, token_env or allowed_origins", k)
        end
    end
    return setmetatable({ token = read_token(opts), origins = origin_set(opts.allowed_origins) }, mt)
end

function _M.new(opts)
    local ok, guard = pcall(build, opts)
    if not ok then
        error("resty.slidewin.guard: " .. tostring(guard), 2)
    end
    return guard
end

-- Whether `v` is a guard (made by new).
function _M.is_guard(v)
    return getmetatable(v) == mt
end

local default
-- The guard of admin locations given none: no token, loopback origins.
function _M.default()
    default = default or _M.new()
    return default
end

-- A client's text, quoted, its control characters, quotes and backslashes as \xNN: one
-- error.log line whatever it holds.
local function printable(s)
    return '"' .. s:gsub('[%c"\\]', function(c) return format("\\x%02x", byte(c)) end) .. '"'
end

local function refuse(status, reason, headers)
    ngx.log(ngx.WARN, "slidewin admin: refused ", ngx.req.get_method(), " ", printable(ngx.var.uri), " from ",
        ngx.var.remote_addr, ": ", reason)
    ngx.status = status
    for name, value in pairs(headers or {}) do
        ngx.header[name] = value
    end
    ngx.header["Content-Type"] = "text/plain"
    ngx.say(reason)
    return ngx.exit(status)
end

-- Whether `given` is the secret, in a time that depends on the secret's length only: every
-- byte is compared, never stopping at the first difference.
local function same_secret(given, secret)
    local diff = #given == #secret and 0 or 1
    for i = 1, #secret do
        diff = bor(diff, bxor(byte(given, i) or 0, byte(secret, i)))
    end
    return diff == 0
end
_M.same_secret = same_secret

-- One value of header `name`; several are refused (which one would a proxy have checked?).
local function header(headers, name)
    local value = headers[name]
    if type(value) == "table" then
        return refuse(400, "send one " .. name .. " header, got " .. #value)
    end
    return value
end

-- Who asked, once the token (when there is one) is right.
local function authenticate(self, headers)
    local who = ngx.var.remote_addr
    if not self.token then
        return who
    end
    local credentials = header(headers, "Authorization")
    local token = credentials and credentials:match("^[Bb][Ee][Aa][Rr][Ee][Rr] +(%S+) *$")
    if not token then
        return refuse(401, "send Authorization: Bearer <the admin token>",
            { ["WWW-Authenticate"] = 'Bearer realm="slidewin admin"' })
    end
    if not same_secret(token, self.token) then
        return refuse(401, "the bearer token is not the admin token",
            { ["WWW-Authenticate"] = 'Bearer realm="slidewin admin", error="invalid_token"' })
    end
    return who .. " with the bearer token"
end

-- The origins this request may come from: allowed_origins, or this server on loopback.
local function own_origins(self)
    if self.origins then
        return self.origins
    end
    local scheme, port = ngx.var.scheme, ngx.var.server_port
    local suffix = port == DEFAULT_PORTS[scheme] and "" or ":" .. port
    local set = {}
    for _, host in ipairs({ "127.0.0.1", "localhost", "[::1]" }) do
        set[scheme .. "://" .. host .. suffix] = true
    end
    return set
end

local function check_origin(self, headers)
    local origin = header(headers, "Origin")
    if origin then
        local own = own_origins(self)
        if not own[origin:lower()] then
            local names = {}
            for o in pairs(own) do
                names[#names + 1] = o
            end
            table.sort(names)
            return refuse(403, "Origin " .. printable(origin) .. " is not the admin's own ("
                .. concat(names, ", ") .. ")")
        end
        return
    end
    local site = header(headers, "Sec-Fetch-Site")
    if site and site ~= "same-origin" and site ~= "none" then
        return refuse(403, "Sec-Fetch-Site " .. printable(site) .. ": a change must come from the admin's own origin")
    end
end

-- A request a browser sends cross-site only after a preflight: a custom header or JSON.
local function check_not_simple(headers)
    local marker = header(headers, "X-Slidewin-Admin")
    local content_type = header(headers, "Content-Type")
    local media = content_type and content_type:match("^%s*([^;%s]+)")
    if (marker and marker ~= "") or (media and media:lower() == "application/json") then
        return
    end
    return refuse(403, "a change needs the header X-Slidewin-Admin: 1 (or a JSON body), "
        .. "which a cross-site form cannot send")
end

-- Before a handler reads: who asked, or a refusal (no token).
function _M.allow_read(self)
    return authenticate(self, ngx.req.get_headers(0))
end

-- Before a handler changes state, on a location whose methods are `allow` ("GET, HEAD, POST"):
-- who asked, or a refusal (405, 401, 403).
function _M.allow_change(self, allow)
    local method = ngx.req.get_method()
    if method == "GET" or method == "HEAD" or not (", " .. allow .. ","):find(", " .. method .. ",", 1, true) then
        return refuse(405, "a change must use one of " .. allow .. " other than GET and HEAD, got " .. method,
            { Allow = allow })
    end
    local headers = ngx.req.get_headers(0)
    local who = authenticate(self, headers)
    check_origin(self, headers)
    check_not_simple(headers)
    return who
end

return _M
