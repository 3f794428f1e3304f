-- resty.slidewin.llm: exact token and cost limits for OpenAI-compatible APIs (chat completions,
-- completions, responses, embeddings), whose cost is known only from the answer.
--
--   init_by_lua_block {
--       local slidewin, llm = require "resty.slidewin", require "resty.slidewin.llm"
--       local tokens = assert(slidewin.new{ name = "tokens", limit = 100000, window_ms = 60000,
--           store = "shm", shm = "slidewin_tokens" })
--       local cents = assert(slidewin.new{ name = "cents", limit = 2000, window_ms = 86400000,
--           store = "shm", shm = "slidewin_cents" })
--       -- cents per token: the provider's dollars per million tokens / 10^4
--       assert(llm.new{ name = "openai", limits = { { limiter = tokens },
--           { limiter = cents, prices = { ["gpt-4o"] = { input = 2.5e-4, cached = 1.25e-4, output = 1e-3 } } } } })
--   }
--   location /v1/ {
--       client_body_buffer_size 1m; client_max_body_size 1m;   -- the body is read in memory
--       access_by_lua_block { require("resty.slidewin.llm").get("openai"):access(ngx.var.http_x_user) }
--       header_filter_by_lua_block { require("resty.slidewin.llm").header_filter() }
--       body_filter_by_lua_block { require("resty.slidewin.llm").body_filter() }
--       proxy_pass https://api.openai.com;
--   }
--   log_by_lua_block { require("resty.slidewin").log() }   -- http level: settles every call
--
-- access(key) reads the body, bounds the prompt (with a tokenizer table: the exact tokens of
-- its text, a documented overhead per message, the bytes of what is not text; without one:
-- its bytes; plus media_tokens per image, audio or file part), writes the output cap down to the room every limit leaves (at most
-- default_cap when the client gave none), reserves prompt bound + cap x choices in each
-- limit at its weights, and asks a stream for its usage. The log phase settles each
-- reservation for the cost of the usage the answer reported (in its JSON or in the stream's
-- usage event, which is taken out again when the client did not ask for it), at the
-- reservation's stamp. An answer that reports nothing (cut, an error, not JSON) keeps the
-- reservation. A bad body is a 400 naming what is wrong and charges nothing; a call no limit
-- has room for is refused by that limiter (429, its headers). docs/usage.md tells the
-- guarantee and what it assumes.
--
-- conf: name, limits = { { limiter = sw, prices = { [model] = { input, cached, output },
-- default = {...} } }, ... } (no prices: one unit per token; a model with no price and no
-- default is a 400), endpoint ("chat", "completions", "responses", "embeddings"; nil: from the
-- URI's end), default_cap (4096), media_tokens (2000), max_body (1 MiB, a 413 above),
-- max_answer (8 MiB: a longer JSON answer is not read, and keeps its reservation), tokenizer
-- (the path of a tiktoken table, cl100k_base.tiktoken or o200k_base.tiktoken, read once here;
-- nil: the prompt's bound is its bytes), tokenizer_split ("cl100k" or "o200k"; nil: from the
-- file's name), mode
-- ("clamp": use above a reservation is counted as over, not recorded, the cap bounding it;
-- "debt": it is recorded at the reservation's stamp, so the limit refuses until it leaves,
-- for upstreams that may not honour the cap).

local slidewin = require "slidewin"
local config = require "resty.slidewin.config"
local json = require "resty.slidewin.json"
local phases = require "resty.slidewin.phases"
local registry = require "resty.slidewin.registry"

local ngx = ngx
local concat, ipairs, pairs, pcall, type, tostring = table.concat, ipairs, pairs, pcall, type, tostring
local find, format, min = string.find, string.format, math.min
local llm_request, llm_weights, llm_tokenizer = slidewin.llm_request, slidewin.llm_weights, slidewin.llm_tokenizer
local llm_events, llm_usage = slidewin.llm_events, slidewin.llm_usage

local _M = {}
local mt = { __index = _M }

local guards = registry.kind("language-model guard")
local CTX = "slidewin_llm"
local TOKENS = llm_weights{}

-- Each endpoint by the end of its path, chat before completions (which its path ends with).
local ENDPOINTS = { "chat", "/chat/completions", "completions", "/completions", "responses", "/responses",
    "embeddings", "/embeddings" }
local ENDPOINT_NAMES = { chat = true, completions = true, responses = true, embeddings = true }

-- The endpoint a URI ends with, or nil.
local function endpoint_of(uri)
    for i = 1, #ENDPOINTS, 2 do
        local tail = ENDPOINTS[i + 1]
        if find(uri, tail, -#tail, true) then
            return ENDPOINTS[i]
        end
    end
end

local invalid, positive_integer, show = config.invalid, config.positive_integer, config.show

-- conf[field] (default when absent), or nil, err.
local function positive(conf, field, default)
    local v = conf[field]
    if v == nil or positive_integer(v) then
        return v or default
    end
    return invalid("resty.slidewin.llm: " .. field, "a positive integer", v)
end

-- A limit's weights per model: a table of llm_weights, or nil, err.
local function prices_of(prices, i)
    if prices == nil then
        return nil
    end
    if type(prices) ~= "table" then
        return nil, format("resty.slidewin.llm: limits[%d].prices must be a table, got %s", i, tostring(prices))
    end
    local weights = {}
    for model, p in pairs(prices) do
        local field = format("resty.slidewin.llm: limits[%d].prices[%s]", i, show(model))
        if type(p) ~= "table" then
            return invalid(field, "a table of input, cached and output", p)
        end
        local ok, w = pcall(llm_weights, p)
        if not ok then
            return nil, field .. ": " .. w
        end
        weights[model] = w
    end
    return weights
end

-- llm.new(conf): the guard (kept by name: llm.get(name)), or nil, err.
function _M.new(conf)
    if type(conf) ~= "table" then
        return nil, "resty.slidewin.llm: conf must be a table, got " .. tostring(conf)
    end
    if type(conf.limits) ~= "table" or #conf.limits == 0 then
        return nil, "resty.slidewin.llm: limits must be a list of { limiter = ..., prices = ... }, got "
            .. tostring(conf.limits)
    end
    local limits = {}
    for i, l in ipairs(conf.limits) do
        if type(l) ~= "table" or type(l.limiter) ~= "table" or type(l.limiter.reserve) ~= "function" then
            return nil, format("resty.slidewin.llm: limits[%d].limiter must be a resty.slidewin limiter", i)
        end
        local prices, err = prices_of(l.prices, i)
        if err then
            return nil, err
        end
        limits[i] = { limiter = l.limiter, prices = prices }
    end
    local endpoint = conf.endpoint
    if endpoint ~= nil and not ENDPOINT_NAMES[endpoint] then
        return nil, "resty.slidewin.llm: endpoint must be chat, completions, responses or embeddings, got "
            .. tostring(endpoint)
    end
    local mode = conf.mode or "clamp"
    if mode ~= "clamp" and mode ~= "debt" then
        return invalid("resty.slidewin.llm: mode", '"clamp" or "debt"', mode)
    end
    for i, l in ipairs(limits) do
        if mode == "debt" and not l.limiter.store.owes then
            return nil, format("resty.slidewin.llm: mode debt needs limits whose store can record "
                .. "a debt (local, shm, zone, nginx, redis), limits[%d] has store %s", i, show(l.limiter.conf.store))
        end
    end
    local tokenizer, err
    if conf.tokenizer ~= nil then
        if type(conf.tokenizer) ~= "string" then
            return invalid("resty.slidewin.llm: tokenizer", "the path of a tiktoken table", conf.tokenizer)
        end
        local ok, tok, e = pcall(llm_tokenizer, { path = conf.tokenizer, split = conf.tokenizer_split })
        if not ok then -- only the split raises: the path is a string
            return invalid("resty.slidewin.llm: tokenizer_split",
                '"cl100k" or "o200k" (nil: the tokenizer file\'s name begins with one)', conf.tokenizer_split)
        elseif not tok then -- e: the path and what is wrong in its file
            return nil, "resty.slidewin.llm: tokenizer: " .. e
        end
        tokenizer = tok
    end
    local self = { name = conf.name, limits = limits, endpoint = endpoint, mode = mode, tokenizer = tokenizer }
    for _, f in ipairs { { "default_cap", 4096 }, { "media_tokens", 2000 }, { "max_body", 1048576 },
        { "max_answer", 8388608 } } do
        self[f[1]], err = positive(conf, f[1], f[2])
        if err then
            return nil, err
        end
    end
    self = setmetatable(self, mt)
    if conf.name ~= nil then
        guards:add(self)
    end
    phases.on_log("llm", _M.log)
    return self
end

-- llm.get(name): the guard made with that name (raises when there is none).
function _M.get(name)
    local guard, err = guards:get(name)
    if not guard then
        error(err, 2)
    end
    return guard
end

-- Ends the request with `status` and an OpenAI-shaped error naming what is wrong.
local function refuse_body(status, message)
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.print(json.encode(json.object { "error", json.object {
        "message", message, "type", "invalid_request_error", "code", "slidewin_bad_body" } }))
    return ngx.exit(status)
end

-- The request's body in memory, or nil, status, message.
local function body_of(self)
    local encoding = ngx.var.http_content_encoding
    if encoding and encoding ~= "identity" then
        return nil, 400, "Content-Encoding " .. encoding .. " is not read: send the body uncompressed"
    end
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if not body and ngx.req.get_body_file() then
        return nil, 413, "body must fit in client_body_buffer_size to be read"
    end
    body = body or ""
    if #body > self.max_body then
        return nil, 413, format("body must be at most %d bytes, got %d", self.max_body, #body)
    end
    return body
end

-- guard:access(key): reserves the call's bound in every limit (or ends the request: 400, 413,
-- or the refusing limiter's answer) and sends the body on with the cap that fits. Returns the
-- tickets, one per limit ({ key, cost, stamp_ms }), which the log phase settles.
function _M.access(self, key)
    local body, status, message = body_of(self)
    if not body then
        return refuse_body(status, message)
    end
    local endpoint = self.endpoint or endpoint_of(ngx.var.uri)
    if not endpoint then
        return refuse_body(404, "no language-model endpoint at " .. ngx.var.uri)
    end
    local req, err = llm_request { body = body, endpoint = endpoint, media_tokens = self.media_tokens,
        tokenizer = self.tokenizer }
    if not req then
        return refuse_body(400, err)
    end
    local model, prompt, choices = req:model(), req:prompt_bound(), req:choices()
    local weights, cap = {}, req:cap() or self.default_cap
    for i, l in ipairs(self.limits) do
        local w = TOKENS
        if l.prices then
            w = l.prices[model] or l.prices.default
            if not w then
                return refuse_body(400, format("model %s has no price in limit %s", model, l.limiter.name))
            end
        end
        weights[i] = w
        -- The room left; a store that fails tells none, and the reservation below answers
        -- as the limiter's on_store_error says.
        local allowed, room = l.limiter:decide(key, 0, false)
        if allowed ~= nil then
            cap = min(cap, w:cap_within(room, prompt, choices))
        end
    end
    if endpoint == "embeddings" then
        cap = 0 -- no output: the prompt alone
    elseif cap < 1 then
        cap = 1 -- at least one token: when that does not fit, the limiter refuses (exact retry time)
    end
    local ctx = { limits = self.limits, mode = self.mode, weights = weights, tickets = {}, asks_usage = req:asks_usage(),
        max_answer = self.max_answer }
    ngx.ctx[CTX] = ctx
    for i, l in ipairs(self.limits) do
        -- A refusal ends the request here; log() gives back what earlier limits reserved.
        ctx.tickets[i] = l.limiter:reserve(key, weights[i]:bound(prompt, cap, choices))
    end
    ctx.sent = true
    ngx.req.set_body_data(req:rewrite(body, cap))
    ngx.req.clear_header("Accept-Encoding") -- the answer is read for its usage
    return ctx.tickets
end

-- llm.header_filter(): chooses how the answer is read.
function _M.header_filter()
    local ctx = ngx.ctx[CTX]
    if not (ctx and ctx.sent) then
        return
    end
    local encoding = ngx.header["Content-Encoding"]
    if encoding and encoding ~= "identity" then
        return -- compressed anyway: not read, the reservation stays
    end
    local content_type = ngx.header["Content-Type"] or ""
    if find(content_type, "text/event-stream", 1, true) then
        ctx.events = llm_events { strip_usage = ctx.asks_usage }
        if ctx.asks_usage then
            ngx.header["Content-Length"] = nil
        end
    elseif find(content_type, "json", 1, true) then
        ctx.chunks, ctx.size = {}, 0
    end
end

-- llm.body_filter(): reads the answer as it passes.
function _M.body_filter()
    local ctx = ngx.ctx[CTX]
    if not ctx then
        return
    end
    local chunk, eof = ngx.arg[1], ngx.arg[2]
    local events, chunks = ctx.events, ctx.chunks
    if events then
        local out = events:feed(chunk)
        if eof then
            out = out .. events:finish()
        end
        ngx.arg[1] = out
    elseif chunks then
        local size = ctx.size + #chunk
        if size > ctx.max_answer then
            ctx.chunks = nil
            return
        end
        chunks[#chunks + 1], ctx.size = chunk, size
    end
end

-- The usage the answer reported: input, cached, output, or nil.
local function usage_of(ctx)
    if ctx.events then
        return ctx.events:usage()
    elseif ctx.chunks then
        return llm_usage(concat(ctx.chunks))
    end
end

-- llm.log() (run by resty.slidewin's log()): settles the request's reservations.
function _M.log()
    local ctx = ngx.ctx[CTX]
    if not ctx then
        return
    end
    ngx.ctx[CTX] = nil
    local tickets, limits = ctx.tickets, ctx.limits
    if not ctx.sent then
        -- A later limit refused: the call was not made.
        for i, ticket in ipairs(tickets) do
            limits[i].limiter:settle(ticket, 0)
        end
        return
    end
    local input, cached, output = usage_of(ctx)
    for i, ticket in ipairs(tickets) do
        -- Nothing reported: each reservation stays whole. Use above a reservation (a prompt
        -- over its bound, an upstream that ignored the cap) is counted as over, or owed.
        limits[i].limiter:settle(ticket, input and ctx.weights[i]:cost(input, cached, output), ctx.mode)
    end
end

return _M
