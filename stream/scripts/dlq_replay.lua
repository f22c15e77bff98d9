-- dlq_replay.lua: the last step of a large replay (see replay.lua, status 2), run in one
-- MULTI/EXEC after dlq_mark.lua and the client's XADD of the entry to KEYS[2]. If the XADD
-- ran, it deletes the dead letter; if the dead letter is gone (another replay or a delete
-- came first) it deletes the entry the XADD just wrote, so nobody ever sees it. If the XADD
-- failed, nothing changes. Either way the dead letter is replayed once or not at all.
--
-- KEYS[1]  the dead-letter stream
-- KEYS[2]  the topic stream (same hash tag)
-- KEYS[3]  the mark written by dlq_mark.lua for KEYS[2] (same hash tag)
-- ARGV[1]  dead-letter id
--
-- Reply: status
--   1: replayed (the transaction's XADD reply is the new entry's id)
--   0: the dead letter no longer exists; nothing changed
--  -2: the XADD failed; nothing changed, the dead letter stays
local dlq, stream, mark = KEYS[1], KEYS[2], KEYS[3]
local before = redis.call('GET', mark)
if not before then
  return redis.error_reply('dlq_replay: no mark in ' .. mark)
end
redis.call('DEL', mark)
if redis.call('XLEN', stream) ~= tonumber(before) + 1 then
  return -2
end
if redis.call('XDEL', dlq, ARGV[1]) == 1 then
  return 1
end
local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
redis.call('XDEL', stream, top[1][1])
return 0
