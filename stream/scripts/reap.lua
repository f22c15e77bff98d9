-- reap.lua: deletes from a group the consumers that have been idle (no read, claim or other
-- interaction) for at least ARGV[3] ms and own no pending entry: names left by processes that
-- crashed. A consumer that owns entries is never deleted (its entries are taken over first).
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  the calling consumer (never deleted)
-- ARGV[3]  idle time in ms
--
-- Reply: {name, ...} the consumers deleted
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local limit = tonumber(ARGV[3])
local removed = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', stream, group)) do
  local name, pending, idle
  for i = 1, #c - 1, 2 do
    local k = c[i]
    if k == 'name' then
      name = c[i + 1]
    elseif k == 'pending' then
      pending = c[i + 1]
    elseif k == 'idle' then
      idle = c[i + 1]
    end
  end
  if name and name ~= me and pending == 0 and idle and idle >= limit then
    redis.call('XGROUP', 'DELCONSUMER', stream, group, name)
    removed[#removed + 1] = name
  end
end
return removed
