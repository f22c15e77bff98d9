-- reserve.lua: a reservation on one or more limits of one key, all-or-nothing: decided and
-- recorded exactly as multi.lua decides and records a request (one limit or several), and
-- answered with the time of the decision as well, from which the caller derives what the
-- reservation took from each limit (core.Limit.ChargeOf) to settle it later (settle.lua).
--
-- KEYS[i]  the state of limit i (i = 1..#KEYS), in the format of that limit's single script:
--          token/leaky bucket: gcra.lua; sliding log: sliding_log.lua; sliding
--          counter: sliding_counter.lua; fixed window: fixed_window.lua
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  the estimated cost n, in [1, min of the limits]
-- ARGV[3]  expiry margin (ms), as in the single scripts
-- ARGV[4*i .. 4*i+3]  limit i: an algorithm's code and three parameters, as in multi.lua
--          (the dispatch over core's registry is generated: --@algorithms)
--
-- A limiter whose limits changed keeping state (carry.lua) reserves in carry.lua's layout:
-- m = #KEYS / 2 limits, KEYS[m + i] the state of limit i's previous limit, and after the
-- limits ARGV[4*m + 4] the strategy ('as-is' or 'proportional') and ARGV[4*m + 4*i + 1 ..
-- 4*m + 4*i + 4] limit i's previous limit ('' and three '0' when it has none); #ARGV is then
-- 4 + 4 * #KEYS. A key that does not exist is first seeded from its previous limit's key,
-- exactly as carry.lua seeds it (lib/carried.lua), then the reservation is decided.
--
-- Reply: 6 integers per limit, in the limits' order, as multi.lua's (allowed (1|0), limit,
--        remaining, retry_after (µs), reset_after (µs), delay (µs)), then now (µs)
-- Errors: 'ERR reserve: ...' for malformed arguments; a foreign-state error naming the key
--         for a key holding state this script cannot read (lib/decided.lua); nothing is
--         written then but the keys a call in carry.lua's layout seeded (as carry.lua).

--@include lib/prelude.lua
local n, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
local carried = #ARGV == 4 + 4 * #KEYS
if not n or n < 1 or #KEYS < 1 or (#ARGV ~= 3 + 4 * #KEYS and not carried) then
  return redis.error_reply('ERR reserve: bad arguments')
end
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/decided.lua
--@algorithms
local m = #KEYS
if carried then
  if fmod(#KEYS, 2) ~= 0 then return redis.error_reply('ERR reserve: bad arguments') end
  m = #KEYS / 2
end

-- Every limit is checked before any is seeded or decided: a malformed limit fails the call
-- whole.
for i = 1, m do
  local a = 4 * i
  local known, limit = algorithm_limit(ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  if not known then return redis.error_reply('ERR reserve: unknown algorithm') end
  if not limit or n > limit then return redis.error_reply('ERR reserve: cost out of range') end
end

if carried then
  -- The seeding step, defined in this block so that a reservation that carries nothing
  -- creates none of its closures.
--@seeds
--@include lib/seed.lua
--@include lib/carried.lua
  local bad, prop = carry_check(m)
  if bad then return bad end
  carry_seed(m, prop)
end

local out, commits, all = {}, {}, true
for i = 1, m do
  local a = 4 * i
  local ok, d, commit = algorithm_decide(ARGV[a], KEYS[i], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  if not ok then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
  commits[i] = commit
  all = all and commit ~= nil
end
if all then
  for i = 1, #commits do commits[i]() end
end
out[#out + 1] = now
return out
