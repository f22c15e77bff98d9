-- gcra.lua: token-bucket and leaky-bucket decisions, exactly core.TokenBucket.Step and
-- core.LeakyBucket.Step. Both are GCRA and admit exactly the same requests; they differ in
-- how a new key is read (a token bucket starts full, a leaky bucket starts empty: the same
-- state) and in the shaping delay an admitted leaky-bucket decision carries. A denied request
-- consumes nothing; the TAT never moves back.
--
-- KEYS     one or more keys (all in one cluster slot), each decided in turn with the same
--          ARGV, as if requested one after the other at now; KEYS[i]:
--          a string holding the key's TAT (theoretical arrival time, µs since the Unix
--          epoch, '%d'); absent for a new key
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, burst]
-- ARGV[3]  emission interval T (µs, >= 1)
-- ARGV[4]  tolerance tau (µs)
-- ARGV[5]  burst = floor(tau / T), the decision's limit
-- ARGV[6]  expiry margin (ms): the key expires this long after its state is back to initial
-- ARGV[7]  '1' for the leaky bucket (decisions carry the shaping delay), '0' for the token bucket
--
-- Reply: 6 integers per key, in KEYS order: allowed (1|0), limit, remaining,
--        retry_after (µs), reset_after (µs), delay (µs) (0 for the token bucket)
-- Errors: 'ERR gcra: ...' for malformed arguments; 'ERR gcra: foreign state: key ...' for a
--         key holding state this script cannot read (lib/guard.lua).

--@include lib/prelude.lua
local n, interval, tau, burst = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not n or n < 1 or n > burst then
  return redis.error_reply('ERR gcra: cost out of range')
end
local margin = tonumber(ARGV[6])
local shaping = ARGV[7] == '1'
--@include lib/math.lua
--@include lib/expire.lua
--@include algo/gcra.lua

local function decide(key) return gcra(key, interval, tau, burst, shaping) end
--@include lib/single.lua
