-- park.lua: takes back, uncounted, the delivery of an entry its consumer holds but may not
-- handle yet (the handler's consumption limit denied it). XCLAIM with min-idle 0 resets the
-- entry's idle time, so that the owner's redelivery (redeliver.lua, which counts a delivery
-- again) waits its backoff from now; JUSTID claims without counting a delivery, and
-- RETRYCOUNT sets the count one lower: to what it was before this delivery. Only an entry
-- still pending, owned by the consumer and delivered as often as the delivery knows (its
-- fence) is parked, so a stale delivery changes nothing.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3]  entry id
-- ARGV[4]  the delivery's count (its fence)
--
-- Reply: 1 parked; 0 not (no longer pending, owned by another consumer, or delivered since)
local stream, group, me, id = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
local p = redis.call('XPENDING', stream, group, id, id, 1)
if #p == 0 or p[1][2] ~= me or p[1][4] ~= n then
  return 0
end
redis.call('XCLAIM', stream, group, me, 0, id, 'RETRYCOUNT', string.format('%d', math.max(n - 1, 0)), 'JUSTID')
return 1
