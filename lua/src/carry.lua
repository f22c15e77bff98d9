-- carry.lua: one or more limits on one key whose limits changed, all-or-nothing, in one
-- round trip, keeping the state the key has under the previous limits. For each limit i
-- whose key does not exist, the key of its previous limit, when it holds state, seeds it
-- (core.Limit.SeedState: lib/seed.lua; the step is lib/carried.lua, which reserve.lua
-- shares); the previous key is left as it is (processes still deciding with the previous
-- limits keep counting there) and expires on its own. A key is seeded once: from then on it
-- exists. Then the request is decided exactly as multi.lua decides it.
--
-- KEYS[i]      the state of limit i (i = 1..m, m = #KEYS / 2), as in multi.lua
-- KEYS[m + i]  the state of limit i's previous limit; the keys of one call share a hash
--              tag (the user key's), so old and new keys are in one slot
-- ARGV[1]      now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]      cost n, in [1, min of the limits]
-- ARGV[3]      expiry margin (ms), as in the single scripts
-- ARGV[4*i .. 4*i+3]  limit i: an algorithm's code and three parameters, as in multi.lua
-- ARGV[4*m + 4]       the strategy: 'as-is' or 'proportional' (core.Carry)
-- ARGV[4*m + 4*i + 1 .. 4*m + 4*i + 4]  limit i's previous limit, in the same form ('' and
--              three '0' when limit i has none); its algorithm is limit i's
--
-- Reply: as multi.lua: 6 integers per limit, in KEYS order:
--        allowed (1|0), limit, remaining, retry_after (µs), reset_after (µs), delay (µs)
-- Errors: 'ERR carry: ...' for malformed arguments; 'ERR carry: foreign state: key ...' for a
--         key of a limit holding state this script cannot read (lib/decided.lua). A previous
--         key in a format of no algorithm is left alone and seeds nothing.

--@include lib/prelude.lua
local m = #KEYS / 2
local n, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or #KEYS < 2 or #ARGV ~= 4 + 4 * #KEYS then
  return redis.error_reply('ERR carry: bad arguments')
end
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/decided.lua
--@algorithms
--@seeds
--@include lib/seed.lua
--@include lib/carried.lua
if fmod(#KEYS, 2) ~= 0 then return redis.error_reply('ERR carry: bad arguments') end

-- Every limit is checked before any is seeded or decided: a malformed limit fails the call
-- whole.
for i = 1, m do
  local a = 4 * i
  local known, limit = algorithm_limit(ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  if not known then return redis.error_reply('ERR carry: unknown algorithm') end
  if not limit or n > limit then return redis.error_reply('ERR carry: cost out of range') end
end
local bad, prop = carry_check(m)
if bad then return bad end

-- Seed the limits whose key is new from their previous limit's key, once.
carry_seed(m, prop)

-- Decide every limit, then record the request in all of them only if all admit it.
local out, commits, all = {}, {}, true
for i = 1, m do
  local a = 4 * i
  local alg, p1, p2, p3 = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local ok, d, commit = algorithm_decide(alg, KEYS[i], p1, p2, p3)
  if not ok then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
  commits[i] = commit
  all = all and commit ~= nil
end
if all then
  for i = 1, #commits do commits[i]() end
end
return out
