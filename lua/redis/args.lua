-- slidewin: one decision of a rule (one or more windows) as one Redis script call. The script
-- is the files of this folder in this order, sent as one EVAL:
--   redis-cli EVAL "$(cat lua/redis/args.lua lua/redis/entries.lua lua/redis/counter.lua lua/redis/rule.lua)" ...
-- This part reads and checks the arguments, in one place.
-- KEYS: one per window (give them one hash tag, "rl:{alice}:1s", "rl:{alice}:1h", so that a
--       Cluster keeps a rule in one slot), then, for a caller that uses leases, one more: the
--       key's lease hash (same hash tag). With it every action counts the outstanding leases.
-- ARGV: cost, then per window: algorithm limit window_ms ("log" | "counter"), or
--       "buckets" limit window_ms bucket_ms; then name/value options: now_ms N (the caller's
--       clock instead of Redis TIME), action check|peek|refund|owe|lease (default check; `mode` is
--       its former name, still read); with action lease: want N, validity_ms V, id ID; with
--       action check and the lease hash: ahead_ms V (the cost recorded at now + V); with any
--       action and the lease hash: settle "ID:SPENT:LAST_MS ..." (rule.lua says what they do);
--       with any action: record "AGE_MS:UNITS ...", units admitted elsewhere AGE_MS ago; with
--       action refund: stamp_ms N (give back what was recorded at N or before, the newest
--       first: a reservation's stamp; without it, from the newest bucket); with action owe:
--       stamp_ms N (record cost at N whether it fits or not, a debt, each window counting at
--       most twice the limit given; without it, at the newest time seen).
local floor = math.floor
local function int(name, text, min, k)
  local n = tonumber(text)
  if n and n % 1 == 0 and n >= min and n <= 2 ^ 53 then return n end
  local kind = min > 0 and 'a positive' or 'a non-negative'
  return nil, 'ERR ' .. name .. (k and ' of window ' .. k or '') .. ' must be ' .. kind .. ' integer, got ' .. tostring(text)
end
local cost, err = int('cost', ARGV[1], 0)
if not cost then return redis.error_reply(err) end
-- The parts after this one define the functions of the algorithms the rule uses, no others:
-- a function is made again on every call.
local windows, at, uses_entries, uses_counter, lease_key = {}, 2, false, false, nil
for k = 1, #KEYS do
  local algorithm = ARGV[at]
  -- A key more than the windows (an option's name, or nothing, where its window would be): the
  -- lease hash.
  if k > 1 and k == #KEYS and algorithm ~= 'log' and algorithm ~= 'buckets' and algorithm ~= 'counter'
      and (algorithm == nil or (' now_ms action mode want validity_ms id settle ahead_ms record stamp_ms '):find(' ' .. algorithm .. ' ', 1, true)) then
    lease_key = KEYS[k]
    break
  end
  -- Every field the windows' functions set, made at once: a table that grows is made again.
  local w = {key = KEYS[k], algorithm = algorithm, width = 1, limit = 0, span = 0, now = 0,
    marked = false, oldest = false, room = 0, retry = 0, newest = false, sum = 0, gone = 0,
    current = 0, previous = 0, elapsed = 0, capacity = 0, head = 0, count = 0, header = false,
    moved = false, held = 0, recorded = 0}
  w.limit, err = int('limit', ARGV[at + 1], 1, k)
  if not err then w.span, err = int('window_ms', ARGV[at + 2], 1, k) end
  if err then return redis.error_reply(err) end
  if algorithm == 'buckets' then
    w.width, err = int('bucket_ms', ARGV[at + 3], 1, k)
    if err then return redis.error_reply(err) end
    if w.span % w.width ~= 0 then
      return redis.error_reply('ERR bucket_ms of window ' .. k .. ' must be a divisor of window_ms, got ' .. w.width)
    elseif w.span / w.width > 65536 then
      return redis.error_reply('ERR bucket_ms of window ' .. k .. ' must be at least window_ms / 65536, got ' .. w.width)
    end
    at = at + 4
  elseif algorithm == 'log' or algorithm == 'counter' then
    at = at + 3
  else
    return redis.error_reply('ERR algorithm of window ' .. k .. ' must be log, buckets or counter, got ' .. tostring(algorithm))
  end
  if algorithm == 'counter' then uses_counter = true else uses_entries = true end
  windows[k] = w
end
if #windows == 0 then return redis.error_reply('ERR a rule needs at least one window (one key each), got 0 keys') end
-- lease_option: the last of want, validity_ms and id given (they go with action lease only).
local action, now, want, validity, id, settle, lease_option = 'check', nil, nil, nil, nil, nil, nil
-- record: {units, age, stamp} (the stamp, now - age, once now is known), or nil.
local record = nil
local ahead = 0
-- stamp: refund's or owe's stamp_ms, or nil.
local stamp = nil
for i = at, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if name == 'action' or name == 'mode' then
    action = value
    if action ~= 'check' and action ~= 'peek' and action ~= 'refund' and action ~= 'owe'
        and (action ~= 'lease' or not lease_key) then
      if action == 'lease' then
        return redis.error_reply("ERR action lease needs the lease hash: one key after the windows' keys")
      end
      local choices = lease_key and 'check, peek, refund, owe or lease' or 'check, peek, refund or owe'
      return redis.error_reply('ERR ' .. name .. ' must be ' .. choices .. ', got ' .. tostring(action))
    end
  elseif name == 'now_ms' or name == 'stamp_ms' then
    -- Times run from 0 to 2^52 - 1.
    local t = tonumber(value)
    if not (t and t % 1 == 0 and t >= 0 and t < 2 ^ 52) then
      return redis.error_reply('ERR ' .. name .. ' must be a non-negative integer below 2^52, got ' .. tostring(value))
    end
    if name == 'now_ms' then now = t else stamp = t end
  elseif name == 'want' then
    want, err = int('want', value, 1)
    if err then return redis.error_reply(err) end
    lease_option = name
  elseif name == 'validity_ms' then
    validity, err = int('validity_ms', value, 1)
    if err then return redis.error_reply(err) end
    lease_option = name
  elseif name == 'id' then
    -- The settle list separates ids by spaces and fields by colons.
    id, lease_option = value, name
    if not (id and id:find('^[^%s:]+$')) then
      return redis.error_reply('ERR id must be a non-empty string without spaces or colons, got ' .. tostring(value))
    end
  elseif name == 'ahead_ms' then
    ahead, err = int('ahead_ms', value, 0)
    if err then return redis.error_reply(err) end
    if not lease_key then
      return redis.error_reply("ERR ahead_ms needs the lease hash: one key after the windows' keys")
    end
  elseif name == 'settle' then
    settle = {}
    for entry in tostring(value):gmatch('%S+') do
      local lease, spent, last = entry:match('^([^:]+):([^:]+):([^:]+)$')
      if not lease then
        return redis.error_reply('ERR settle must be "ID:SPENT:LAST_MS ..." separated by spaces, got ' .. entry)
      end
      local s = {id = lease, spent = 0, last = 0}
      s.spent, err = int('SPENT of ' .. lease .. ' in settle', spent, 0)
      if not err then s.last, err = int('LAST_MS of ' .. lease .. ' in settle', last, 0) end
      if err then return redis.error_reply(err) end
      settle[#settle + 1] = s
    end
    if #settle > 0 and not lease_key then
      return redis.error_reply("ERR settle needs the lease hash: one key after the windows' keys")
    end
  elseif name == 'record' then
    record = {}
    for entry in tostring(value):gmatch('%S+') do
      local age, units = entry:match('^([^:]+):([^:]+)$')
      if not age then
        return redis.error_reply('ERR record must be "AGE_MS:UNITS ..." separated by spaces, got ' .. entry)
      end
      local r = {units = 0, age = 0, stamp = 0}
      r.age, err = int('AGE_MS of ' .. entry .. ' in record', age, 0)
      if not err then r.units, err = int('UNITS of ' .. entry .. ' in record', units, 0) end
      if err then return redis.error_reply(err) end
      record[#record + 1] = r
    end
  else
    return redis.error_reply('ERR options are now_ms, action, want, validity_ms, id, ahead_ms, settle, record and stamp_ms, got ' .. tostring(name))
  end
end
if action == 'lease' then
  local missing = not want and 'want' or not validity and 'validity_ms' or not id and 'id'
  if missing then return redis.error_reply('ERR action lease needs the option ' .. missing) end
  if want < cost then
    return redis.error_reply('ERR want must be at least cost (' .. cost .. '), got ' .. want)
  end
elseif lease_option then
  return redis.error_reply('ERR ' .. lease_option .. ' goes with action lease, got action ' .. action)
end
if ahead > 0 and action ~= 'check' then
  return redis.error_reply('ERR ahead_ms goes with action check, got action ' .. action)
end
-- amends: the action changes what was recorded (refund, owe) rather than deciding.
local amends = action == 'refund' or action == 'owe'
if stamp and not amends then
  return redis.error_reply('ERR stamp_ms goes with action refund or owe, got action ' .. action)
end
if lease_key and uses_counter then
  for k = 1, #windows do
    if windows[k].algorithm == 'counter' then
      return redis.error_reply('ERR leases need log or buckets windows, window ' .. k .. ' is counter')
    end
  end
end
-- Keys expire on Redis's clock, which may run ahead of the caller's.
local slack = now and 1 or 0
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
-- Recorded units are stamped AGE_MS before now (never before 0: later is always safe).
for i = 1, record and #record or 0 do
  record[i].stamp = math.max(now - record[i].age, 0)
end
