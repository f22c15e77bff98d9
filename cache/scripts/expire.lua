-- expire: set a new TTL on a cache entry, never on a load lock.
--
-- KEYS[1]  the cache key
-- ARGV[1]  TTL in milliseconds (integer string, already jittered)
-- ARGV[2]  the lock prefix: a key holding a string that starts with it is not an entry
-- ARGV[3]  the null marker, or "" : when non-empty, a null marker is not renewed either
--          (sliding expiration renews real values only)
--
-- Reply: 1 when the TTL was set; 0 when the key is missing or was skipped.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, string.len(ARGV[2])) == ARGV[2] then
  return 0
end
if ARGV[3] ~= '' and v == ARGV[3] then
  return 0
end
return redis.call('PEXPIRE', KEYS[1], ARGV[1])
