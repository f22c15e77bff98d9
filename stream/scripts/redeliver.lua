-- redeliver.lua: delivers again, to the consumer that owns them, pending entries whose
-- handling failed there, once they have been idle for their retry backoff (the consumer
-- resets an entry's idle time when its handler fails, so the backoff counts from the
-- failure). XCLAIM counts the new delivery.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer (the owner)
-- ARGV[3]  max deliveries
-- ARGV[4], ARGV[5], ...  pairs of entry id and backoff in ms
--
-- Reply: {claimed, waiting, gone, deleted}
--   claimed  {{id, {field, value, ...}, deliveries}, ...} (deliveries counts this claim)
--   waiting  {{id, ms left}, ...} not idle long enough yet
--   gone     {id, ...} no longer pending, owned by another consumer, or delivered max
--            times (left to the pending-entry scan)
--   deleted  {id, ...} pending but deleted from the stream: acknowledged
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local maxd = tonumber(ARGV[3])
local claimed, waiting, gone, deleted = {}, {}, {}, {}
for i = 4, #ARGV - 1, 2 do
  local id, need = ARGV[i], tonumber(ARGV[i + 1])
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if #p == 0 or p[1][2] ~= me or p[1][4] >= maxd then
    gone[#gone + 1] = id
  elseif p[1][3] < need then
    waiting[#waiting + 1] = {id, need - p[1][3]}
  else
    local r = redis.call('XRANGE', stream, id, id)
    if #r == 0 then
      redis.call('XACK', stream, group, id)
      deleted[#deleted + 1] = id
    else
      local c = redis.call('XCLAIM', stream, group, me, string.format('%d', need), id)
      if #c > 0 and c[1] then
        claimed[#claimed + 1] = {id, c[1][2], p[1][4] + 1}
      else
        gone[#gone + 1] = id
      end
    end
  end
end
return {claimed, waiting, gone, deleted}
