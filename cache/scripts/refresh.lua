-- refresh: an eager refresh replaces a value that is still there with the reloaded one.
--
-- KEYS[1]  the cache key
-- ARGV[1]  the value to store (an encoded value or the null marker)
-- ARGV[2]  TTL in milliseconds (integer string, already jittered)
-- ARGV[3]  the lock prefix: a key holding a load in progress is left alone
--
-- Reply: 1 when the key held a value or a null marker and now holds ARGV[1] with PX ARGV[2];
-- 0 when it was missing or held a lock (deleted or expired meanwhile: the next read loads).
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
