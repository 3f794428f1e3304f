-- resty.slidewin.store.redis.cluster: routing to the master of a key's slot in a Redis Cluster.
--
-- The slot map (CLUSTER SLOTS) is read from the seed nodes or the nodes seen last time, cached
-- in this worker and shared by its limiters. MOVED updates the slot at once and reloads the map
-- in the background; ASK is followed once with ASKING; a connection error or timeout reloads
-- the map (so a promoted replica is found) and retries once if the slot moved to another node.

local connection = require "resty.slidewin.store.redis.connection"
local slot_of = require "resty.slidewin.store.redis.slot"
local topology = require "resty.slidewin.store.redis.topology"

local ngx = ngx
local concat = table.concat

local _M = {}
local mt = { __index = _M }

-- The topology for `seeds` (nodes), with opts' timeouts and password.
function _M.new(seeds, opts, dict)
    local names = {}
    for i, node in ipairs(seeds) do
        names[i] = node.name
    end
    return topology.shared("cluster " .. concat(names, ","), dict, function()
        local nodes = {}
        for _, node in ipairs(seeds) do
            nodes[node.name] = node
        end
        return setmetatable({ seeds = seeds, opts = opts, nodes = nodes, slots = nil }, mt)
    end)
end

-- The node object for "host:port" (one per address, so nodes compare by identity).
local function node_at(self, address)
    local node = self.nodes[address]
    if not node then
        node = connection.node(address)
        if node then
            self.nodes[address] = node
        end
    end
    return node
end

-- A reload asks at most this many nodes, so that its time is bounded by their timeouts.
local ASKED_PER_RELOAD = 3

-- The nodes to ask for the map: masters of the last map, then seeds, never `failed`; each
-- reload starts one further along the list, so dead nodes at its head are not asked forever.
local function candidates(self, failed)
    local list, seen = {}, {}
    local function add(node)
        if node and not seen[node] and node ~= failed then
            seen[node] = true
            list[#list + 1] = node
        end
    end
    for _, node in ipairs(self.masters or {}) do add(node) end
    for _, node in ipairs(self.seeds) do add(node) end
    self.turn = (self.turn or 0) + 1
    local asked = {}
    for i = 1, math.min(ASKED_PER_RELOAD, #list) do
        asked[i] = list[(self.turn + i - 2) % #list + 1]
    end
    return asked
end

-- Reads CLUSTER SLOTS from the first candidate that answers: true, or nil, err.
function _M.load(self, failed)
    local errors = {}
    for _, asked in ipairs(candidates(self, failed)) do
        local ranges, err = connection.command(asked, self.opts, "cluster", "slots")
        if type(ranges) == "table" then
            local slots, masters, seen = {}, {}, {}
            for _, range in ipairs(ranges) do
                local master = range[3]
                -- An empty host means "the address you reached me at".
                local host = (master[1] == "" or master[1] == ngx.null) and asked.host or master[1]
                local node = node_at(self, host .. ":" .. master[2])
                for slot = range[1], range[2] do
                    slots[slot] = node
                end
                if not seen[node] then
                    seen[node] = true
                    masters[#masters + 1] = node
                end
            end
            self.slots, self.masters = slots, masters
            return true
        end
        errors[#errors + 1] = asked.name .. ": " .. tostring(err)
    end
    return nil, "CLUSTER SLOTS failed on every node (" .. concat(errors, "; ") .. ")"
end

function _M.address(self, key)
    local slots = self.slots
    if not slots then
        topology.reload(self)
        slots = self.slots
        if not slots then
            return nil, "redis cluster: no slot map yet (see error.log)"
        end
    end
    local node = slots[slot_of(key)]
    if not node then
        return nil, "redis cluster: slot " .. slot_of(key) .. " is not served by any node"
    end
    return node
end

local function reload_later(premature, self)
    self.reload_pending = false
    if not premature then
        topology.reload(self)
    end
end

function _M.reroute(self, key, node, err, broken)
    if not broken then
        local kind, slot, address = tostring(err):match("^(%u+) (%d+) (%S+)$")
        if kind == "MOVED" then
            local target = node_at(self, address)
            if self.slots and target then
                self.slots[tonumber(slot)] = target
                -- One pending background reload at a time, however many MOVED arrive.
                if not self.reload_pending then
                    self.reload_pending = ngx.timer.at(0, reload_later, self) ~= nil
                end
            end
            return target, false, "moved"
        elseif kind == "ASK" then
            return node_at(self, address), true, "ask"
        end
        return nil
    end
    -- The node is down or slow: a replica may have taken its slots over (found by this
    -- reload, or by one another request ran a moment ago).
    topology.reload(self, node)
    local now = self.slots and self.slots[slot_of(key)]
    if now and now ~= node then
        return now, false, "refresh"
    end
    return nil
end

return _M
