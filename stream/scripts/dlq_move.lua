-- dlq_move.lua: the last step of a large dead-letter move (see deadletter.lua, status 2),
-- run in one MULTI/EXEC after dlq_mark.lua and the client's XADD of the dead letter to
-- KEYS[2]. It checks again, atomically, that the entry is still pending in the group with
-- the owner and delivery count the dead letter records, idle at least ARGV[3] ms, and still
-- in the stream; then it acknowledges it. When a check fails it deletes the dead letter the
-- XADD just wrote, so nobody ever sees it; when the XADD failed it changes nothing and the
-- entry stays pending. Either way the move happens once or not at all.
--
-- KEYS[1]  the topic stream
-- KEYS[2]  its dead-letter stream (same hash tag)
-- KEYS[3]  the mark written by dlq_mark.lua for KEYS[2] (same hash tag)
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  minimum idle time in ms ("0": any)
-- ARGV[4]  owner the dead letter records (exact)
-- ARGV[5]  delivery count the dead letter records ('%d')
-- ARGV[6]  most entries kept in the dead-letter stream (exact MAXLEN); "0": unbounded
-- ARGV[7]  most age of dead letters in ms (MINID); "0": unbounded
--
-- Reply: {status, dead letters trimmed}
--   status  1: moved (the transaction's XADD reply is the dead letter's id)
--   status  0: no longer pending as expected; nothing changed
--   status -1: pending but deleted from the stream; it was acknowledged, no dead letter
--   status -2: the XADD failed; nothing changed, the entry stays pending
local stream, dlq, mark = KEYS[1], KEYS[2], KEYS[3]
local group, id = ARGV[1], ARGV[2]
local before = redis.call('GET', mark)
if not before then
  return redis.error_reply('dlq_move: no mark in ' .. mark)
end
redis.call('DEL', mark)
local added = redis.call('XLEN', dlq) == tonumber(before) + 1
local function undo()
  if added then
    local top = redis.call('XREVRANGE', dlq, '+', '-', 'COUNT', 1)
    redis.call('XDEL', dlq, top[1][1])
  end
end
local p = redis.call('XPENDING', stream, group, 'IDLE', ARGV[3], id, id, 1)
if #p == 0 or p[1][2] ~= ARGV[4] or p[1][4] ~= tonumber(ARGV[5]) then
  undo()
  return {0, 0}
end
if #redis.call('XRANGE', stream, id, id) == 0 then
  undo()
  redis.call('XACK', stream, group, id)
  return {-1, 0}
end
if not added then
  return {-2, 0}
end
redis.call('XACK', stream, group, id)
local trimmed = 0
if tonumber(ARGV[6]) > 0 then
  trimmed = trimmed + redis.call('XTRIM', dlq, 'MAXLEN', '=', ARGV[6])
end
local maxage = tonumber(ARGV[7])
if maxage > 0 then
  local t = redis.call('TIME')
  local usec = tonumber(t[2])
  local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
  if now > maxage then
    trimmed = trimmed + redis.call('XTRIM', dlq, 'MINID', '=', string.format('%d-0', now - maxage))
  end
end
return {1, trimmed}
