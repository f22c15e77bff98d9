-- java_sliding_window.lua: the Java implementation's Redis sliding window
-- (RedisSlidingWindowRateLimiter), decided in its own layout and arithmetic, so that Go and
-- Java processes share one limit: prune the entries at or before now - window, count what is
-- left, and if count + n <= limit add n members; a denial adds nothing. Time is whole
-- milliseconds, as the Java side writes it (now is truncated to the millisecond).
--
-- KEYS     pairs of keys (all in one cluster slot), one pair per user key, each decided in
--          turn with the same ARGV, as if requested one after the other at now:
-- KEYS[2i-1]  sorted set '<prefix>:{<key>}': one member '<ms>:<seq>' per admitted request,
--             score = its time (ms since the Unix epoch); absent for a new key
-- KEYS[2i]    string '<prefix>:{<key>}:seq': the counter (INCRBY) numbering the members
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, limit]
-- ARGV[3]  window (ms, >= 1)
-- ARGV[4]  limit
--
-- Both keys expire a window after the last admission (PEXPIRE), as the Java side sets them.
--
-- Reply: 6 integers per user key, in KEYS order: allowed (1|0), limit, remaining,
--        retry_after (µs), reset_after (µs), delay (µs) (always 0)
-- Errors: 'ERR java_sliding_window: ...' for malformed arguments; 'ERR java_sliding_window:
--         foreign state: key ...' for a key that is not a sorted set of '<ms>:<seq>' members
--         (lib/guard.lua); nothing of that key is written then.

--@include lib/prelude.lua
--@include lib/math.lua
local n, window, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not window or window < 1 or not limit or not n or n < 1 or n > limit or math.fmod(#KEYS, 2) ~= 0 then
  return redis.error_reply('ERR java_sliding_window: bad arguments')
end
local nowms = quo(now, MICROS_PER_MILLI)
local sweep = fmt('%d', nowms - window)
local pwindow = fmt('%d', window)
--@include lib/guard.lua

-- check fails on a key that is not the Java layout: its newest member is not '<ms>:<seq>',
-- or its score is not a time in ms.
local function check(key)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if newest[1] and (not string.match(newest[1], '^%d+:%d+$') or tonumber(newest[2]) > quo(MAX_TIME, MICROS_PER_MILLI)) then
    error('not a member <ms>:<seq> with a time in ms')
  end
  return true
end

-- checkseq fails on a sequence key that does not hold an integer.
local function checkseq(key)
  local v = redis.call('GET', key)
  if v and not string.match(v, '^%d+$') then error('not an integer') end
  return true
end

local out, single = {}, #KEYS == 2
for i = 1, #KEYS, 2 do
  local key, seqkey = KEYS[i], KEYS[i + 1]
  local ok, err = guard(check, key)
  if not ok then return err end
  ok, err = guard(checkseq, seqkey)
  if not ok then return err end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', sweep)
  local count = redis.call('ZCARD', key)
  local d
  if count + n <= limit then
    local seq = redis.call('INCRBY', seqkey, fmt('%d', n))
    for j = 1, n do
      redis.call('ZADD', key, fmt('%d', nowms), fmt('%d:%d', nowms, seq - n + j))
    end
    redis.call('PEXPIRE', key, pwindow)
    redis.call('PEXPIRE', seqkey, pwindow)
    local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    d = {1, limit, limit - count - n, 0, (newest + window) * MICROS_PER_MILLI - now, 0}
  else
    -- Wait until the count + n - limit oldest entries have left the window.
    local k = count + n - limit
    local oldest = tonumber(redis.call('ZRANGE', key, fmt('%d', k - 1), fmt('%d', k - 1), 'WITHSCORES')[2])
    local newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    local remaining = limit - count
    if remaining < 0 then remaining = 0 end
    d = {0, limit, remaining, (oldest + window) * MICROS_PER_MILLI - now, (newest + window) * MICROS_PER_MILLI - now, 0}
  end
  if not sane(d) then return foreign(key, 'a decision out of range') end
  if single then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
end
return out
