-- dlq_last.lua: the id of the newest entry of a stream, without sending the entry.
--
-- KEYS[1]  the stream (a dead-letter stream)
--
-- Reply: the newest entry's id, or "" when the stream is empty or missing.
local r = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #r == 0 then
  return ''
end
return r[1][1]
