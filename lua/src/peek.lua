-- peek.lua: the decisions a request would get from one or more limits of one key, without
-- recording it: each limit is decided by the same function its decision script runs
-- (core's CheckState), and the function that would record an admitted request is never
-- called. It writes nothing, so it runs with EVALSHA_RO (and on replicas); single-limit
-- and multi-limit limiters are peeked alike, one key per limit.
--
-- KEYS[i]  the state of limit i (i = 1..#KEYS), in the format of that limit's script:
--          token/leaky bucket: gcra.lua; sliding log: sliding_log.lua; sliding
--          counter: sliding_counter.lua; fixed window: fixed_window.lua
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n of the request peeked at, in [1, min of the limits]
-- ARGV[4*i-1 .. 4*i+2]  limit i: an algorithm's code and three parameters, as in
--          multi.lua (the dispatch over core's registry is generated: --@algorithms)
--
-- Reply: 6 integers per limit, in KEYS order, what that limit's script would reply for the
--        request: allowed (1|0), limit, remaining, retry_after (µs), reset_after (µs),
--        delay (µs)
-- Errors: 'ERR peek: ...' for malformed arguments; a foreign-state error naming the key for a
--         key holding state this script cannot read (lib/decided.lua).

--@readonly
--@include lib/prelude.lua
local n = tonumber(ARGV[2])
if not n or n < 1 or #KEYS < 1 or #ARGV ~= 2 + 4 * #KEYS then
  return redis.error_reply('ERR peek: bad arguments')
end
-- No key is written, so no expiry is ever set: the margin of expire.lua is never used.
local margin = 0
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/decided.lua
--@algorithms

local out = {}
for i = 1, #KEYS do
  local a = 4 * i - 1
  local alg, p1, p2, p3 = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local known, limit = algorithm_limit(alg, p1, p2, p3)
  if not known then return redis.error_reply('ERR peek: unknown algorithm') end
  if not p1 or not limit or n > limit then return redis.error_reply('ERR peek: cost out of range') end
  local ok, d = algorithm_decide(alg, KEYS[i], p1, p2, p3)
  if not ok then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
end
return out
