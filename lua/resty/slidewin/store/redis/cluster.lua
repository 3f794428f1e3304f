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

-- The topology for `seeds` (nodes).
function _M.new(seeds, dict)
    local names = {}
    for i, node in ipairs(seeds) do
        names[i] = node.name
    end
    return topology.shared("cluster " .. concat(names, ","), dict, function()
        local nodes = {}
        for _, node in ipairs(seeds) do
            nodes[node.name] = node
        end
        return setmetatable({ seeds = seeds, nodes = nodes, slots = nil, replicas = {} }, mt)
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

-- The nodes to ask for the map, never `failed`: its replicas first (the one promoted in its
-- place knows it first), then masters of the last map and seeds, each reload starting one
-- further along that list, so dead nodes at its head are not asked forever.
local function candidates(self, failed)
    local list, seen = {}, { [failed or false] = true }
    local function add(to, node)
        if node and not seen[node] then
            seen[node] = true
            to[#to + 1] = node
        end
    end
    local asked = {}
    for _, node in ipairs(failed and self.replicas[failed] or {}) do add(asked, node) end
    for _, node in ipairs(self.masters or {}) do add(list, node) end
    for _, node in ipairs(self.seeds) do add(list, node) end
    self.turn = (self.turn or 0) + 1
    for i = 1, #list do
        asked[#asked + 1] = list[(self.turn + i - 2) % #list + 1]
    end
    for i = ASKED_PER_RELOAD + 1, #asked do
        asked[i] = nil
    end
    return asked
end

-- The slot map in a CLUSTER SLOTS reply `ranges` from node `asked`: slots, masters, replicas
-- of each master, and whether `failed` still serves a slot there.
local function parse(self, ranges, asked, failed)
    local slots, masters, replicas, stale = {}, {}, {}, false
    local function node_of(entry)
        -- An empty host means "the address you reached me at".
        local host = (entry[1] == "" or entry[1] == ngx.null) and asked.host or entry[1]
        return node_at(self, host .. ":" .. entry[2])
    end
    for _, range in ipairs(ranges) do
        local master = node_of(range[3])
        for slot = range[1], range[2] do
            slots[slot] = master
        end
        stale = stale or master == failed
        if not replicas[master] then
            masters[#masters + 1] = master
            replicas[master] = {}
        end
        for i = 4, #range do
            replicas[master][#replicas[master] + 1] = node_of(range[i])
        end
    end
    return slots, masters, replicas, stale
end

-- Reads CLUSTER SLOTS (with opts' timeouts and password) from the candidates until one answers
-- with a map where `failed` serves no slot (else the first answer is kept): true, or nil, err.
function _M.load(self, opts, failed)
    local errors, found = {}, nil
    for _, asked in ipairs(candidates(self, failed)) do
        local ranges, err = connection.command(asked, opts, "cluster", "slots")
        if type(ranges) == "table" then
            local slots, masters, replicas, stale = parse(self, ranges, asked, failed)
            found = found or { slots, masters, replicas }
            if not stale then
                found = { slots, masters, replicas }
                break
            end
        else
            errors[#errors + 1] = asked.name .. ": " .. tostring(err)
        end
    end
    if not found then
        return nil, "CLUSTER SLOTS failed on every node asked (" .. concat(errors, "; ") .. ")"
    end
    self.slots, self.masters, self.replicas = found[1], found[2], found[3]
    return true
end

function _M.address(self, key, opts)
    local slots = self.slots
    if not slots then
        topology.reload(self, opts)
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

local function reload_later(premature, self, opts)
    self.reload_pending = false
    if not premature then
        topology.reload(self, opts)
    end
end

function _M.reroute(self, key, node, err, broken, opts)
    if not broken then
        local kind, slot, address = tostring(err):match("^(%u+) (%d+) (%S+)$")
        if kind == "MOVED" then
            local target = node_at(self, address)
            if self.slots and target then
                self.slots[tonumber(slot)] = target
                -- One pending background reload at a time, however many MOVED arrive.
                if not self.reload_pending then
                    self.reload_pending = ngx.timer.at(0, reload_later, self, opts) ~= nil
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
    topology.reload(self, opts, node)
    local now = self.slots and self.slots[slot_of(key)]
    if now and now ~= node then
        return now, false, "refresh"
    end
    return nil
end

return _M
