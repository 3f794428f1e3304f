-- resty.slidewin.store.shdict: one lua_shared_dict shared by every worker of one nginx.
--
-- The sliding-window counter (algorithm "counter"), as slidewin::SlidingCounter counts: time
-- is cut into fixed windows of window_ms, and a key's count in the previous window is weighted
-- by the part of it still inside the sliding window. This store keeps the two counts in the
-- dict and asks the core for every answer (slidewin.counter_decide: admitted, remaining,
-- retry-after, reset-after), so it decides as the core's counter does. Committing is an
-- atomic incr of the current count, undone (incr by -cost) when the core finds the count
-- before it plus the cost over the limit, so concurrent workers never admit more than the
-- limit against the counts they read; the count assumes the previous window's requests were
-- spread evenly, which is this algorithm's documented error. Counts expire after 2 x window_ms.
--
-- Exact integers: the dict keeps numbers as doubles, so max_limit x window_ms is kept within
-- 2^50 (every count stays far below 2^53); a cost above the limit is refused before any incr
-- (it never fits), and a refund gives back at most 2^51. Keys longer than
-- conf.max_key_bytes (or than the dict's key limit) are stored as the SHA-1 of a random seed
-- and the key: a fixed 28 bytes, so a long key neither fails the dict's incr (which would fail
-- open) nor takes more of the dict. The seed is made once per dict and read back by every
-- worker, so all agree on every key's digest.
--
--   lua_shared_dict slidewin 10m;
--   require("resty.slidewin").new{ name = "api", algorithm = "counter", limit = 30,
--                                  window_ms = 5000, store = "shdict", dict = "slidewin" }

local slidewin = require "slidewin"

local now_ms = slidewin.now_ms
-- Through the FFI: a C API call would make LuaJIT leave the request's trace.
local answer = require "resty.slidewin.answer"
local counter_decide = answer.counter_decide
local floor = math.floor
local min = math.min
local huge = math.huge
local type = type

-- ngx.shared.DICT keys are at most 65535 bytes.
local DICT_KEY_BYTES = 65535
local MAX_PRODUCT = 2 ^ 50
local MAX_REFUND = 2 ^ 51

local _M = {}
local mt = { __index = _M }

-- The dict's seed for long keys, made on first use: every worker reads the same one.
local function shared_seed(dict, name)
    local seed_key = name .. "#seed"
    local seed = dict:get(seed_key)
    if seed then
        return seed
    end
    local urandom, err = io.open("/dev/urandom", "rb")
    if not urandom then
        return nil, "cannot read /dev/urandom for the long-key seed: " .. tostring(err)
    end
    seed = urandom:read(16)
    urandom:close()
    -- add, not set: when two workers race, the first seed stays and both read it back.
    dict:add(seed_key, seed)
    seed = dict:get(seed_key)
    if not seed then
        return nil, "cannot store the long-key seed in the dict (is it full?)"
    end
    return seed
end

function _M.new(conf)
    if #conf.windows ~= 1 then
        return nil, "windows must hold one window with store \"shdict\" (use store \"shm\" for rules), got "
            .. #conf.windows .. " windows"
    end
    if conf.algorithm ~= "counter" then
        return nil, 'algorithm must be "counter" with store "shdict", got "' .. tostring(conf.algorithm) .. '"'
    end
    local dict = ngx.shared[conf.dict]
    if not dict then
        return nil, 'dict must name a lua_shared_dict, got "' .. tostring(conf.dict) .. '"'
    end
    local max_limit = conf.windows[1].max_limit
    if max_limit * conf.window_ms > MAX_PRODUCT then
        return nil, "max_limit x window_ms must be at most 2^50 with store shdict (exact counts), got "
            .. max_limit .. " x " .. conf.window_ms
    end
    local seed, err = shared_seed(dict, conf.name)
    if not seed then
        return nil, err
    end
    local prefix = conf.name .. "|"
    return setmetatable({
        dict = dict,
        prefix = prefix,
        seed = seed,
        -- Room for the prefix, a window index and a separator within the dict's key limit.
        max_key_bytes = min(conf.max_key_bytes or huge, DICT_KEY_BYTES - #prefix - 32),
        keys_prefix = conf.name .. "#keys|",
        limit = conf.limit,
        window_ms = conf.window_ms,
        ttl_s = 2 * conf.window_ms / 1000,
    }, mt)
end

-- The current fixed window's index (it names the dict keys of this window's counts).
local function window_index(self, now)
    return floor(now / self.window_ms)
end

-- A count read from the dict: a refund leaves one below 0 for an instant before it
-- corrects it, which counts as nothing.
local function count(v)
    return v and v > 0 and v or 0
end

-- Methods called with `.` get `self` wrong: say so, not "attempt to index a number value".
local function check_self(self, method)
    if getmetatable(self) ~= mt then
        error(("store:%s: self must be a shdict store (call store:%s(...) with ':'), got %s"):format(method,
            method, type(self) == "string" and '"' .. self .. '"' or tostring(self)), 3)
    end
end

-- The dict keys' tail for `key`: "|key", or "#digest" when the key is too long.
local function key_tail(self, key, method)
    local key_type = type(key)
    if key_type == "number" and key == key and key ~= huge and key ~= -huge then
        return "|" .. key
    elseif key_type ~= "string" then
        error(("store:%s: key must be a string or a finite number, got %s"):format(method,
            key_type == "number" and tostring(key) or key_type), 3)
    elseif #key > self.max_key_bytes then
        return "#" .. ngx.encode_base64(ngx.sha1_bin(self.seed .. key))
    end
    return "|" .. key
end

local function check_cost(cost, method)
    if not (type(cost) == "number" and cost >= 0 and cost % 1 == 0) then
        error(("store:%s: cost must be a non-negative integer, got %s"):format(method, tostring(cost)), 3)
    end
end

-- limits: nil (conf's limit) or { limit } (one window).
function _M.decide(self, key, cost, commit, limits)
    check_self(self, "decide")
    local tail = key_tail(self, key, "decide")
    check_cost(cost, "decide")
    local dict, limit, window_ms = self.dict, limits and limits[1] or self.limit, self.window_ms
    local now = now_ms()
    local index = window_index(self, now)
    local current_key = self.prefix .. index .. tail
    local previous = count(dict:get(self.prefix .. (index - 1) .. tail))
    -- A cost above the limit never fits: refused before any incr.
    if not commit or cost == 0 or cost > limit then
        return counter_decide(limit, window_ms, previous, count(dict:get(current_key)), now, cost, false)
    end
    local current, err = dict:incr(current_key, cost, 0, self.ttl_s)
    if not current then
        return nil, err
    end
    -- Decided on the count before this incr (the counts as this call found them, atomically),
    -- as a call that records its cost when it fits.
    local allowed, remaining, retry_after_ms, reset_after_ms =
        counter_decide(limit, window_ms, previous, count(current - cost), now, cost, true)
    if allowed then
        if current == cost then
            dict:incr(self.keys_prefix .. index, 1, 0, self.ttl_s)
        end
    else
        -- Over the limit: take the increment back (atomically, whatever others did meanwhile).
        local undone
        undone, err = dict:incr(current_key, -cost)
        if not undone then
            return nil, err
        end
    end
    return allowed, remaining, retry_after_ms, reset_after_ms
end

-- The decision in resty.slidewin.answer's buffer, header values rendered.
_M.answer = answer.answering(_M.decide)

-- Gives back `cost` from the current window, then from the previous one (as SlidingCounter).
function _M.refund(self, key, cost)
    check_self(self, "refund")
    local tail = key_tail(self, key, "refund")
    check_cost(cost, "refund")
    local dict = self.dict
    local index = window_index(self, now_ms())
    local current_key = self.prefix .. index .. tail
    -- Counts stay below 2^51: giving back more empties them all the same, exactly.
    local current, err = dict:incr(current_key, -min(cost, MAX_REFUND), 0, self.ttl_s)
    if not current then
        return nil, err
    end
    if current < 0 then
        dict:incr(current_key, -current)
        local previous_key = self.prefix .. (index - 1) .. tail
        local previous = dict:incr(previous_key, current)
        if previous and previous < 0 then
            dict:incr(previous_key, -previous)
        end
    end
    return true
end

-- Keys that made a request in the current window.
function _M.keys(self)
    check_self(self, "keys")
    return self.dict:get(self.keys_prefix .. window_index(self, now_ms())) or 0
end

return _M
