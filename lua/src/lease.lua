-- lease.lua: release or extend one lease of a concurrency limit, exactly core's ReleaseLease
-- and ExtendLease, on the layout of algo/concurrency.lua (which multi.lua and peek.lua
-- decide admissions with).
--
-- KEYS[1]  the concurrency limit's key: a sorted set, one member 'l<token>.<i>' (i = 1..n)
--          per unit a lease holds, scored by the time it was taken or last extended
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  'release' or 'extend'
-- ARGV[3]  the lease's token, in [1, 2^53)
-- ARGV[4]  n, the units the lease holds, in [1, 65536] (core's bound of a concurrency limit)
-- ARGV[5]  the lease TTL W (µs), in [1, MAX_DURATION]
-- ARGV[6]  expiry margin (ms), as in multi.lua
--
-- A lease counts while its units are all in the set, at one score ts > eff - W (eff =
-- max(now, newest score)). Release removes them; extend moves them to eff and expires the
-- key no sooner than the lease. A lease that does not count (expired, released, a stale
-- token) is left alone.
--
-- Reply: release: 1 (freed) or 0; extend: the lease's time left after it, eff + W - now
--        (µs), or -1 (lost)
-- Errors: 'ERR lease: ...' for malformed arguments.

--@include lib/prelude.lua
local op, token, n, window = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local margin = tonumber(ARGV[6])
if (op ~= 'release' and op ~= 'extend') or not token or token < 1 or not n or n < 1 or
  n > 65536 or not window or window < 1 or window > MAX_DURATION or not margin then
  return redis.error_reply('ERR lease: bad arguments')
end
--@include lib/math.lua
--@include lib/expire.lua

local key, name = KEYS[1], 'l' .. fmt('%d', token) .. '.'
local lost = 0
if op == 'extend' then lost = -1 end
local first = redis.call('ZSCORE', key, name .. '1')
local lastOf = redis.call('ZSCORE', key, name .. fmt('%d', n))
if not first or first ~= lastOf then return lost end
local at = tonumber(first)
local newest = at
local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if top[1] and string.sub(top[1], 1, 1) ~= '#' then newest = tonumber(top[2]) end
local eff = now
if newest > now then eff = newest end
if at <= eff - window then return lost end
if op == 'release' then
  for i = 1, n do redis.call('ZREM', key, name .. fmt('%d', i)) end
  return 1
end
local score = fmt('%d', eff)
for i = 1, n do redis.call('ZADD', key, 'XX', score, name .. fmt('%d', i)) end
if redis.call('PTTL', key) < tonumber(pexpire(eff + window - now)) then
  redis.call('PEXPIRE', key, pexpire(eff + window - now))
end
return eff + window - now
