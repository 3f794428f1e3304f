-- slidewin sliding log: exact, one sorted-set member per admitted call.
-- KEYS[1] sorted set: score = the time in ms, member = the running sum of cost admitted through
--         that entry (so members are unique even for many calls in one ms, and an entry's cost
--         is its sum minus the previous entry's).
-- KEYS[2] hash: "gone" (the running sum before the oldest entry), "sum" (the newest entry's),
--         "first" and "last" (the oldest and newest entries' times), "now" (the newest time seen).
--         Give both keys one hash tag ("rl:{user1}", "rl:{user1}:m") so they share a Cluster slot.
-- ARGV: limit window_ms cost [now_ms N] [mode check|peek|refund]
-- Sent after args.lua: it reads ARGV into limit, window, cost, mode, now (a.width: bucket_ms)
-- and defines reply(allowed, used, retry_ms, reset_ms).
-- Returns {allowed 0/1, remaining, retry_after_ms (-1: never), reset_after_ms}.
-- An entry recorded at t counts while now - t < window_ms; time is Redis TIME unless now_ms is given.
local log, meta = KEYS[1], KEYS[2]
-- Members of one score are ordered as strings and must be in sum order: the digits follow a
-- letter for their count ("c150" < "d1000"), which keeps members short and in order.
local function member(sum)
  local digits = string.format('%d', sum)
  return string.char(96 + #digits) .. digits
end
local function through(member) return tonumber(member:sub(2)) end

local state = redis.call('HMGET', meta, 'gone', 'sum', 'now', 'first', 'last')
local gone, sum, first, last = tonumber(state[1]) or 0, tonumber(state[2]) or 0, tonumber(state[4]), tonumber(state[5])
-- Either key may go alone (a DEL, or eviction under maxmemory): what is left of a state reads
-- as an empty window, never as an error. A sorted set without its hash is dropped (its members
-- would collide with new ones); a hash whose entries are gone starts over.
if not state[2] then
  redis.call('DEL', log)
elseif sum > gone and redis.call('EXISTS', log) == 0 then
  gone, sum, first, last = 0, 0, nil, nil
end
-- A clock that stepped back reads as the newest time seen: nothing is forgotten early.
now = math.max(now, tonumber(state[3]) or now)
-- Forget entries that left the window (only when the oldest has: most calls touch nothing);
-- the newest of them holds the sum they took away.
if sum > gone and first <= now - window then
  gone = through(redis.call('ZREVRANGEBYSCORE', log, now - window, '-inf', 'LIMIT', 0, 1)[1])
  redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window)
  first = sum > gone and tonumber(redis.call('ZRANGE', log, 0, 0, 'WITHSCORES')[2]) or nil
end

local allowed = cost <= limit and sum - gone + cost <= limit
if mode == 'check' and allowed and cost > 0 then
  sum, first, last = sum + cost, first or now, now
  redis.call('ZADD', log, now, member(sum))
elseif mode == 'refund' then
  -- Give back from the newest entries: drop those whose predecessor already reaches the
  -- target sum, then lower the newest one left to it.
  local target = math.max(sum - cost, gone)
  local newest = redis.call('ZREVRANGE', log, 0, cost, 'WITHSCORES')
  for i = 1, #newest, 2 do
    local before = newest[i + 2] and through(newest[i + 2]) or gone
    redis.call('ZREM', log, newest[i])
    if before < target then
      redis.call('ZADD', log, newest[i + 1], member(target))
      break
    end
  end
  sum = target
  last = sum > gone and tonumber(redis.call('ZRANGE', log, -1, -1, 'WITHSCORES')[2]) or nil
  allowed = true
end

-- The wait until enough of the oldest entries expire for `cost` to fit.
local retry = retry_after(allowed, function()
  local need = sum - gone + cost - limit
  local oldest = redis.call('ZRANGE', log, 0, need - 1, 'WITHSCORES')
  for i = 1, #oldest, 2 do
    if through(oldest[i]) - gone >= need then return tonumber(oldest[i + 1]) + window - now end
  end
  return -1
end)

local reset = 0
if sum > gone then
  reset = last + window - now
  redis.call('HSET', meta, 'gone', gone, 'sum', sum, 'now', now, 'first', first, 'last', last)
  if last == now or mode == 'refund' then -- the keys' expiry moves only when entries change
    redis.call('PEXPIRE', log, reset + ttl_slack)
    redis.call('PEXPIRE', meta, reset + ttl_slack)
  end
else
  redis.call('DEL', log, meta)
end
return reply(allowed, sum - gone, retry, reset)
