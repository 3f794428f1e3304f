-- slidewin bucket window: costs summed per bucket of bucket_ms; memory O(window / bucket) per key.
-- KEYS[1] hash: field <bucket index> = cost recorded in that bucket, plus "t" (the total of
--         those costs), "o" (oldest bucket index kept), "n" (newest) and "now" (the newest time
--         seen). One key: Cluster-safe.
-- ARGV: limit window_ms cost bucket_ms N [now_ms N] [mode check|peek|refund]
-- Sent after args.lua: it reads ARGV into limit, window, cost, mode, now (a.width: bucket_ms)
-- and defines reply(allowed, used, retry_ms, reset_ms).
-- Returns {allowed 0/1, remaining, retry_after_ms (-1: never), reset_after_ms}.
-- Bucket i covers [i*bucket_ms, (i+1)*bucket_ms); its cost counts as if it all arrived at the
-- bucket's last ms, so it leaves the window at (i+1)*bucket_ms - 1 + window_ms: never early, so
-- no interval of window_ms ever admits more than limit (as the core's BucketWindow).
local width = a.width
if not width then return redis.error_reply('ERR bucket_ms must be a positive integer, got nil') end
if window % width ~= 0 then
  return redis.error_reply('ERR bucket_ms must be a divisor of window_ms, got ' .. width)
elseif window / width > 65536 then
  return redis.error_reply('ERR bucket_ms must be at least window_ms / 65536, got ' .. width)
end
local key = KEYS[1]
local floor = math.floor
local state = redis.call('HMGET', key, 't', 'o', 'n', 'now')
local total, oldest, newest = tonumber(state[1]) or 0, tonumber(state[2]), tonumber(state[3])
-- A clock that stepped back reads as the newest time seen: nothing is forgotten early.
now = math.max(now, tonumber(state[4]) or now)
local current = floor(now / width)
local first = floor((now - window + 1) / width) -- the oldest bucket still in the window

-- Field names of buckets lo..hi, and their counts (missing buckets count 0).
local function fields(lo, hi)
  local names = {}
  for i = lo, hi do names[#names + 1] = string.format('%d', i) end
  return names
end
-- `command` on the fields in chunks (unpack is limited to a few thousand values); its replies.
local function each_chunk(command, names)
  local replies = {}
  for i = 1, #names, 1000 do
    local reply = redis.call(command, key, unpack(names, i, math.min(i + 999, #names)))
    if type(reply) == 'table' then
      for _, v in ipairs(reply) do replies[#replies + 1] = v end
    end
  end
  return replies
end
local function counts(names)
  local values = each_chunk('HMGET', names)
  for i = 1, #names do values[i] = tonumber(values[i]) or 0 end
  return values
end

-- Drop buckets that left the window, subtracting their counts from the total.
if total > 0 and newest < first then
  redis.call('DEL', key)
  total, oldest, newest = 0, nil, nil
elseif total > 0 and oldest < first then
  local names = fields(oldest, first - 1)
  for _, c in ipairs(counts(names)) do total = total - c end
  each_chunk('HDEL', names)
  oldest = first
end

local allowed = cost <= limit and total + cost <= limit
if mode == 'check' and allowed and cost > 0 then
  redis.call('HINCRBY', key, string.format('%d', current), cost)
  total = total + cost
  oldest, newest = math.min(oldest or current, current), math.max(newest or current, current)
elseif mode == 'refund' then
  -- Give back from the newest buckets.
  local names = total > 0 and fields(oldest, newest) or {}
  local values, left = counts(names), cost
  for i = #names, 1, -1 do
    local take = math.min(values[i], left)
    if take > 0 then
      if take == values[i] then redis.call('HDEL', key, names[i]) else redis.call('HINCRBY', key, names[i], -take) end
      left, total = left - take, total - take
    end
    if values[i] > take then break end
    newest = oldest + i - 2
  end
  allowed = true
end

-- The wait until enough of the oldest buckets leave the window for `cost` to fit.
local retry = retry_after(allowed, function()
  local need, freed = total + cost - limit, 0
  for i, c in ipairs(counts(fields(oldest, newest))) do
    freed = freed + c
    if freed >= need then return (oldest + i) * width - 1 + window - now end
  end
  return -1
end)

-- A bucket that holds cost has its last ms after now - window, so reset > 0 exactly then.
local reset = total > 0 and (newest + 1) * width - 1 + window - now or 0
keep_hash(key, reset, allowed, 't', total, 'o', oldest, 'n', newest, 'now', now)
return reply(allowed, total, retry, reset)
