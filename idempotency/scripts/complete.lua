-- complete.lua: store the result of an idempotency key whose lease the caller holds.
--
-- KEYS[1]  the key's record (see acquire.lua)
-- ARGV[1]  the caller's token
-- ARGV[2]  the result to store (empty when ARGV[3] is '1')
-- ARGV[3]  '1' when the result was too large to store, else ''
-- ARGV[4]  the retention in milliseconds (integer string), counted from now
--
-- Reply: 1 when the result was stored; 0 when the caller no longer holds the lease (it
--        expired and another caller took the key, or the record is gone).
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'r' or r[2] ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 's', 'c', 'v', ARGV[2], 'x', ARGV[3])
redis.call('HDEL', KEYS[1], 't', 'd')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
