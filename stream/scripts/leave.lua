-- leave.lua: deletes a consumer from its group when it owns no pending entry (a consumer
-- that closes cleanly), atomically, so that an entry delivered in between is never orphaned.
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
--
-- Reply: 1 when deleted, 0 when kept (it owns pending entries), 2 when the group has no
-- such consumer
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #p > 0 then
  return 0
end
local info = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
for _, c in ipairs(info) do
  for i = 1, #c - 1, 2 do
    if c[i] == 'name' and c[i + 1] == ARGV[2] then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
      return 1
    end
  end
end
return 2
