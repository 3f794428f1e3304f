-- resty.slidewin.journal: what this worker's fallback admitted while the store could not answer,
-- (now_ms, cost) per key (a string or a number), kept until the store has recorded it
-- (resty.slidewin.fallback replays it). Bounded: at most ENTRIES per key (one more is merged
-- into the key's newest, stamped at the later time: later is always safe) and `max_keys` keys,
-- those of a replay in flight included; a key beyond them is not taken (takes() says so), while
-- a key already held (or in flight) always is, and a replay that fails puts its keys back past
-- the bound: nothing admitted is ever dropped.

local max = math.max
local next = next

local _M = {}
local mt = { __index = _M }

local ENTRIES = 32

function _M.new(max_keys)
    -- keys: key -> { now_ms, cost, now_ms, cost, ... }; count: its keys; batch: the replay in
    -- flight, pending: its keys not yet recorded.
    return setmetatable({ keys = {}, count = 0, batch = {}, pending = 0, max_keys = max_keys }, mt)
end

-- Whether an admission for `key` can be journaled.
function _M.takes(self, key)
    return self.keys[key] ~= nil or self.batch[key] ~= nil or self.count + self.pending < self.max_keys
end

-- Journals `cost` admitted for `key` at `now`.
function _M.add(self, key, now, cost)
    local list = self.keys[key]
    if not list then
        list = {}
        self.keys[key], self.count = list, self.count + 1
    end
    local n = #list
    if n < 2 * ENTRIES then
        list[n + 1], list[n + 2] = now, cost
    else
        list[n - 1], list[n] = max(list[n - 1], now), list[n] + cost
    end
end

-- Everything journaled so far (nil when nothing), taken out for a replay: what is admitted
-- from now on is journaled apart. Each key taken is then recorded() or put_back().
function _M.take(self)
    if next(self.keys) == nil then
        return nil
    end
    local batch = self.keys
    self.keys, self.batch, self.pending, self.count = {}, batch, self.count, 0
    return batch
end

-- Key `key` of the replay was recorded in the store.
function _M.recorded(self, key)
    self.batch[key], self.pending = nil, self.pending - 1
end

-- Key `key` of the replay was not recorded: its entries (`list`) are journaled again.
function _M.put_back(self, key, list)
    self.batch[key], self.pending = nil, self.pending - 1
    for i = 1, #list, 2 do
        self:add(key, list[i], list[i + 1])
    end
end

return _M
