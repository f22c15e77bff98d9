-- multi.lua: several limits on one key, all-or-nothing, in one round trip. Each limit is
-- decided exactly as its single-limit script decides it (core's Step); the request is
-- recorded by every limit only if every limit admits it, and a denied request writes
-- nothing. The caller combines the per-limit decisions with core.Combine.
--
-- KEYS[i]  the state of limit i (i = 1..#KEYS), in the format of that limit's single script:
--          token/leaky bucket: gcra.lua; sliding log: sliding_log.lua; sliding
--          counter: sliding_counter.lua; fixed window: fixed_window.lua
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, min of the limits]
-- ARGV[3]  expiry margin (ms), as in the single scripts
-- ARGV[4*i .. 4*i+3]  limit i: an algorithm's code (core.Algorithm.Code) and three
--          parameters, its Ints padded with '0': 'tb' T tau burst (token bucket), 'lb' T tau
--          burst (leaky bucket), 'sl' W L 0 (sliding log), 'sc' W L 0 (sliding counter),
--          'fw' W L 0 (fixed window); the dispatch over every algorithm of core's registry
--          is generated (--@algorithms)
--
-- Reply: 6 integers per limit, in KEYS order:
--        allowed (1|0), limit, remaining, retry_after (µs), reset_after (µs), delay (µs)
-- Errors: 'ERR multi: ...' for malformed arguments; 'ERR multi: foreign state: key ...' for a
--         key holding state this script cannot read (lib/decided.lua); nothing is written then.

--@include lib/prelude.lua
local n, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or #ARGV ~= 3 + 4 * #KEYS then
  return redis.error_reply('ERR multi: bad arguments')
end
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/decided.lua
--@algorithms

-- Every limit is checked before any is decided: a malformed limit fails the call whole.
for i = 1, #KEYS do
  local a = 4 * i
  local alg = ARGV[a]
  local known, limit = algorithm_limit(alg, tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
  if not known then return redis.error_reply('ERR multi: unknown algorithm') end
  if not limit or n > limit then return redis.error_reply('ERR multi: cost out of range') end
end

-- Decide every limit, then record the request in all of them only if all admit it.
local out, commits, all = {}, {}, true
for i = 1, #KEYS do
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
