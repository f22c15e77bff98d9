-- guard.lua: runs a handler's own script (Message.Guard) only while the handler's delivery
-- is current: the entry is pending in the group, owned by the consumer, with the delivery
-- count of that delivery (its fence, see ack.lua). The handler's script replaces the
-- placeholder line at the end, in a function of its own whose KEYS and ARGV are the
-- caller's keys and arguments (without the guard's own).
--
-- KEYS[1]  the topic stream
-- KEYS[2..] the handler's keys (in the stream's hash slot)
-- ARGV[1]  consumer group
-- ARGV[2]  consumer
-- ARGV[3]  entry id
-- ARGV[4]  delivery count of the delivery (its fence)
-- ARGV[5..] the handler's arguments
--
-- Reply: the handler's script's reply, or the error "STALEDELIVERY ..." when the delivery is
-- no longer current (nothing ran).
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 or p[1][2] ~= ARGV[2] or p[1][4] ~= tonumber(ARGV[4]) then
  return redis.error_reply('STALEDELIVERY the delivery is no longer current (taken over, delivered again or completed)')
end
local keys, argv = {}, {}
for i = 2, #KEYS do
  keys[i - 1] = KEYS[i]
end
for i = 5, #ARGV do
  argv[i - 4] = ARGV[i]
end
return (function(KEYS, ARGV)
--[[script]]
end)(keys, argv)
