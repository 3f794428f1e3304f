-- resty.slidewin.store.redis.sentinel: a standalone primary found through Redis Sentinel.
--
-- The master's address (SENTINEL get-master-addr-by-name) is asked of the first sentinel that
-- answers, cached in this worker and shared by its limiters, and asked again when the master
-- refuses connections, times out or answers READONLY (it was demoted to a replica); a request
-- is retried once on the new master.

local connection = require "resty.slidewin.store.redis.connection"
local topology = require "resty.slidewin.store.redis.topology"

local concat = table.concat

local _M = {}
local mt = { __index = _M }

-- The topology for master `name` watched by `sentinels` (nodes).
function _M.new(sentinels, name, dict)
    local names = {}
    for i, node in ipairs(sentinels) do
        names[i] = node.name
    end
    return topology.shared("sentinel " .. name .. "@" .. concat(names, ","), dict, function()
        return setmetatable({ sentinels = sentinels, name = name, master = nil }, mt)
    end)
end

-- Asks the sentinels in turn (with opts' timeouts and TLS, as sentinel_username /
-- sentinel_password): true, or nil, err.
function _M.load(self, opts)
    local sentinel_opts = connection.for_sentinels(opts)
    local errors = {}
    for _, sentinel in ipairs(self.sentinels) do
        local addr, err = connection.command(sentinel, sentinel_opts, "sentinel",
            "get-master-addr-by-name", self.name)
        if type(addr) == "table" then
            local master = connection.node(addr[1] .. ":" .. addr[2])
            if master then
                if not (self.master and self.master.name == master.name) then
                    self.master = master
                end
                return true
            end
            err = "bad address " .. tostring(addr[1]) .. ":" .. tostring(addr[2])
        elseif addr ~= nil and addr ~= false then
            err = "unknown master name"
        end
        errors[#errors + 1] = sentinel.name .. ": " .. tostring(err)
    end
    return nil, "no sentinel named master " .. self.name .. " (" .. concat(errors, "; ") .. ")"
end

function _M.address(self, _, opts)
    if not self.master then
        topology.reload(self, opts)
        if not self.master then
            return nil, "redis sentinel: master " .. self.name .. " not resolved yet (see error.log)"
        end
    end
    return self.master
end

function _M.reroute(self, _, node, err, broken, opts)
    if not (broken or tostring(err):find("^READONLY")) then
        return nil
    end
    topology.reload(self, opts)
    if self.master and self.master ~= node then
        return self.master, false, "refresh"
    end
    return nil
end

return _M
