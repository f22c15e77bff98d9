-- settle.lua: the settlement of a reservation (reserve.lua) at its actual cost, on every
-- limit of one key it was charged to, each exactly as core's Limit.SettleState settles it:
-- the difference from what the reservation took is given back (a refund, at most what is
-- left of it) or taken (a charge, never past a full key). The settlement of each
-- algorithm is its fragment algo/<Lua>_settle.lua; the dispatch over core's registry is
-- generated (--@settlements).
--
-- KEYS[i]  the state of limit i (i = 1..#KEYS), as in reserve.lua
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  actual: the reservation's actual cost, at least 0 (0 cancels it)
-- ARGV[3]  expiry margin (ms), as in the single scripts
-- ARGV[6*i-2 .. 6*i+3]  limit i: an algorithm's code and three parameters, as in
--          multi.lua, then what the reservation took from it (core.Charge): at and charged
--
-- Reply: one integer per limit, in KEYS order: the change applied, in units (negative for
--        a refund, positive for a charge)
-- Errors: 'ERR settle: ...' for malformed arguments; a foreign-state error naming the key
--         for a key holding state this script cannot read (lib/foreign.lua); a limit
--         settled before the error stays settled.

--@include lib/prelude.lua
local actual, margin = tonumber(ARGV[2]), tonumber(ARGV[3])
if not actual or actual < 0 or #KEYS < 1 or #ARGV ~= 3 + 6 * #KEYS then
  return redis.error_reply('ERR settle: bad arguments')
end
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/foreign.lua
--@include lib/settle_count.lua
--@settlements

for i = 1, #KEYS do
  local a = 6 * i - 2
  local at, charged = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  if not algorithm_settles(ARGV[a]) then return redis.error_reply('ERR settle: unknown algorithm') end
  if not at or not charged or charged < 1 or at < 0 then return redis.error_reply('ERR settle: bad charge') end
end

local out = {}
for i = 1, #KEYS do
  local a = 6 * i - 2
  local ok, k = pcall(algorithm_settle, ARGV[a], KEYS[i], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  if not ok then return foreign(KEYS[i], k) end
  out[i] = k
end
return out
