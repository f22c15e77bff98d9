-- lag.lua: counts the entries of a stream after a group's last-delivered id, up to a cap:
-- the group's lag where XINFO GROUPS reports none (Redis 6.2, or a lag Redis cannot compute).
-- It reads at most 100 entries at a time.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  the group's last-delivered id
-- ARGV[2]  cap
--
-- Reply: the count, at most the cap
local cap = tonumber(ARGV[2])
local n = 0
local start = '(' .. ARGV[1]
while n < cap do
  local r = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', string.format('%d', math.min(100, cap - n)))
  n = n + #r
  if #r < 100 then
    break
  end
  start = '(' .. r[#r][1]
end
return n
