-- slidewin log and bucket windows: one sorted set per window, exact like the core's SlidingLog
-- and BucketWindow. Sent after args.lua. The log is the bucket window of 1 ms buckets.
-- Members: a bucket index i (the log: the ms) holding cost, scored by the running sum of cost
-- recorded through it (so a bucket's cost is its score minus the previous one's, the window's
-- total is the newest score minus "gone", and the wait for a refusal is one ZRANGEBYSCORE);
-- the newest bucket that left the window stays as the first member, its score being "gone";
-- member "n" scores -1 - (the newest time seen). Bucket i covers [i*bucket_ms, (i+1)*bucket_ms)
-- and its cost counts as if all of it arrived at its last ms: it leaves the window at
-- (i+1)*bucket_ms - 1 + window_ms, never early. A lost key reads as an empty window.

-- Move window `w` to `now` (or the newest time seen), forgetting what left it; then w.room and,
-- when `cost` does not fit, w.retry (the wait; -1: never).
local function entries_assess(w, cost)
  local key, width, span = w.key, w.width, w.span
  -- The newest time seen and the first three buckets; the newest too when there are more.
  local front = redis.call('ZRANGE', key, 0, 3, 'WITHSCORES')
  local n, first, now, marked = #front, 1, now, nil
  if front[1] == 'n' then
    marked, first = -1 - tonumber(front[2]), 3
    now = math.max(now, marked)
  end
  local newest, sum, gone = nil, 0, 0
  if n == 8 then
    local back = redis.call('ZREVRANGE', key, 0, 0, 'WITHSCORES')
    newest, sum = tonumber(back[1]), tonumber(back[2])
  elseif n > first then
    newest, sum = tonumber(front[n - 1]), tonumber(front[n])
  end
  local oldest_kept = floor((now - span + 1) / width) -- the oldest bucket still in the window
  if newest and newest < oldest_kept then
    redis.call('DEL', key)
    newest, sum, n, marked = nil, 0, 0, nil
  elseif newest then
    -- The newest bucket that left: among the first ones, else a binary search of ranks.
    local left, at = nil, first
    while at < n and tonumber(front[at]) < oldest_kept do left, at = at, at + 2 end
    if left then
      local rank = (left - 1) / 2
      gone = tonumber(front[left + 1])
      if at > n then -- every bucket read has left, and the newest has not
        local inside = redis.call('ZCARD', key) - 1
        while inside - rank > 1 do
          local mid = floor((rank + inside) / 2)
          local e = redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')
          if tonumber(e[1]) < oldest_kept then rank, gone = mid, tonumber(e[2]) else inside = mid end
        end
      end
      if rank > (first - 1) / 2 then redis.call('ZREMRANGEBYSCORE', key, 0, '(' .. gone) end
    end
  end
  w.now, w.marked, w.stored, w.newest, w.sum, w.gone = now, marked, n > 0, newest, sum, gone
  local used = sum - gone
  w.room = math.max(w.limit - used, 0)
  if cost > w.room then
    w.retry = -1
    if cost <= w.limit then
      -- The first bucket whose leaving frees enough: its score reaches gone + need.
      local at = redis.call('ZRANGEBYSCORE', key, gone + used + cost - w.limit, '+inf', 'LIMIT', 0, 1)
      w.retry = (tonumber(at[1]) + 1) * width - 1 + span - now
    end
  end
end

-- Give `cost` back from the newest buckets: drop those whose predecessor already reaches the
-- target sum, then lower the newest one left to it.
local function entries_refund(w, cost)
  local key, target = w.key, math.max(w.sum - cost, w.gone)
  if target > w.gone and target < w.sum then
    local cut = redis.call('ZRANGEBYSCORE', key, '(' .. target, '+inf', 'LIMIT', 0, 1)[1]
    local reached = redis.call('ZCOUNT', key, target, target) > 0
    redis.call('ZREMRANGEBYSCORE', key, '(' .. target, '+inf')
    if not reached then redis.call('ZADD', key, target, cut) end
    w.newest = tonumber(redis.call('ZREVRANGE', key, 0, 0)[1])
  end
  w.sum = target
end

-- Write window `w` back, recording `cost` when `record`; its reset_after_ms and room after.
local function entries_finish(w, cost, record)
  local key, width, span, now = w.key, w.width, w.span, w.now
  local moved, marked = false, w.marked == now
  if record and cost > 0 then
    local current = floor(now / width)
    moved = current ~= w.newest
    w.newest, w.sum = current, w.sum + cost
    if marked then
      redis.call('ZADD', key, w.sum, current)
    else
      marked = true
      redis.call('ZADD', key, w.sum, current, -1 - now, 'n')
    end
  elseif mode == 'refund' then
    entries_refund(w, cost)
    moved = true
  end
  if w.sum == w.gone then
    if w.stored then redis.call('DEL', key) end
    return 0, w.limit
  end
  local reset = (w.newest + 1) * width - 1 + span - now
  -- The key's expiry moves only when its newest bucket does.
  if moved then redis.call('PEXPIRE', key, reset + slack * span) end
  if not marked then redis.call('ZADD', key, -1 - now, 'n') end
  return reset, math.max(w.limit - (w.sum - w.gone), 0)
end
