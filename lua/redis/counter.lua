-- slidewin sliding counter: O(1) memory, the previous fixed window weighted by its overlap.
-- KEYS[1] hash: "w" (index of the current fixed window, now / window_ms), "c" (its cost),
--         "p" (the previous window's cost). One key: Cluster-safe.
-- ARGV: limit window_ms cost [now_ms N] [mode check|peek|refund]
-- Sent after args.lua, which reads ARGV into limit, window, cost, mode and now (a.width: bucket_ms).
-- Returns {allowed 0/1, remaining, retry_after_ms (-1: never), reset_after_ms}.
-- With e = now - w*window_ms, the window holds p*(window_ms - e)/window_ms + c, compared exactly
-- (in integers scaled by window_ms, so limit * window_ms must stay below 2^53).
local key = KEYS[1]
local floor = math.floor
local state = redis.call('HMGET', key, 'w', 'c', 'p')
local index, current, previous = floor(now / window), tonumber(state[2]) or 0, tonumber(state[3]) or 0
local stored = tonumber(state[1])
if stored == index - 1 then
  current, previous = 0, current
elseif stored and stored > index then
  index = stored -- the clock stepped back: keep counting in the newest window
elseif stored ~= index then
  current, previous = 0, 0
end
local elapsed = math.max(now - index * window, 0)
local function used(c) -- the window's cost, scaled by window_ms
  return previous * (window - elapsed) + c * window
end

local allowed = cost <= limit and used(current + cost) <= limit * window
if mode == 'check' and allowed then
  current = current + cost
elseif mode == 'refund' then
  local back = math.min(current, cost)
  current, previous, allowed = current - back, math.max(previous - (cost - back), 0), true
end

local retry = 0
if not allowed then
  retry = -1
  if cost <= limit then
    -- The first ms at which previous * (window - e) + (current + cost) * window fits,
    -- in this window, or else in the next one (where this window's cost becomes the previous).
    local room = (limit - current - cost) * window
    if room >= 0 then
      retry = index * window + window - floor(room / previous) - now
    else
      retry = (index + 1) * window + window - floor((limit - cost) * window / current) - now
    end
  end
end

local reset = 0
if current > 0 then
  reset = (index + 2) * window - now
elseif previous > 0 then
  reset = (index + 1) * window - now
end
if reset > 0 then
  redis.call('HSET', key, 'w', index, 'c', current, 'p', previous)
  redis.call('PEXPIRE', key, reset)
else
  redis.call('DEL', key)
end
local remaining = limit - current - math.ceil(previous * (window - elapsed) / window)
return {allowed and 1 or 0, math.max(remaining, 0), retry, reset}
