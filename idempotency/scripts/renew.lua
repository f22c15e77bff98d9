-- renew.lua: extend the lease of an idempotency key the caller holds, while it runs.
--
-- KEYS[1]  the key's record (see acquire.lua)
-- ARGV[1]  the caller's token
-- ARGV[2]  the lease in milliseconds (integer string), counted from now
--
-- Reply: 1 when the lease was extended; 0 when the caller no longer holds it.
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'r' or r[2] ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
local lease = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'd', string.format('%d', now + lease))
if redis.call('PTTL', KEYS[1]) < lease then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
