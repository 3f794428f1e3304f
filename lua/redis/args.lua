-- slidewin: the arguments every script in this folder takes, and the parts of an answer they
-- share. Sent as the first part of each script, so a script is one self-contained EVAL:
--   redis-cli EVAL "$(cat lua/redis/args.lua lua/redis/log.lua)" ...
-- and the arguments are read and checked in one place.
-- ARGV: limit window_ms cost, then name/value options: now_ms N (instead of Redis TIME),
-- mode check|peek|refund (default check), bucket_ms N (buckets only).
local function int(name, text, min)
  local n = tonumber(text)
  if not n or n ~= math.floor(n) or n < min or n > 2 ^ 53 then
    local kind = min > 0 and 'a positive' or min == 0 and 'a non-negative' or 'an'
    error(name .. ' must be ' .. kind .. ' integer, got ' .. tostring(text), 0)
  end
  return n
end
local function read_args() -- limit window_ms cost, then name/value options
  local a = {limit = int('limit', ARGV[1], 1), window = int('window_ms', ARGV[2], 1), cost = int('cost', ARGV[3], 0)}
  local opt = {}
  for i = 4, #ARGV, 2 do opt[ARGV[i]] = ARGV[i + 1] end
  a.mode = opt.mode or 'check'
  if a.mode ~= 'check' and a.mode ~= 'peek' and a.mode ~= 'refund' then
    error('mode must be check, peek or refund, got ' .. a.mode, 0)
  end
  a.width = opt.bucket_ms and int('bucket_ms', opt.bucket_ms, 1)
  a.now = opt.now_ms and int('now_ms', opt.now_ms, -2 ^ 53)
  -- Keys expire on Redis's clock, which may run ahead of the caller's.
  a.ttl_slack = a.now and a.window or 0
  return a
end
local ok, a = pcall(read_args) -- no redis.call in here: one inside pcall costs microseconds
if not ok then return redis.error_reply('ERR ' .. a) end
if not a.now then
  local t = redis.call('TIME')
  a.now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local limit, window, cost, mode, now, ttl_slack = a.limit, a.window, a.cost, a.mode, a.now, a.ttl_slack
-- The script's answer, with `used` the cost the window holds after the call. A peek reports
-- what would remain once its cost is recorded, like a committing call.
local function reply(allowed, used, retry_ms, reset_ms)
  local remaining = math.max(limit - used, 0)
  if mode == 'peek' and allowed then remaining = remaining - cost end
  return {allowed and 1 or 0, remaining, retry_ms, reset_ms}
end
-- retry_after_ms: 0 when allowed, -1 when the cost can never fit, else the algorithm's exact
-- wait (`wait_ms()`, -1 if it finds none).
local function retry_after(allowed, wait_ms)
  if allowed then return 0 end
  if cost > limit then return -1 end
  return wait_ms()
end
-- Keep a one-hash state (field, value pairs in `...`) while the window holds cost (reset_ms > 0),
-- else drop the key; its expiry moves only when costs change.
local function keep_hash(key, reset_ms, allowed, ...)
  if reset_ms <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, ...)
  if mode ~= 'peek' and allowed then
    redis.call('PEXPIRE', key, reset_ms + ttl_slack)
  end
end
