-- slidewin log and bucket windows: one sorted set per window, exact like the core's SlidingLog
-- and BucketWindow. Sent after args.lua. The log is the bucket window of 1 ms buckets.
-- Members: a bucket index i (the log: the ms) holding cost, scored by the running sum of cost
-- recorded through it (so a bucket's cost is its score minus the previous one's, and the wait
-- for a refusal is one ZRANGEBYSCORE); above every sum (below MARKS), three marks:
--   "g" MARKS + gone     the running sum through the buckets that left the window
--   "o" 2 MARKS + i      the oldest bucket kept
--   "n" 4 MARKS + t      the newest time seen
-- so that one ZREVRANGE reads the marks and the newest bucket. A key holds its marks and at
-- least one bucket, or is gone (empty window; a lost key reads as one). Bucket i covers
-- [i*bucket_ms, (i+1)*bucket_ms) and its cost counts as if all of it arrived at its last ms: it
-- leaves the window at (i+1)*bucket_ms - 1 + window_ms, never early. Sums stay below 2^50.
local entries_assess, entries_finish
if uses_entries then
  local MARKS = 2 ^ 50

  -- The newest bucket that left (its sum is the new gone) and the oldest kept, the newest bucket
  -- `newest` being kept: among the first three, else a binary search of ranks.
  local function entries_front(key, oldest_kept, newest)
    local front = redis.call('ZRANGE', key, 0, 2, 'WITHSCORES')
    local gone, at = nil, 1
    while at < #front and tonumber(front[at]) < oldest_kept do gone, at = tonumber(front[at + 1]), at + 2 end
    if front[at] then return gone, tonumber(front[at]) end
    local rank, inside, oldest = 2, redis.call('ZCARD', key) - 4, newest
    while inside - rank > 1 do
      local mid = floor((rank + inside) / 2)
      local e = redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')
      if tonumber(e[1]) < oldest_kept then rank, gone = mid, tonumber(e[2]) else inside, oldest = mid, tonumber(e[1]) end
    end
    return gone, oldest
  end

  -- Move window `w` to `now` (or the newest time seen), forgetting what left it; then w.room and,
  -- when `cost` does not fit, w.retry (the wait; -1: never). w.oldest: the marks g and o to write.
  entries_assess = function(w, cost)
    local key, width, span = w.key, w.width, w.span
    local back = redis.call('ZREVRANGE', key, 0, 3, 'WITHSCORES')
    local now, marked, newest, sum, gone, oldest = now, nil, nil, 0, 0, nil
    if back[1] then
      marked = tonumber(back[2]) - 4 * MARKS
      now = math.max(now, marked)
      oldest, gone = tonumber(back[4]) - 2 * MARKS, tonumber(back[6]) - MARKS
      newest, sum = tonumber(back[7]), tonumber(back[8])
    end
    local oldest_kept = floor((now - span + 1) / width) -- the oldest bucket still in the window
    if newest and newest < oldest_kept then
      redis.call('DEL', key)
      newest, sum, gone, marked = nil, 0, 0, nil
    elseif newest and oldest < oldest_kept then
      gone, oldest = entries_front(key, oldest_kept, newest)
      redis.call('ZREMRANGEBYSCORE', key, '-inf', gone)
      w.oldest = oldest
    end
    w.now, w.marked, w.newest, w.sum, w.gone = now, marked, newest, sum, gone
    local used = sum - gone
    w.room = math.max(w.limit - used, 0)
    if cost > w.room then
      w.retry = -1
      if cost <= w.limit then
        -- The first bucket whose leaving frees enough: its score reaches gone + need.
        local at = redis.call('ZRANGEBYSCORE', key, sum + cost - w.limit, sum, 'LIMIT', 0, 1)
        w.retry = (tonumber(at[1]) + 1) * width - 1 + span - now
      end
    end
  end

  -- Give `cost` back from the newest buckets: drop those whose predecessor already reaches the
  -- target sum, then lower the newest one left to it (the oldest bucket stays).
  local function entries_refund(w, cost)
    local key, target = w.key, math.max(w.sum - cost, w.gone)
    if target > w.gone and target < w.sum then
      local cut = redis.call('ZRANGEBYSCORE', key, '(' .. target, w.sum, 'LIMIT', 0, 1)[1]
      local reached = redis.call('ZCOUNT', key, target, target) > 0
      redis.call('ZREMRANGEBYSCORE', key, '(' .. target, w.sum)
      if not reached then redis.call('ZADD', key, target, cut) end
      w.newest = tonumber(redis.call('ZREVRANGEBYSCORE', key, target, '-inf', 'LIMIT', 0, 1)[1])
    end
    w.sum = target
  end

  -- Write window `w` back, recording `cost` when `record`; its reset_after_ms and room after.
  entries_finish = function(w, cost, record)
    local key, width, span, now = w.key, w.width, w.span, w.now
    local moved, recorded = false, record and cost > 0
    if recorded then
      local current = floor(now / width)
      moved = current ~= w.newest
      if not w.newest then w.oldest = current end -- a window starting: every mark
      w.newest, w.sum = current, w.sum + cost
    elseif mode == 'refund' then
      entries_refund(w, cost)
      moved = true
    end
    if w.sum == w.gone then
      if w.marked then redis.call('DEL', key) end
      return 0, w.limit
    end
    -- One ZADD: the recorded bucket and the marks that moved.
    if w.oldest then
      local zadd = {'ZADD', key, MARKS + w.gone, 'g', 2 * MARKS + w.oldest, 'o', 4 * MARKS + now, 'n'}
      if recorded then zadd[9], zadd[10] = w.sum, w.newest end
      redis.call(unpack(zadd))
    elseif recorded and w.marked == now then
      redis.call('ZADD', key, w.sum, w.newest)
    elseif recorded then
      redis.call('ZADD', key, w.sum, w.newest, 4 * MARKS + now, 'n')
    elseif w.marked ~= now then
      redis.call('ZADD', key, 4 * MARKS + now, 'n')
    end
    local reset = (w.newest + 1) * width - 1 + span - now
    -- The key's expiry moves only when its newest bucket does.
    if moved then redis.call('PEXPIRE', key, reset + slack * span) end
    return reset, math.max(w.limit - (w.sum - w.gone), 0)
  end
end
