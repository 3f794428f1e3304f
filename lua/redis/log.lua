-- slidewin sliding log: exact, one sorted-set member per admitted call.
-- KEYS[1] sorted set: member "seq" (cost 1) or "seq:cost", score = time in ms.
-- KEYS[2] hash: "seq" (per-key sequence, so members never collide), "total" (sum of costs),
--         "last" (the newest entry's time) and "now" (the newest time seen).
--         Give both keys one hash tag ("rl:{user1}", "rl:{user1}:m") so they share a Cluster slot.
-- ARGV: limit window_ms cost [now_ms N] [mode check|peek|refund]
-- Sent after args.lua, which reads ARGV into limit, window, cost, mode and now (a.width: bucket_ms).
-- Returns {allowed 0/1, remaining, retry_after_ms (-1: never), reset_after_ms}.
-- An entry recorded at t counts while now - t < window_ms; time is Redis TIME unless now_ms is given.
local log, meta = KEYS[1], KEYS[2]
local function member_cost(member)
  return tonumber(member:match(':(%d+)$')) or 1
end
local function member(seq, c)
  return c == 1 and tostring(seq) or seq .. ':' .. c
end

-- Forget entries that left the window, keeping the total exact.
local state = redis.call('HMGET', meta, 'total', 'now', 'last')
local total, last = tonumber(state[1]) or 0, tonumber(state[3])
-- A clock that stepped back reads as the newest time seen: nothing is forgotten early.
now = math.max(now, tonumber(state[2]) or now)
if total > 0 then
  local expired = redis.call('ZRANGEBYSCORE', log, '-inf', now - window)
  for _, m in ipairs(expired) do total = total - member_cost(m) end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window) end
end

local allowed = cost <= limit and total + cost <= limit
if mode == 'check' and allowed and cost > 0 then
  redis.call('ZADD', log, now, member(redis.call('HINCRBY', meta, 'seq', 1), cost))
  total, last = total + cost, now
elseif mode == 'refund' then
  -- Give back from the newest entries; at most `cost` members hold `cost`.
  local left = cost
  local newest = cost > 0 and redis.call('ZREVRANGE', log, 0, cost - 1, 'WITHSCORES') or {}
  for i = 1, #newest, 2 do
    if left == 0 then break end
    local m, c = newest[i], member_cost(newest[i])
    redis.call('ZREM', log, m)
    if c > left then
      redis.call('ZADD', log, newest[i + 1], member(m:match('^%d+'), c - left))
      c = left
    end
    left, total = left - c, total - c
  end
  last = total > 0 and tonumber(redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')[2]) or nil
  allowed = true
end

local retry = 0
if not allowed then
  retry = -1
  if cost <= limit then
    -- The wait until enough of the oldest entries expire for `cost` to fit.
    local need, freed = total + cost - limit, 0
    local oldest = redis.call('ZRANGE', log, 0, need - 1, 'WITHSCORES')
    for i = 1, #oldest, 2 do
      freed = freed + member_cost(oldest[i])
      if freed >= need then retry = tonumber(oldest[i + 1]) + window - now break end
    end
  end
end

local reset = 0
if total > 0 then
  reset = last + window - now
  redis.call('HSET', meta, 'total', total, 'now', now, 'last', last)
  if last == now or mode == 'refund' then -- the keys' expiry moves only when entries change
    redis.call('PEXPIRE', log, reset + ttl_slack)
    redis.call('PEXPIRE', meta, reset + ttl_slack)
  end
else
  redis.call('DEL', log, meta)
end
local remaining = math.max(limit - total, 0)
if mode == 'peek' and allowed then remaining = remaining - cost end -- as if recorded
return {allowed and 1 or 0, remaining, retry, reset}
