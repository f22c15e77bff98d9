-- members_beat.lua: records a consumer's heartbeat in the members of a partitioned topic's
-- group and counts the live members (owner.go). Members are scored by the server time (ms)
-- at which they expire; expired members are removed first.
--
-- KEYS[1]  the members sorted set (PartitionMembersKey)
-- ARGV[1]  consumer name
-- ARGV[2]  heartbeat time to live, milliseconds
-- ARGV[3]  "1" to leave instead (remove the member)
--
-- Reply: the number of live members, the caller included unless it left
local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now))
if ARGV[3] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], string.format('%d', 2 * ttl))
end
return redis.call('ZCARD', KEYS[1])
