-- replay.lua: move one dead letter back onto its topic, atomically: XADD to the topic and
-- XDEL from the dead-letter stream.
--
-- KEYS[1]  the dead-letter stream
-- KEYS[2]  the topic stream (same hash tag as KEYS[1])
-- ARGV[1]  dead-letter entry id
-- ARGV[2]  "1": deliver to the dead letter's group only (the new entry gets a replay_group
--          field naming it; other groups acknowledge it unhandled); "0": to every group
--
-- The new entry has the dead letter's fields without the dl_* fields (and without an old
-- replay_group field).
--
-- Reply: the new entry's id, or nil when the dead letter does not exist.
local dlq, stream = KEYS[1], KEYS[2]
local r = redis.call('XRANGE', dlq, ARGV[1], ARGV[1])
if #r == 0 then
  return false
end
local src = r[1][2]
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
if ARGV[2] == '1' and group ~= '' then
  fields[#fields + 1] = 'replay_group'
  fields[#fields + 1] = group
end
if #fields == 0 then
  fields = {'body', ''}
end
local newid = redis.call('XADD', stream, '*', unpack(fields))
redis.call('XDEL', dlq, ARGV[1])
return newid
