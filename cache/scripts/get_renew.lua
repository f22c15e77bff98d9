-- get_renew: read a cache key and, when it holds a real value, renew its TTL (sliding
-- expiration in one round trip).
--
-- KEYS[1]  the cache key
-- ARGV[1]  TTL in milliseconds (integer string, already jittered)
-- ARGV[2]  the marker prefix: strings starting with it (null markers, lock placeholders)
--          are returned but never renewed, except those starting with ARGV[3]
-- ARGV[3]  the tagged entry prefix: a tagged entry is a real value, renewed
--
-- Reply: the key's string, or nil when the key is missing.
local v = redis.call('GET', KEYS[1])
if v and (string.sub(v, 1, #ARGV[2]) ~= ARGV[2] or string.sub(v, 1, #ARGV[3]) == ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return v
