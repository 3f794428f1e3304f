-- slidewin: the decision of a rule over all its windows, as the core's rule decides it, and
-- leases of a rule's units. Sent last, after args.lua, entries.lua and counter.lua.
-- Admitted only when every window admits; a refusal records nothing in any window. Returns
-- {allowed 0/1, remaining, retry_after_ms, reset_after_ms, window}: remaining the least over
-- the windows; window (1-based) the one the answer describes: when refused, the refusing
-- window with the longest wait (retry_after_ms: its wait, -1 when some window can never fit
-- the cost), when admitted (or amended: refund, owe) the one with the least room (ties: the
-- lower index);
-- reset_after_ms that window's. A peek reports what would remain once its cost is recorded.
-- An admitted check's reply has a sixth field: stamp_ms, the time its cost was recorded at
-- (now, or now + ahead_ms), which a refund with stamp_ms gives back at (a reservation's).
--
-- Leases (the lease hash given, log and bucket windows only): the hash holds a field per
-- outstanding grant, id -> "units granted_ms validity_ms". Every action counts each grant's
-- units in every window as if spent at the end of its validity, granted_ms + validity_ms: the
-- holder spends them no later (docs/leases.md has the proof that no window then goes over its
-- limit). First the settlements: a grant settled with SPENT units and LAST_MS (the offset of
-- its last spend) leaves the hash and its SPENT units are recorded at granted_ms +
-- min(LAST_MS, validity_ms), no earlier than they were spent; an id not in the hash was settled
-- already (or never granted): nothing happens. A grant no window counts any more (its holder
-- never settled it) leaves the hash too. Then `action lease` grants, when max(cost, 1) fits
-- in every window,
--   granted = min(want, max(max(cost, 1), floor(room / (2 * (holders + 1)))))
-- with room the least room over the windows and holders the grants still spendable: each
-- grant takes at most half an equal share of what is left among its holders and this one, so
-- a key's room goes out in shrinking leases and, near the limit, a unit at a time. Its reply:
-- {granted (0: refused), remaining, retry_after_ms (when max(cost, 1) fits; 0 when granted),
-- reset_after_ms, window}. A retried call (its id in the hash) answers that grant again.
-- A check with ahead_ms V is a grant of its cost spent at once: its cost is recorded in every
-- window at now + V, the end of that grant's validity, with nothing in the hash and nothing to
-- settle (a node asking for its cost alone: a cold key, one call per request).
--
-- `record` (any action, with or without the lease hash): units admitted elsewhere (a node's
-- fallback while Redis could not answer) are recorded in every window before the action
-- decides, unconditionally (over the limit too): in a log or bucket window at now - AGE_MS,
-- like a settlement (in the newest bucket when that is later: later is always safe); in a
-- counter window at now, which has no earlier place, when still inside it (AGE_MS <
-- window_ms).
local need, leases, settled, lease, changed = cost, nil, nil, nil, false
if lease_key then
  if action == 'lease' then need = math.max(cost, 1) end
  settle = settle or {}
  -- A field of another layout reads as a grant of nothing that ended long ago: it goes.
  local fields, held = redis.call('HGETALL', lease_key), {}
  if #fields > 0 or #settle > 0 or action == 'lease' then entries_lease() end
  for i = 1, #fields, 2 do
    local units, granted, validity = fields[i + 1]:match('^(%d+) (%d+) (%d+)$')
    held[fields[i]] = {id = fields[i], units = tonumber(units) or 0, granted = tonumber(granted) or 0,
      validity = tonumber(validity) or 0, ends = 0}
  end
  for i = 1, #settle do
    local s, l = settle[i], held[settle[i].id]
    if l and s.spent > l.units then
      return redis.error_reply('ERR SPENT of ' .. s.id .. ' in settle must be at most its grant (' .. l.units .. '), got ' .. s.spent)
    end
  end
  local gone = {}
  settled, leases = {}, {}
  for i = 1, #settle do
    local s = settle[i]
    local l = held[s.id]
    if l then
      held[s.id], gone[#gone + 1] = nil, s.id
      if s.spent > 0 then settled[#settled + 1] = {units = s.spent, stamp = l.granted + math.min(s.last, l.validity)} end
    end
  end
  for i = 1, #fields, 2 do
    local l = held[fields[i]]
    if l then
      l.ends = l.granted + l.validity
      local last = 0
      for k = 1, #windows do last = math.max(last, entries_leaves(windows[k], l.ends)) end
      if last > now then leases[#leases + 1] = l else held[l.id], gone[#gone + 1] = nil, l.id end
    end
  end
  -- In slices: unpack has a limit (a hash of thousands of grants dead at once).
  for i = 1, #gone, 1000 do
    redis.call('HDEL', lease_key, unpack(gone, i, math.min(i + 999, #gone)))
    changed = true
  end
  lease = action == 'lease' and held[id]
  -- No grant to count and none to settle (a check ahead of a cold key, the common call): the
  -- windows alone, as without the hash.
  if #fields == 0 and #settle == 0 and action ~= 'lease' then leases, settled = nil, nil end
end
if record and uses_entries then
  -- Recorded units go in with the settlements, the oldest first (each in its own bucket).
  if not entries_leaves then entries_lease() end
  settled = settled or {}
  for i = 1, #record do settled[#settled + 1] = record[i] end
  table.sort(settled, function(a, b) return a.stamp < b.stamp end)
end
local allowed, least, retry, shown, refusing = true, nil, 0, nil, nil
for k = 1, #windows do
  local w = windows[k]
  if w.algorithm == 'counter' then counter_assess(w, cost) else entries_assess(w, need, leases, settled) end
  if not least or w.room < least then least, shown = w.room, k end
  if need > w.room then
    if allowed or retry >= 0 and (w.retry < 0 or w.retry > retry) then retry, refusing = w.retry, k end
    allowed = false
  end
end
local granted = 0
if not lease_key then
  -- A call without leases: nothing of them to decide.
elseif lease then
  -- A retried call: its grant is counted already.
  allowed, granted = true, lease.units
elseif action == 'lease' and allowed then
  local holders = 0
  for i = 1, #leases do
    if leases[i].ends > now then holders = holders + 1 end
  end
  granted = math.min(want, math.max(need, floor(least / (2 * (holders + 1)))))
  lease = {id = id, units = granted, granted = now, validity = validity, ends = now + validity}
  leases[#leases + 1] = lease
  redis.call('HSET', lease_key, id, string.format('%d %d %d', granted, now, validity))
  least, changed = least - granted, true
end
if not allowed then shown = refusing end
local record = allowed and action == 'check'
if amends then least, allowed = nil, true end
local reset
for k = 1, #windows do
  local w = windows[k]
  local window_reset, room
  if w.algorithm == 'counter' then
    window_reset, room = counter_finish(w, cost, record)
  else
    window_reset, room = entries_finish(w, cost, record, leases)
  end
  if amends and (not least or room < least) then least, shown = room, k end
  if k == shown then reset = window_reset end
end
if lease_key then
  if changed and #leases > 0 then
    -- The hash lasts until its last grant leaves every window.
    local last = 0
    for i = 1, #leases do
      for k = 1, #windows do
        local w = windows[k]
        last = math.max(last, entries_leaves(w, leases[i].ends) + slack * w.span)
      end
    end
    redis.call('PEXPIRE', lease_key, last - now)
  end
  if action == 'lease' then return {granted, least, allowed and 0 or retry, reset, shown} end
end
if record then return {1, least - cost, 0, reset, shown, now + ahead} end
local remaining = least
if allowed and not amends then remaining = least - cost end
return {allowed and 1 or 0, remaining, allowed and 0 or retry, reset, shown}
