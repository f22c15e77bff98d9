-- unlock: the lock owner releases its lock (compare-and-delete).
--
-- KEYS[1]  the cache key
-- ARGV[1]  the owner's lock placeholder
--
-- Reply: 1 when the key held ARGV[1] and was deleted; 0 otherwise (not the owner, or the
-- lock already expired), in which case the key is left untouched.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
