-- acquire: read a cache key, or take the load lock on it when it is empty.
--
-- KEYS[1]  the cache key
-- ARGV[1]  the lock placeholder: lock prefix .. owner token
-- ARGV[2]  lock TTL in milliseconds (integer string)
--
-- Reply: nil when the key was empty and now holds ARGV[1] with PX ARGV[2] (the caller owns
-- the lock); otherwise the key's current string, untouched (a value, a null marker or
-- another owner's placeholder).
local v = redis.call('GET', KEYS[1])
if v then
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
