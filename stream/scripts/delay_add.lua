-- delay_add.lua: schedule one message for delivery into a topic at a later time: its id goes
-- into the topic's schedule (a sorted set scored by due time) and its encoded entry into the
-- companion hash, in one atomic step, so that the mover (delay_move.lua) always finds both.
--
-- KEYS[1]  the topic's schedule (sorted set: id -> due time in ms)
-- KEYS[2]  the topic's scheduled messages (hash: id -> encoded entry; same hash tag)
-- ARGV[1]  the scheduled message's id (unique, time-ordered)
-- ARGV[2]  "rel": ARGV[3] is a delay in ms from now by the server's clock (TIME);
--          "abs": ARGV[3] is the due time in ms since the Unix epoch
-- ARGV[3]  delay or due time, in ms (integer)
-- ARGV[4]  the encoded entry: for each field name and value, "<byte length>:<bytes>"
--
-- Reply: the due time in ms since the Unix epoch, as a decimal string
local sched, msgs = KEYS[1], KEYS[2]
local id, mode = ARGV[1], ARGV[2]
local v = tonumber(ARGV[3])
local due = v
if mode == 'rel' then
  local t = redis.call('TIME')
  local usec = tonumber(t[2])
  due = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000 + v
end
local dues = string.format('%d', due)
redis.call('HSET', msgs, id, ARGV[4])
redis.call('ZADD', sched, dues, id)
return dues
