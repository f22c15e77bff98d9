-- dlq_mark.lua: the first step of a large dead-letter move or replay, run inside the
-- MULTI/EXEC that also holds the XADD of the entry (built by the client, since Lua's unpack
-- cannot pass more than about 8,000 values to redis.call) and the closing script
-- (dlq_move.lua or dlq_replay.lua). It records the length of the stream the XADD writes to,
-- so that the closing script can tell whether the XADD ran: nothing else runs between the
-- three commands of one EXEC.
--
-- KEYS[1]  the stream the transaction's XADD writes to
-- KEYS[2]  the mark key (same hash tag as KEYS[1]), a string; a key of another type is left
--          alone and the script fails
--
-- Reply: the length of KEYS[1] ('%d'), also stored in KEYS[2] for 60 s.
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('dlq_mark: ' .. KEYS[2] .. ' holds a ' .. kind .. ', not a mark')
end
local n = string.format('%d', redis.call('XLEN', KEYS[1]))
redis.call('SET', KEYS[2], n, 'PX', '60000')
return n
