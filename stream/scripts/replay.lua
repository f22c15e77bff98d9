-- replay.lua: move one dead letter back onto its topic, atomically: XADD to the topic and
-- XDEL from the dead-letter stream. The dead letter is the first one in the id range
-- ARGV[1]..ARGV[2]: one id for a replay by id, or "(<last replayed id>" .. "<bound>" for a
-- replay of all dead letters up to a bound (an exclusive start needs Redis 6.2). A dead
-- letter with more field names and values than ARGV[4] is not moved here (Lua's unpack, which
-- redis.call needs, stops at about 8,000 values): the reply carries its fields, and the
-- caller replays it in one MULTI/EXEC with dlq_mark.lua, its own XADD and dlq_replay.lua.
--
-- KEYS[1]  the dead-letter stream
-- KEYS[2]  the topic stream (same hash tag as KEYS[1])
-- ARGV[1]  first dead-letter id, inclusive ("(id": exclusive)
-- ARGV[2]  last dead-letter id, inclusive
-- ARGV[3]  "1": deliver to the dead letter's group only (the new entry gets a replay_group
--          field naming it; other groups acknowledge it unhandled); "0": to every group
-- ARGV[4]  most field names and values replayed by this script (at most 7000)
--
-- The new entry has the dead letter's fields without the dl_* fields (and without an old
-- replay_group field).
--
-- Reply: {status, dead-letter id, new entry id | fields}
--   status 0: no dead letter in the range; nothing changed ({0})
--   status 1: replayed as the new entry id
--   status 2: larger than ARGV[4]; nothing changed. The reply carries the fields of the new
--             entry {name, value, ...}
local dlq, stream = KEYS[1], KEYS[2]
local r = redis.call('XRANGE', dlq, ARGV[1], ARGV[2], 'COUNT', 1)
if #r == 0 then
  return {0}
end
local dlid, src = r[1][1], r[1][2]
local fields = {}
local group = ''
for i = 1, #src, 2 do
  local name = src[i]
  if name == 'dl_group' then
    group = src[i + 1]
  end
  if string.sub(name, 1, 3) ~= 'dl_' and name ~= 'replay_group' then
    fields[#fields + 1] = name
    fields[#fields + 1] = src[i + 1]
  end
end
if ARGV[3] == '1' and group ~= '' then
  fields[#fields + 1] = 'replay_group'
  fields[#fields + 1] = group
end
if #fields == 0 then
  fields = {'body', ''}
end
if #fields > tonumber(ARGV[4]) then
  return {2, dlid, fields}
end
local newid = redis.call('XADD', stream, '*', unpack(fields))
redis.call('XDEL', dlq, dlid)
return {1, dlid, newid}
