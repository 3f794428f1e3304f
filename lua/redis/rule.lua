-- slidewin: the decision of a rule over all its windows, as the core's rule decides it. Sent
-- last, after args.lua, entries.lua and counter.lua.
-- Admitted only when every window admits; a refusal records nothing in any window. Returns
-- {allowed 0/1, remaining, retry_after_ms, reset_after_ms, window}: remaining the least over
-- the windows; window (1-based) the one the answer describes: when refused, the refusing
-- window with the longest wait (retry_after_ms: its wait, -1 when some window can never fit
-- the cost), when admitted (or refunded) the one with the least room (ties: the lower index);
-- reset_after_ms that window's. A peek reports what would remain once its cost is recorded.
local allowed, least, retry, shown, refusing = true, nil, 0, nil, nil
for k = 1, #windows do
  local w = windows[k]
  if w.algorithm == 'counter' then counter_assess(w, cost) else entries_assess(w, cost) end
  if not least or w.room < least then least, shown = w.room, k end
  if cost > w.room then
    if allowed or retry >= 0 and (w.retry < 0 or w.retry > retry) then retry, refusing = w.retry, k end
    allowed = false
  end
end
if not allowed then shown = refusing end
local record = allowed and action == 'check'
if action == 'refund' then least, allowed = nil, true end
local reset
for k = 1, #windows do
  local w = windows[k]
  local window_reset, room
  if w.algorithm == 'counter' then
    window_reset, room = counter_finish(w, cost, record)
  else
    window_reset, room = entries_finish(w, cost, record)
  end
  if action == 'refund' and (not least or room < least) then least, shown = room, k end
  if k == shown then reset = window_reset end
end
local remaining = least
if allowed and action ~= 'refund' then remaining = least - cost end
return {allowed and 1 or 0, remaining, allowed and 0 or retry, reset, shown}
