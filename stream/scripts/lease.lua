-- lease.lua: refreshes the entries a consumer holds (read or claimed, queued or being
-- handled), so that other consumers do not take them over: XCLAIM with min-idle 0 resets an
-- entry's idle time; JUSTID does not count a delivery, and RETRYCOUNT restates the count for
-- servers that count one anyway (miniredis). Only entries still pending and owned by the
-- consumer are touched.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3..] entry ids
--
-- Reply: {taken, gone}
--   taken  {id, ...} entries now owned by another consumer (the lease was lost)
--   gone   {id, ...} entries no longer pending (acknowledged)
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local taken, gone = {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local p = redis.call('XPENDING', stream, group, id, id, 1)
  if #p == 0 then
    gone[#gone + 1] = id
  elseif p[1][2] ~= me then
    taken[#taken + 1] = id
  else
    redis.call('XCLAIM', stream, group, me, 0, id, 'RETRYCOUNT', p[1][4], 'JUSTID')
  end
end
return {taken, gone}
