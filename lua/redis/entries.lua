-- slidewin log and bucket windows: one string per window, exact like the core's SlidingLog and
-- BucketWindow. Sent after args.lua. The log is the bucket window of 1 ms buckets.
-- A bucket i holding cost (the log: a ms) is its index and the running sum of cost recorded
-- through it, so a bucket's cost is its sum minus the previous one's and the wait of a refusal
-- is a search of the sums. The string: a header of 8 big-endian 64-bit words, then a ring of
-- the buckets but the newest, oldest first from the slot `head`, 14 bytes each (index and sum,
-- 7 bytes each; a sorted-set member took ~110). The header, which one GETRANGE reads and one
-- SETRANGE writes for a call in the newest bucket:
--   capacity head count   the ring (records it has room for, the oldest's slot), the buckets
--   gone                  the running sum through the buckets that left the window
--   now                   the newest time seen
--   oldest newest sum     the oldest and newest bucket, the running sum through the newest
-- A search (the buckets that left, the bucket whose leaving frees enough) reads up to 8
-- records a command, the oldest first: O(log n) commands, one when the oldest answer. The ring
-- is made again, twice as large as its records, when it is full or a quarter full (amortised
-- O(1) a bucket). A key holds at least one bucket, or is gone (empty window; a lost key reads as
-- one). Bucket i covers [i*bucket_ms, (i+1)*bucket_ms) and its cost counts as if all of it
-- arrived at its last ms: it leaves the window at (i+1)*bucket_ms - 1 + window_ms, never early.
-- Indexes and sums stay below 2^53.
-- Leases (rule.lua): a window counts each outstanding lease's units as if recorded at the end
-- of its validity, in that time's bucket, without writing them; a settlement records what was
-- spent at a stamp that may lie ahead of now, in a bucket of its own (or in the newest bucket
-- when that is later: the ring stays ordered, and later is always safe). A stamp ahead never
-- moves the window's now (the newest time seen) forward: that would forget buckets still in it.
-- Units given with `record` go in the same way, at their stamps in the past.
local entries_assess, entries_finish, entries_leaves, entries_lease
if uses_entries then
  local HEADER, RECORD, HEADER_FORMAT, RECORD_FORMAT = 64, 14, '>i8i8i8i8i8i8i8i8', '>I7I7'
  local ceil, pack, unpack_bytes = math.ceil, struct.pack, struct.unpack

  -- Where record j (counted from the oldest) of window `w` starts, in bits.
  local function record_bit(w, j)
    return 8 * (HEADER + RECORD * ((w.head + j) % w.capacity))
  end

  -- The first record j in [lo, hi) whose index (field 1) or sum (field 2) reaches `target`,
  -- with its index and sum; hi and no fields when none does. Also record j - 1's index and sum
  -- when j > lo. Each command reads up to 8 records: lo, then spread up to hi.
  local function search(w, lo, hi, field, target)
    local found, index, sum, before_index, before_sum = hi, nil, nil, nil, nil
    while lo < hi do
      local step, js, read = ceil((hi - lo) / 8), {}, {'BITFIELD_RO', w.key}
      for j = lo, hi - 1, step do
        js[#js + 1] = j
        local bit, n = record_bit(w, j), #read
        read[n + 1], read[n + 2], read[n + 3] = 'GET', 'u56', bit
        read[n + 4], read[n + 5], read[n + 6] = 'GET', 'u56', bit + 56
      end
      local got = redis.call(unpack(read))
      local k = 1
      while k <= #js and got[2 * k - 2 + field] < target do k = k + 1 end
      if k <= #js then found, index, sum, hi = js[k], got[2 * k - 1], got[2 * k], js[k] end
      if k > 1 then lo, before_index, before_sum = js[k - 1] + 1, got[2 * k - 3], got[2 * k - 2] end
    end
    return found, index, sum, before_index, before_sum
  end

  -- Make the ring of window `w` again with room for `capacity` records, the oldest in slot 0
  -- (the header, zeros until then, is written after).
  local function resize(w, capacity)
    local records, live = w.count - 1, ''
    if records > 0 then
      local ring = redis.call('GETRANGE', w.key, HEADER, HEADER + w.capacity * RECORD - 1)
      local from = w.head * RECORD
      live = ring:sub(from + 1, from + records * RECORD)
      live = live .. ring:sub(1, records * RECORD - #live)
    end
    redis.call('SET', w.key, string.rep('\0', HEADER) .. live .. string.rep('\0', (capacity - records) * RECORD))
    w.capacity, w.head, w.header = capacity, 0, false
  end

  -- Make bucket `index`, later than window `w`'s newest, its newest (the newest so far joins the
  -- ring). What is recorded at a time whose bucket is not later goes into the newest bucket:
  -- later is always safe, and the ring stays ordered.
  local function new_bucket(w, index)
    w.moved = true
    local records = w.count -- the ring's, once the newest so far joins it
    if records == 0 then
      w.oldest = index
    else
      if records > w.capacity or 4 * records < w.capacity then
        -- At most one bucket more than a window's length holds cost at once, but for stamps
        -- ahead of now.
        resize(w, math.min(math.max(4, 2 * records), math.max(floor(w.span / w.width), records)))
      end
      redis.call('SETRANGE', w.key, HEADER + RECORD * ((w.head + records - 1) % w.capacity), pack(RECORD_FORMAT, w.newest, w.sum))
    end
    w.count, w.newest = w.count + 1, index
  end

  -- What only a call that counts, settles or records units uses, made only then (rule.lua calls
  -- entries_lease()), in one table: every function is made again on every call, and each one
  -- a window's functions refer to costs them too.
  local leased
  entries_lease = function()
    -- When what window `w` holds at time `stamp` leaves it.
    local function leaves(w, stamp)
      return (floor(stamp / w.width) + 1) * w.width - 1 + w.span
    end
    entries_leaves = leaves

    -- The wait until `need` units of window `w`'s ring left it (nil: it holds fewer).
    local function ring_wait(w, need)
      if need <= 0 then return 0 end
      if need > w.sum - w.gone then return nil end
      local _, index = search(w, 0, w.count - 1, 2, w.gone + need)
      return leaves(w, (index or w.newest) * w.width) - w.now
    end

    leased = {
      leaves = leaves,
      -- Record in window `w` the `settled` units ({units, stamp}, the oldest first) still in it.
      record = function(w, settled)
        local now = w.now
        for i = 1, #settled do
          local t = settled[i]
          if leaves(w, t.stamp) > now then
            local index = floor(t.stamp / w.width)
            if w.count == 0 or index > w.newest then new_bucket(w, index) end
            w.sum = w.sum + t.units
          end
        end
      end,
      -- Count in w.held the units of the `leases` ({units, ends}) window `w` counts.
      hold = function(w, leases)
        for i = 1, #leases do
          local l = leases[i]
          if leaves(w, l.ends) > w.now then w.held = w.held + l.units end
        end
      end,
      -- The wait until `need` units left window `w`, its ring's buckets and the leases it
      -- counts taken together in the order they leave: for each number j of leases gone (the
      -- first j to leave), the later of the j-th one's leaving and the ring's freeing the
      -- rest; the least.
      wait = function(w, need, leases)
        local gone = {}
        for i = 1, #leases do
          local l = leases[i]
          local wait = leaves(w, l.ends) - w.now
          if wait > 0 then gone[#gone + 1] = {wait = wait, units = l.units} end
        end
        table.sort(gone, function(a, b) return a.wait < b.wait end)
        local best, freed = ring_wait(w, need), 0
        for j = 1, #gone do
          if best and gone[j].wait >= best then break end
          freed = freed + gone[j].units
          local rest = ring_wait(w, need - freed)
          if rest then
            rest = math.max(rest, gone[j].wait)
            if not best or rest < best then best = rest end
            if need <= freed then break end
          end
        end
        return best
      end,
    }
  end

  -- Move window `w` to `now` (or the newest time seen), forgetting what left it, and record the
  -- `settled` units ({units, stamp}: settlements, recorded units) still in it; then w.room
  -- (less the units of `leases`, {units, ends}, it counts) and, when `cost` does not fit,
  -- w.retry (the wait; -1: never).
  entries_assess = function(w, cost, leases, settled)
    local key, width, span = w.key, w.width, w.span
    local header = redis.pcall('GETRANGE', key, 0, HEADER - 1)
    if header.err then
      redis.call('DEL', key) -- a key of another layout (an older version's): an empty window
    elseif #header == HEADER then
      w.header = header
      w.capacity, w.head, w.count, w.gone, w.marked, w.oldest, w.newest, w.sum = unpack_bytes(HEADER_FORMAT, header)
    end
    local now = w.marked and math.max(now, w.marked) or now
    local oldest_kept = floor((now - span + 1) / width) -- the oldest bucket still in the window
    if w.count > 0 and w.newest < oldest_kept then
      redis.call('DEL', key)
      w.header, w.capacity, w.head, w.count, w.gone, w.marked, w.newest, w.sum = false, 0, 0, 0, 0, false, false, 0
    elseif w.count > 0 and w.oldest < oldest_kept then
      -- Record 0 left and the newest stays: the first kept is among 1 .. count - 1.
      local kept, oldest, _, _, gone = search(w, 0, w.count - 1, 1, oldest_kept)
      w.head, w.count = (w.head + kept) % w.capacity, w.count - kept
      w.gone, w.oldest = gone, oldest or w.newest
    end
    w.now = now
    if settled then leased.record(w, settled) end
    if leases then leased.hold(w, leases) end
    w.room = math.max(w.limit - (w.sum - w.gone) - w.held, 0)
    if cost > w.room then
      w.retry = -1
      if cost <= w.limit then
        local need = w.sum - w.gone + w.held + cost - w.limit
        if leases then
          w.retry = leased.wait(w, need, leases)
        else
          -- The first bucket whose leaving frees enough: its sum reaches gone + need.
          local _, index = search(w, 0, w.count - 1, 2, w.gone + need)
          w.retry = ((index or w.newest) + 1) * width - 1 + span - now
        end
      end
    end
  end

  -- Give back up to `cost` recorded in the bucket of time `stamp` or before it (nil: the newest
  -- bucket), the newest first, as the core's unrecord_at: the buckets up to the stamp's are
  -- capped at the target sum (the first above it keeps what is left, those after it nothing)
  -- and the later ones keep their cost. The buckets that keep nothing at the end go; the ones
  -- between stay, holding nothing, until they leave. The fewer records change: the later ones
  -- lower their sums, or the earlier ones and `gone` raise theirs (one BITFIELD command per
  -- 250 records).
  local function entries_give_back(w, cost, stamp)
    if w.sum == w.gone then return end
    local last, through = w.count - 1, w.sum -- the newest bucket up to the stamp, its sum
    if stamp and floor(stamp / w.width) < w.newest then
      local after, _, _, _, before_sum = search(w, 0, w.count - 1, 1, floor(stamp / w.width) + 1)
      if after == 0 then return end -- the stamp's bucket left the window
      last, through = after - 1, before_sum
    end
    local given = math.min(cost, through - w.gone)
    if given == 0 then return end
    local target = through - given
    -- The first bucket that reaches the target (`last` does): it keeps target less its
    -- predecessor's sum, those after it up to `last` nothing.
    local first, index = search(w, 0, last, 2, target)
    if last == w.count - 1 then
      -- The newest bucket goes down: only the header changes (none left: the key goes).
      w.count, w.newest, w.sum = first + 1, index or w.newest, target
      return
    end
    local raise = last + 1 < w.count - 1 - first
    local ops = {}
    local function set(j, op, value)
      local n = #ops
      ops[n + 1], ops[n + 2], ops[n + 3], ops[n + 4] = op, 'u56', record_bit(w, j) + 56, value
    end
    for j = first, last do set(j, 'SET', raise and through or target) end
    if raise then
      for j = 0, first - 1 do set(j, 'INCRBY', given) end
      w.gone = w.gone + given
    else
      for j = last + 1, w.count - 2 do set(j, 'INCRBY', -given) end
      w.sum = w.sum - given
    end
    for i = 1, #ops, 1000 do
      redis.call('BITFIELD', w.key, unpack(ops, i, math.min(i + 999, #ops)))
    end
  end

  -- Record `cost` (cut so the window counts at most twice its limit) as the core's owe_at:
  -- into the oldest bucket holding cost from the one of time `stamp` on (a reservation's),
  -- else the newest; a bucket of its own in an empty window; nothing once the stamp's bucket
  -- left the window. The records from that bucket on raise their sums. Made only for action
  -- owe: every function is made again on every call.
  local entries_owe = action == 'owe' and function(w, cost, stamp)
    stamp = math.min(stamp, w.now)
    local index = floor(stamp / w.width)
    cost = math.min(cost, math.max(2 * w.limit - (w.sum - w.gone), 0))
    if cost == 0 or (index + 1) * w.width - 1 + w.span <= w.now then return end
    if w.count == 0 then
      new_bucket(w, index)
    elseif index < w.newest then
      -- The first record from the stamp's bucket on that holds cost: its sum is above the
      -- sum before that bucket (records emptied by give-backs stay until they leave).
      local from, _, _, _, before_sum = search(w, 0, w.count - 1, 1, index)
      local first = search(w, from, w.count - 1, 2, (before_sum or w.gone) + 1)
      local ops = {}
      for j = first, w.count - 2 do
        local n = #ops
        ops[n + 1], ops[n + 2], ops[n + 3], ops[n + 4] = 'INCRBY', 'u56', record_bit(w, j) + 56, cost
      end
      for i = 1, #ops, 1000 do
        redis.call('BITFIELD', w.key, unpack(ops, i, math.min(i + 999, #ops)))
      end
    end
    w.sum = w.sum + cost
  end

  -- Write window `w` back, recording `cost` when `record`; its reset_after_ms (when what it
  -- holds, `leases` too, has left) and room after.
  entries_finish = function(w, cost, record, leases)
    local key, width, span, now = w.key, w.width, w.span, w.now
    if record and cost > 0 then
      -- A check with ahead_ms: a grant of its cost spent at once, stamped at the end of its
      -- validity (ahead of now, like a settled stamp: the newest bucket when that is later).
      local current = floor((now + ahead) / width)
      -- (The newest bucket, the common case, is a single test.)
      if current ~= w.newest and (w.count == 0 or current > w.newest) then new_bucket(w, current) end
      w.sum = w.sum + cost
    elseif action == 'refund' then
      entries_give_back(w, cost, stamp)
      w.moved = true
    elseif action == 'owe' then
      entries_owe(w, cost, stamp or now)
    end
    local reset, room = 0, w.limit
    if w.sum == w.gone then
      if w.marked then redis.call('DEL', key) end
    else
      local header = pack(HEADER_FORMAT, w.capacity, w.head, w.count, w.gone, now, w.oldest, w.newest, w.sum)
      if header ~= w.header then redis.call('SETRANGE', key, 0, header) end
      reset = (w.newest + 1) * width - 1 + span - now
      -- The key's expiry moves only when its newest bucket does.
      if w.moved then redis.call('PEXPIRE', key, reset + slack * span) end
      room = math.max(w.limit - (w.sum - w.gone), 0)
    end
    if leases then
      for i = 1, #leases do
        reset = math.max(reset, leased.leaves(w, leases[i].ends) - now)
      end
      room = math.max(room - w.held, 0)
    end
    return reset, room
  end
end
