-- slidewin sliding-counter windows: O(1) memory, the previous fixed window weighted by its
-- overlap, exact like the core's SlidingCounter. Sent after args.lua.
-- Key: a string "<newest time seen> <current window's cost> <previous window's cost>", written
-- with its expiry in one SET. With e = now mod window_ms, the window holds
-- ceil(previous * (window_ms - e) / window_ms) + current. A lost key reads as an empty window.

local counter_assess, counter_finish
if uses_counter then
  -- ceil(a / b) of integers, exact where a / b rounds.
  local function ceil_div(a, b)
    local q = floor(a / b)
    if q * b > a then q = q - 1 end
    return q * b < a and q + 1 or q
  end

  -- As entries_assess: move window `w` to `now`; w.room and, when `cost` does not fit, w.retry.
  counter_assess = function(w, cost)
    local span, limit = w.span, w.limit
    local text = redis.call('GET', w.key)
    local marked, current, previous = nil, 0, 0
    if text then
      local s, c, p = text:match('^(%d+) (%d+) (%d+)$')
      marked, current, previous = tonumber(s), tonumber(c), tonumber(p)
    end
    local now = math.max(now, marked or now)
    local index = floor(now / span)
    if not marked or floor(marked / span) < index - 1 then
      current, previous = 0, 0
    elseif floor(marked / span) == index - 1 then
      current, previous = 0, current
    end
    -- Units recorded (record) still inside the window count at now: a counter has no earlier
    -- place for them.
    for i = 1, record and #record or 0 do
      if record[i].stamp > now - span then w.recorded = w.recorded + record[i].units end
    end
    current = current + w.recorded
    local elapsed = now - index * span
    local room = math.max(limit - current - ceil_div(previous * (span - elapsed), span), 0)
    w.now, w.marked, w.current, w.previous, w.elapsed = now, marked, current, previous, elapsed
    w.room = room
    if cost > room then
      w.retry = -1
      if cost <= limit then
        -- The least elapsed ms at which ceil(count * (span - e) / span) <= at_most (up to span).
        local function elapsed_until(count, at_most)
          if count == 0 then return 0 end
          return math.max(span - floor(at_most * span / count), 0)
        end
        -- Within this window only the previous window's share falls; in the next one this
        -- window's cost becomes the previous.
        local at = current + cost <= limit and elapsed_until(previous, limit - cost - current) or span
        if at < span then
          w.retry = math.max(at - elapsed, 0)
        else
          w.retry = span - elapsed + elapsed_until(current, limit - cost)
        end
      end
    end
  end

  -- As entries_finish: write window `w` back; its reset_after_ms and room after.
  counter_finish = function(w, cost, record)
    local span, current, previous, elapsed = w.span, w.current, w.previous, w.elapsed
    if record then
      current = current + cost
    elseif action == 'refund' then
      -- As the core's unrecord_at: from the fixed window of the stamp (none: the newest time
      -- seen), then the one before; nothing once the stamp's window is no longer counted.
      local ago = stamp and floor(w.now / span) - floor(math.min(stamp, w.now) / span) or 0
      local back = ago == 0 and math.min(current, cost) or 0
      if ago <= 1 then
        current, previous = current - back, math.max(previous - (cost - back), 0)
      end
    elseif action == 'owe' then
      -- As the core's owe_at: into the fixed window of the stamp, the window counting at most
      -- twice the limit given.
      local ago = stamp and floor(w.now / span) - floor(math.min(stamp, w.now) / span) or 0
      local owed = math.min(cost, math.max(2 * w.limit - current - ceil_div(previous * (span - elapsed), span), 0))
      if ago == 0 then current = current + owed elseif ago == 1 then previous = previous + owed end
    end
    local reset = current > 0 and 2 * span - elapsed or previous > 0 and span - elapsed or 0
    if reset == 0 then
      if w.marked then redis.call('DEL', w.key) end
    elseif current ~= w.current or previous ~= w.previous or w.marked ~= w.now or w.recorded > 0 then
      -- Lua writes numbers below 1e14 as integers ("%.14g"), faster than string.format.
      local now = w.now
      local text = now < 1e14 and current < 1e14 and previous < 1e14 and now .. ' ' .. current .. ' ' .. previous
        or string.format('%d %d %d', now, current, previous)
      redis.call('SET', w.key, text, 'PX', reset + slack * span)
    end
    if not amends then return reset, record and w.room - cost or w.room end
    return reset, math.max(w.limit - current - ceil_div(previous * (span - elapsed), span), 0)
  end
end
