-- deadletter.lua: move one pending entry of a consumer group to the topic's dead-letter
-- stream: XADD to the dead-letter stream and XACK in the topic, in one atomic step. If any
-- step fails the script fails before writing, and the entry stays pending: nothing is lost.
-- An entry with more field names and values than ARGV[8] is not moved here (Lua's unpack,
-- which redis.call needs, stops at about 8,000 values): the reply carries it, and the caller
-- moves it in one MULTI/EXEC with dlq_mark.lua, its own XADD and dlq_move.lua.
--
-- KEYS[1]  the topic stream
-- KEYS[2]  its dead-letter stream (same hash tag as KEYS[1])
-- ARGV[1]  consumer group
-- ARGV[2]  entry id
-- ARGV[3]  error text, recorded in the dead letter
-- ARGV[4]  most entries kept in the dead-letter stream (exact MAXLEN); "0": unbounded
-- ARGV[5]  most age of dead letters in ms (MINID); "0": unbounded
-- ARGV[6]  minimum idle time in ms: the entry moves only if idle at least this long ("0":
--          any), so that a scan never races a redelivery in progress
-- ARGV[7]  expected owner (consumer name) of the pending entry; "": any
-- ARGV[8]  most field names and values moved by this script (at most 7000)
-- ARGV[9]  expected delivery count of the pending entry (the fence of the delivery that
--          dead-letters it, see ack.lua); "0" or absent: any
--
-- The dead letter keeps every field of the entry, followed by dl_id (the entry id), dl_group,
-- dl_consumer (the owner), dl_deliveries, dl_error and dl_ts (ms, from the server's TIME).
--
-- Reply: {status, dead-letter id, dead letters trimmed, delivery count[, owner, now, fields]}
--   status  1: moved
--   status  0: not pending in the group (acknowledged or moved by another consumer) or not
--              idle long enough; nothing changed
--   status  3: pending, but owned by another consumer than ARGV[7] or delivered again since
--              delivery ARGV[9] (a stale delivery); nothing changed
--   status -1: pending but deleted from the stream; it was acknowledged (dead-letter id "")
--   status  2: pending, but larger than ARGV[8]; nothing changed. The reply adds the owner,
--              the server time in ms ('%d') and the entry's fields {name, value, ...}
local stream, dlq = KEYS[1], KEYS[2]
local group, id = ARGV[1], ARGV[2]
local p = redis.call('XPENDING', stream, group, 'IDLE', ARGV[6], id, id, 1)
if #p == 0 then
  return {0, '', 0, 0}
end
local owner, deliveries = p[1][2], p[1][4]
local want = tonumber(ARGV[9] or '0') or 0
if (ARGV[7] ~= '' and owner ~= ARGV[7]) or (want > 0 and deliveries ~= want) then
  return {3, '', 0, deliveries}
end
local r = redis.call('XRANGE', stream, id, id)
if #r == 0 then
  redis.call('XACK', stream, group, id)
  return {-1, '', 0, deliveries}
end
local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
local fields = r[1][2]
local n = #fields
if n + 12 > tonumber(ARGV[8]) then
  return {2, '', 0, deliveries, owner, string.format('%d', now), fields}
end
fields[n + 1] = 'dl_id'
fields[n + 2] = id
fields[n + 3] = 'dl_group'
fields[n + 4] = group
fields[n + 5] = 'dl_consumer'
fields[n + 6] = owner
fields[n + 7] = 'dl_deliveries'
fields[n + 8] = string.format('%d', deliveries)
fields[n + 9] = 'dl_error'
fields[n + 10] = ARGV[3]
fields[n + 11] = 'dl_ts'
fields[n + 12] = string.format('%d', now)
local newid = redis.call('XADD', dlq, '*', unpack(fields))
redis.call('XACK', stream, group, id)
local trimmed = 0
if tonumber(ARGV[4]) > 0 then
  trimmed = trimmed + redis.call('XTRIM', dlq, 'MAXLEN', '=', ARGV[4])
end
local maxage = tonumber(ARGV[5])
if maxage > 0 and now > maxage then
  trimmed = trimmed + redis.call('XTRIM', dlq, 'MINID', '=', string.format('%d-0', now - maxage))
end
return {1, newid, trimmed, deliveries}
