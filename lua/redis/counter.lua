-- slidewin sliding counter: O(1) memory, the previous fixed window weighted by its overlap.
-- KEYS[1] hash: "now" (the newest time seen; now / window_ms is the current fixed window),
--         "c" (the current window's cost), "p" (the previous window's cost). One key: Cluster-safe.
-- ARGV: limit window_ms cost [now_ms N] [mode check|peek|refund]
-- Sent after args.lua: it reads ARGV into limit, window, cost, mode, now (a.width: bucket_ms)
-- and defines reply(allowed, used, retry_ms, reset_ms).
-- Returns {allowed 0/1, remaining, retry_after_ms (-1: never), reset_after_ms}.
-- With e = now mod window_ms, the window holds ceil(p*(window_ms - e)/window_ms) + c, compared exactly
-- (in integers scaled by window_ms, so limit * window_ms must stay below 2^53).
local key = KEYS[1]
local floor = math.floor
local state = redis.call('HMGET', key, 'now', 'c', 'p')
local newest, current, previous = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
-- A clock that stepped back reads as the newest time seen: nothing is forgotten early.
now = math.max(now, newest or now)
local index = floor(now / window)
if not newest or floor(newest / window) < index - 1 then
  current, previous = 0, 0
elseif floor(newest / window) == index - 1 then
  current, previous = 0, current
end
local elapsed = now - index * window
local function used(c) -- the window's cost, scaled by window_ms
  return previous * (window - elapsed) + c * window
end

local allowed = cost <= limit and used(current + cost) <= limit * window
if mode == 'check' and allowed and cost > 0 then
  current = current + cost
elseif mode == 'refund' then
  local back = math.min(current, cost)
  current, previous, allowed = current - back, math.max(previous - (cost - back), 0), true
end

-- The least elapsed ms at which ceil(count * (window - e) / window) <= at_most (up to window).
local function elapsed_until(count, at_most)
  if count == 0 then return 0 end
  return math.max(window - floor(at_most * window / count), 0)
end
-- Within this window only the previous window's share falls; in the next one this window's
-- cost becomes the previous.
local retry = retry_after(allowed, function()
  local at = current + cost <= limit and elapsed_until(previous, limit - cost - current) or window
  if at < window then
    return math.max(at - elapsed, 0)
  end
  return window - elapsed + elapsed_until(current, limit - cost)
end)

local reset = 0
if current > 0 then
  reset = 2 * window - elapsed
elseif previous > 0 then
  reset = window - elapsed
end
keep_hash(key, reset, allowed, 'now', now, 'c', current, 'p', previous)
return reply(allowed, current + math.ceil(previous * (window - elapsed) / window), retry, reset)
