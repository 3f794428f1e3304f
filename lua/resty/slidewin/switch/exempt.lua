-- resty.slidewin.switch.exempt (option `exempt = { cidrs = {...}, keys = {...}, address = fn }`):
-- a request from an address in one of the IPv4/IPv6 CIDRs, or whose key is one of `keys`
-- (exact), is admitted without asking the store: no header, no window spent, counted as
-- outcome "exempt". The address is ngx.var.remote_addr, or what `address()` returns (e.g.
-- the first hop of X-Forwarded-For behind a trusted proxy).

local cidr = require "resty.slidewin.switch.cidr"
local invalid = require("resty.slidewin.config").invalid

local format = string.format
local ngx = ngx

local _M = { option = "exempt" }

local function remote_addr()
    return ngx.var.remote_addr
end

-- The CIDRs of `list` parsed, or nil, err.
local function networks(list)
    if type(list) ~= "table" then
        return invalid("exempt.cidrs", "a list of CIDRs", list)
    end
    local nets = {}
    for i, text in ipairs(list) do
        nets[i] = cidr.parse(text)
        if not nets[i] then
            return invalid(format("exempt.cidrs[%d]", i), 'an IPv4 or IPv6 CIDR ("10.0.0.0/8", "::1/128")', text)
        end
    end
    return nets
end

-- The keys of `list` as a set, or nil, err.
local function key_set(list)
    if type(list) ~= "table" then
        return invalid("exempt.keys", "a list of keys", list)
    end
    local set = {}
    for i, key in ipairs(list) do
        if type(key) ~= "string" and type(key) ~= "number" then
            return invalid(format("exempt.keys[%d]", i), "a string or a number", key)
        end
        set[key] = true
    end
    return set
end

-- Whether `addr` (text) is in one of `nets`.
local function listed(nets, addr)
    local bytes = cidr.address(addr)
    if not bytes then
        return false
    end
    for i = 1, #nets do
        if cidr.contains(nets[i], bytes) then
            return true
        end
    end
    return false
end

-- How many addresses a limiter remembers the answer for (then it forgets them all): a client
-- sends many requests, and parsing its address each time costs more than the decision.
local MEMO_SIZE = 10000

-- is_listed(addr) for `nets`, remembering its last MEMO_SIZE answers.
local function memo_of(nets)
    local memo, size = {}, 0
    return function(addr)
        local known = memo[addr]
        if known == nil then
            known = listed(nets, addr)
            if size >= MEMO_SIZE then
                memo, size = {}, 0
            end
            memo[addr], size = known, size + 1
        end
        return known
    end
end

function _M.configure(exempt, _, hooks)
    if type(exempt) ~= "table" then
        return invalid("exempt", "a table { cidrs = {...}, keys = {...} }", exempt)
    end
    local nets, keys, err = {}, {}, nil
    if exempt.cidrs ~= nil then
        nets, err = networks(exempt.cidrs)
        if not nets then
            return nil, err
        end
    end
    if exempt.keys ~= nil then
        keys, err = key_set(exempt.keys)
        if not keys then
            return nil, err
        end
    end
    local address = exempt.address or remote_addr
    if type(address) ~= "function" then
        return invalid("exempt.address", "a function returning the client's address", address)
    end
    local is_listed = #nets > 0 and memo_of(nets)
    hooks.outcomes[#hooks.outcomes + 1] = "exempt"
    return hooks:add("exempt", function(_, key)
        return keys[key] or is_listed and is_listed(address() or "")
    end)
end

return _M
