-- slidewin bucket window: costs summed per bucket of bucket_ms; memory O(window / bucket) per key.
-- KEYS[1] hash: the buckets holding cost, oldest first, as a dense array: field k (lo..hi) =
--         "<bucket index - b>:<running sum>", the running sum being the cost recorded through
--         that bucket since the key was created (so a bucket's cost is its sum minus the previous
--         one's, as in log.lua), "b" the bucket index before the key's first (short values keep
--         the hash small). Plus "g" (the running sum before bucket lo: cost that left the
--         window), "s" (the running sum through bucket hi), "lo", "hi", "o" and "n" (the indexes
--         of buckets lo and hi) and "now" (the newest time seen). One key: Cluster-safe.
--         Each lookup (the buckets that left the window, the bucket whose leaving frees enough
--         for a refused cost, where a refund stops) is a binary search: O(log buckets) fields.
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
local floor, format = math.floor, string.format
local state = redis.call('HMGET', key, 'g', 's', 'lo', 'hi', 'o', 'n', 'now', 'b')
local gone, sum = tonumber(state[1]) or 0, tonumber(state[2]) or 0
local lo, hi, oldest, newest = tonumber(state[3]), tonumber(state[4]), tonumber(state[5]), tonumber(state[6])
local base = tonumber(state[8])
-- A clock that stepped back reads as the newest time seen: nothing is forgotten early.
now = math.max(now, tonumber(state[7]) or now)
local current = floor(now / width)
local first = floor((now - window + 1) / width) -- the oldest bucket still in the window

-- Entry k of the array: its bucket index and running sum.
local function entry(k)
  local value = redis.call('HGET', key, format('%d', k))
  local colon = value:find(':', 1, true)
  return base + tonumber(value:sub(1, colon - 1)), tonumber(value:sub(colon + 1))
end
local function set_entry(k, index, through)
  redis.call('HSET', key, format('%d', k), format('%d:%d', index - base, through))
end
-- The first k in [from, to] whose entry passes `test(index, through)` (which, once true, stays
-- true up the array), or to + 1 when none does: callers pass `to` one below an entry known to
-- pass. Every entry holds cost >= 1 and a bucket index above the previous one, which bounds
-- where the answer can be: a search reads O(log min(buckets, cost)) fields.
local function search(from, to, test)
  while from <= to do
    local mid = floor((from + to) / 2)
    if test(entry(mid)) then to = mid - 1 else from = mid + 1 end
  end
  return from
end
-- Drop entries from..to (unpack is limited to a few thousand values: in chunks).
local function drop(from, to)
  for i = from, to, 1000 do
    local names = {}
    for k = i, math.min(i + 999, to) do names[#names + 1] = format('%d', k) end
    redis.call('HDEL', key, unpack(names))
  end
end

-- Drop buckets that left the window; the newest of them holds the sum they took away.
if sum > gone and newest < first then
  redis.call('DEL', key)
  gone, sum = 0, 0
elseif sum > gone and oldest < first then
  -- Entry lo + (first - oldest) has an index >= first.
  local kept = search(lo, math.min(hi, lo + first - oldest) - 1, function(index) return index >= first end)
  gone = select(2, entry(kept - 1))
  drop(lo, kept - 1)
  lo, oldest = kept, entry(kept)
end
if sum == gone then lo, hi, oldest, newest, base = nil, nil, nil, nil, nil end

local allowed = cost <= limit and sum - gone + cost <= limit
if mode == 'check' and allowed and cost > 0 then
  sum = sum + cost
  if newest ~= current then
    base = base or current - 1
    hi, newest = (hi or 0) + 1, current
    lo, oldest = lo or hi, oldest or current
  end
  set_entry(hi, current, sum)
elseif mode == 'refund' then
  -- Give back from the newest buckets: drop those whose predecessor already reaches the
  -- target sum, then lower the newest one left to it.
  local target = math.max(sum - cost, gone)
  if sum > target then
    -- Entry hi is above the target; the cut is within sum - target entries of it.
    local cut = search(math.max(lo, hi - (sum - target) + 1), hi - 1, function(_, through) return through > target end)
    local before = cut > lo and select(2, entry(cut - 1)) or gone
    if before < target then
      set_entry(cut, entry(cut), target)
      cut = cut + 1
    end
    drop(cut, hi)
    hi = cut - 1
    newest = hi >= lo and entry(hi) or nil
  end
  sum = target
  allowed = true
end
if sum == gone then lo, hi, oldest, newest = nil, nil, nil, nil end

-- The wait until enough of the oldest buckets leave the window for `cost` to fit.
local retry = retry_after(allowed, function()
  local need = sum - gone + cost - limit -- <= sum - gone: entry hi frees enough, and so does lo + need - 1
  local k = search(lo, math.min(hi, lo + need - 1) - 1, function(_, through) return through - gone >= need end)
  return (entry(k) + 1) * width - 1 + window - now
end)

-- A bucket that holds cost has its last ms after now - window, so reset > 0 exactly then.
local reset = sum > gone and (newest + 1) * width - 1 + window - now or 0
if reset > 0 then
  keep_hash(key, reset, allowed, 'g', gone, 's', sum, 'lo', lo, 'hi', hi, 'o', oldest, 'n', newest, 'now', now, 'b', base)
else
  keep_hash(key, reset, allowed)
end
return reply(allowed, sum - gone, retry, reset)
