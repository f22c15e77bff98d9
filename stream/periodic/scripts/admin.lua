-- admin.lua: pause, resume or remove one registered schedule.
--
-- KEYS[1]  the schedule's state (hash: last, paused, sent, skipped)
-- KEYS[2]  the topic's schedules (hash: name -> definition; same hash tag)
-- ARGV[1]  the schedule's name
-- ARGV[2]  "pause", "resume" or "remove"
--
-- Reply: 1 when the schedule is registered (and now paused, resumed or removed: its
-- definition and state deleted), 0 when it is not
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if ARGV[2] == 'remove' then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[1])
elseif ARGV[2] == 'pause' then
  redis.call('HSET', KEYS[1], 'paused', '1')
else
  redis.call('HSET', KEYS[1], 'paused', '0')
end
return 1
