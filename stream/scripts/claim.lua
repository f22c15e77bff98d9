-- claim.lua: claims pending entries of a consumer group for a consumer (XCLAIM with no idle
-- minimum, which counts a new delivery) and replies each with its new delivery count, read
-- in the same atomic step, so that the count the handler gets is the entry's: the fence of
-- its delivery (see ack.lua). Used to take over a partition's pending entries whoever holds
-- them, and to hand out again a consumer's own entries whose delivery reply was lost.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer that claims
-- ARGV[3]  "own": only entries pending for ARGV[2]; "any": whoever holds them
-- ARGV[4..] entry ids
--
-- Reply: {{id, {field, value, ...}, deliveries}, ...} the entries claimed (not those no
-- longer pending, held by another consumer in mode "own", or deleted from the stream)
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local own = ARGV[3] == 'own'
local claimed = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if #p > 0 and (not own or p[1][2] == me) then
    local c = redis.call('XCLAIM', stream, group, me, 0, id)
    if #c > 0 and c[1] then
      claimed[#claimed + 1] = {id, c[1][2], p[1][4] + 1}
    end
  end
end
return claimed
