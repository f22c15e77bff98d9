-- delay_cancel.lua: cancel one scheduled message that is not yet due and moved: delete it
-- from the topic's schedule and hash together, with its link to a unique id (the id's
-- record then names a message that is gone, which frees the id; see xadd_unique.lua).
--
-- KEYS[1]  the topic's schedule (sorted set)
-- KEYS[2]  the topic's scheduled messages (hash; same hash tag)
-- KEYS[3]  the links of scheduled messages to their unique id (hash; same hash tag)
-- ARGV[1]  the scheduled message's id
--
-- Reply: 1 when the message was scheduled and is now cancelled, 0 when it was not scheduled
-- (unknown id, already moved into the stream, or cancelled before)
local n = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return n
