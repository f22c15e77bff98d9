-- fill: the lock owner replaces its placeholder with the loaded value (compare-and-set).
--
-- KEYS[1]  the cache key
-- ARGV[1]  the owner's lock placeholder
-- ARGV[2]  the value to store (an encoded value or the null marker)
-- ARGV[3]  TTL in milliseconds (integer string, already jittered)
--
-- Reply: 1 when the key still held ARGV[1] and now holds ARGV[2] with PX ARGV[3]; 0 when it
-- held anything else (the lock expired, or the key was deleted or set meanwhile), in which
-- case the key is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
