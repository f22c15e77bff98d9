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
-- ARGV[4*i .. 4*i+3]  limit i: an algorithm code and three parameters
--          'tb' T tau burst    token bucket       'lb' T tau burst   leaky bucket
--          'sl' W L 0          sliding log        'sc' W L 0         sliding counter
--          'fw' W L 0          fixed window
--
-- Reply: 6 integers per limit, in KEYS order:
--        allowed (1|0), limit, remaining, retry_after (µs), reset_after (µs), delay (µs)
-- Errors: 'ERR multi: ...' for malformed arguments; 'ERR multi: foreign state: key ...' for a
--         key holding state this script cannot read (lib/guard.lua); nothing is written then.

--@include lib/prelude.lua
local n, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
if not n or n < 1 or #ARGV ~= 3 + 4 * #KEYS then
  return redis.error_reply('ERR multi: bad arguments')
end
--@include lib/math.lua
--@include lib/expire.lua
--@include algo/gcra.lua
--@include algo/sliding_log.lua
--@include algo/fixed_window.lua
--@include algo/sliding_counter.lua
--@include lib/guard.lua

-- Every limit is checked before any is decided: a malformed limit fails the call whole.
local checks = {tb = true, lb = true, sl = true, sc = true, fw = true}
for i = 1, #KEYS do
  local a = 4 * i
  local alg, limit = ARGV[a], tonumber(ARGV[a + 2])
  if alg == 'tb' or alg == 'lb' then limit = tonumber(ARGV[a + 3]) end
  if not checks[alg] then return redis.error_reply('ERR multi: unknown algorithm') end
  if not limit or n > limit then return redis.error_reply('ERR multi: cost out of range') end
end

-- Decide every limit, then record the request in all of them only if all admit it.
local out, commits, all = {}, {}, true
for i = 1, #KEYS do
  local a = 4 * i
  local alg, p1, p2, p3 = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local ok, d, commit
  if alg == 'tb' or alg == 'lb' then
    ok, d, commit = decided(gcra, KEYS[i], p1, p2, p3, alg == 'lb')
  elseif alg == 'sl' then
    ok, d, commit = decided(slidinglog, KEYS[i], p1, p2)
  elseif alg == 'sc' then
    ok, d, commit = decided(slidingcounter, KEYS[i], p1, p2)
  else
    ok, d, commit = decided(fixedwindow, KEYS[i], p1, p2)
  end
  if not ok then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
  commits[i] = commit
  all = all and commit ~= nil
end
if all then
  for i = 1, #commits do commits[i]() end
end
return out
