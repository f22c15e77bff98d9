-- ack.lua: acknowledge a consumer's deliveries of a consumer group, fenced: an entry is
-- acknowledged only while its delivery is current, that is pending, owned by ARGV[2] and
-- with the delivery count the delivery had (XCLAIM and XREADGROUP count one more delivery on
-- every claim, so a takeover or redelivery moves the count on). An entry another consumer
-- owns, or delivered again since, is refused: the delivery that superseded it settles it.
-- With ARGV[3] = "1" the acknowledged entries are also deleted when the stream has no other
-- group (Handler.DeleteOnAck): an entry every group has acknowledged is never read again.
--
-- The check costs one XPENDING for the batch: the consumer's pending entries from ARGV[4] to
-- ARGV[5] (the batch's smallest and largest id), at most ARGV[6] of them; an id it does not
-- list (owned by another consumer, not pending, or beyond ARGV[6]) is looked up alone.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3]  "1": delete the acknowledged entries when the stream has one group; "0": do not
-- ARGV[4]  the smallest entry id of the batch
-- ARGV[5]  the largest entry id of the batch
-- ARGV[6]  most entries the range lookup returns
-- ARGV[7], ARGV[8], ...  pairs of entry id and delivery count (at most a few thousand)
--
-- Reply: {acked, deleted, groups, stale, gone}
--   acked    entries acknowledged (XACK's reply)
--   deleted  entries deleted (0 unless ARGV[3] is "1" and the stream has one group)
--   groups   the number of groups of the stream (0 unless ARGV[3] is "1")
--   stale    {id, ...} pending, but owned by another consumer or delivered again: refused
--   gone     {id, ...} no longer pending (acknowledged or dead-lettered already)
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local mine = {}
for _, e in ipairs(redis.call('XPENDING', stream, group, ARGV[4], ARGV[5], ARGV[6], me)) do
  mine[e[1]] = e[4]
end
local ids, stale, gone = {}, {}, {}
for i = 7, #ARGV - 1, 2 do
  local id, want = ARGV[i], tonumber(ARGV[i + 1])
  local n = mine[id]
  if n == nil then
    local p = redis.call('XPENDING', stream, group, id, id, 1)
    if #p == 0 then
      gone[#gone + 1] = id
    elseif p[1][2] ~= me or p[1][4] ~= want then
      stale[#stale + 1] = id
    else
      ids[#ids + 1] = id
    end
  elseif n ~= want then
    stale[#stale + 1] = id
  else
    ids[#ids + 1] = id
  end
end
if #ids == 0 then
  return {0, 0, 0, stale, gone}
end
local acked = redis.call('XACK', stream, group, unpack(ids))
local groups, deleted = 0, 0
if ARGV[3] == '1' then
  groups = #redis.call('XINFO', 'GROUPS', stream)
  if groups == 1 then
    deleted = redis.call('XDEL', stream, unpack(ids))
  end
end
return {acked, deleted, groups, stale, gone}
