-- slidewin: the decision of a rule over all its windows, as the core's rule decides it. Sent
-- last, after args.lua, entries.lua and counter.lua.
-- Admitted only when every window admits; a refusal records nothing in any window. Returns
-- {allowed 0/1, remaining, retry_after_ms, reset_after_ms, window}: remaining the least over
-- the windows; window (1-based) the one the answer describes: when refused, the refusing
-- window with the longest wait (retry_after_ms: its wait, -1 when some window can never fit
-- the cost), when admitted (or refunded) the one with the least room (ties: the lower index);
-- reset_after_ms that window's. A peek reports what would remain once its cost is recorded.
local assess = {log = entries_assess, buckets = entries_assess, counter = counter_assess}
local finish = {log = entries_finish, buckets = entries_finish, counter = counter_finish}

local allowed, least, retry, shown, refusing = true, nil, 0, nil, nil
for k = 1, #windows do
  local w = windows[k]
  assess[w.algorithm](w, cost)
  if not least or w.room < least then least, shown = w.room, k end
  if not w.ok then
    if allowed or retry >= 0 and (w.retry < 0 or w.retry > retry) then retry, refusing = w.retry, k end
    allowed = false
  end
end
local record = allowed and mode == 'check'
if mode == 'refund' then least, allowed = nil, true end
local resets = {}
for k = 1, #windows do
  local w = windows[k]
  local room
  resets[k], room = finish[w.algorithm](w, cost, record)
  if mode == 'refund' and (not least or room < least) then least, shown = room, k end
end
if not allowed then shown = refusing end
local remaining = least
if allowed and mode ~= 'refund' then remaining = least - cost end
return {allowed and 1 or 0, remaining, allowed and 0 or retry, resets[shown], shown}
