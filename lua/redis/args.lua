-- slidewin: one decision of a rule (one or more windows) as one Redis script call. The script
-- is the files of this folder in this order, sent as one EVAL:
--   redis-cli EVAL "$(cat lua/redis/args.lua lua/redis/entries.lua lua/redis/counter.lua lua/redis/rule.lua)" ...
-- This part reads and checks the arguments, in one place.
-- KEYS: one per window (give them one hash tag, "rl:{alice}:1s", "rl:{alice}:1h", so that a
--       Cluster keeps a rule in one slot).
-- ARGV: cost, then per window: algorithm limit window_ms ("log" | "counter"), or
--       "buckets" limit window_ms bucket_ms; then name/value options: now_ms N (the caller's
--       clock instead of Redis TIME), action check|peek|refund (default check; `mode` is its
--       former name, still read).
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
local windows, at, uses_entries, uses_counter = {}, 2, false, false
for k = 1, #KEYS do
  local algorithm = ARGV[at]
  -- Every field the windows' functions set, made at once: a table that grows is made again.
  local w = {key = KEYS[k], algorithm = algorithm, width = 1, limit = 0, span = 0, now = 0,
    marked = false, oldest = false, room = 0, retry = 0, newest = false, sum = 0, gone = 0,
    current = 0, previous = 0, elapsed = 0, capacity = 0, head = 0, count = 0, header = false}
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
local action, now = 'check', nil
for i = at, #ARGV, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if name == 'action' or name == 'mode' then
    action = value
    if action ~= 'check' and action ~= 'peek' and action ~= 'refund' then
      return redis.error_reply('ERR ' .. name .. ' must be check, peek or refund, got ' .. tostring(action))
    end
  elseif name == 'now_ms' then
    -- The log keeps the newest time seen in a score above 2^52: times run from 0 to 2^52 - 1.
    now = tonumber(value)
    if not (now and now % 1 == 0 and now >= 0 and now < 2 ^ 52) then
      return redis.error_reply('ERR now_ms must be a non-negative integer below 2^52, got ' .. tostring(value))
    end
  else
    return redis.error_reply('ERR options are now_ms and action, got ' .. tostring(name))
  end
end
-- Keys expire on Redis's clock, which may run ahead of the caller's.
local slack = now and 1 or 0
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end
