-- release.lua: give up the lease of an idempotency key without a result, so that the next
-- caller runs it.
--
-- KEYS[1]  the key's record (see acquire.lua)
-- ARGV[1]  the caller's token
--
-- Reply: 1 when the record was deleted; 0 when the caller did not hold the lease.
local r = redis.call('HMGET', KEYS[1], 's', 't')
if r[1] ~= 'r' or r[2] ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
