-- ack_delete.lua: acknowledge entries of a consumer group and, when the stream has no other
-- group, delete them from the stream (Handler.DeleteOnAck): an entry every group has
-- acknowledged is never read again, so the stream holds only unconsumed entries. With a
-- second group (which may not have read them yet) the entries are only acknowledged.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2], ARGV[3], ...  entry ids (at most a few thousand)
--
-- Reply: {acked, deleted, groups}
--   acked    entries acknowledged (XACK's reply)
--   deleted  entries deleted (0 when the stream has several groups)
--   groups   the number of groups of the stream
local stream = KEYS[1]
local ids = {}
for i = 2, #ARGV do
  ids[#ids + 1] = ARGV[i]
end
local acked = redis.call('XACK', stream, ARGV[1], unpack(ids))
local groups = #redis.call('XINFO', 'GROUPS', stream)
local deleted = 0
if groups == 1 then
  deleted = redis.call('XDEL', stream, unpack(ids))
end
return {acked, deleted, groups}
