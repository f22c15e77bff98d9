-- result.lua: records a handler's progress, result or failure for one entry
-- (Handler.Results): a hash per entry, with a TTL, indexed by expiry in a sorted set that
-- bounds how many are kept. Writes are fenced by the delivery count: a write of a delivery
-- older than the one the record holds is refused, and a progress report or result of a
-- delivery that is no longer current (the entry taken over, delivered again or completed
-- since) is refused too, as guard.lua checks it.
--
-- KEYS[1]  the topic stream
-- KEYS[2]  the entry's record (hash)
-- KEYS[3]  the index of the group's records (sorted set: member = entry id, score = expiry ms)
-- ARGV[1]  mode: 'progress', 'completed' (both need the delivery current) or 'failed' (after
--          the dead-letter move: the entry is no longer pending)
-- ARGV[2]  consumer group
-- ARGV[3]  consumer
-- ARGV[4]  entry id
-- ARGV[5]  delivery count of the delivery (its fence)
-- ARGV[6]  TTL of the record (ms)
-- ARGV[7]  most records the index keeps
-- ARGV[8]  the record prefix (KEYS[2] is this prefix .. ARGV[4])
-- ARGV[9]  the value: the progress or result (JSON), or the failure's reason; '' for none
-- ARGV[10] the message's key
--
-- Reply: the number of older records deleted to keep the bound, or the error
-- "STALEDELIVERY ..." when the delivery is not current (nothing written).
local mode, fence = ARGV[1], tonumber(ARGV[5])
local ttl, keep = tonumber(ARGV[6]), tonumber(ARGV[7])
if (mode ~= 'progress' and mode ~= 'completed' and mode ~= 'failed') or not fence or not ttl or ttl < 1 or not keep or keep < 1 then
  return redis.error_reply('ERR result: bad arguments')
end
if mode ~= 'failed' then
  local p = redis.call('XPENDING', KEYS[1], ARGV[2], ARGV[4], ARGV[4], 1)
  if #p == 0 or p[1][2] ~= ARGV[3] or p[1][4] ~= fence then
    return redis.error_reply('STALEDELIVERY the delivery is no longer current (taken over, delivered again or completed)')
  end
end
local held = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
if fence < held then
  return redis.error_reply('STALEDELIVERY a later delivery recorded its outcome')
end
local t = redis.call('TIME')
local us = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (us - math.fmod(us, 1000)) / 1000
local state = 'active'
if mode ~= 'progress' then state = mode end
redis.call('HSET', KEYS[2], 'state', state, 'fence', ARGV[5], 'updated', string.format('%d', now), 'key', ARGV[10])
if mode == 'progress' then
  redis.call('HSET', KEYS[2], 'progress', ARGV[9])
elseif mode == 'completed' then
  redis.call('HDEL', KEYS[2], 'error')
  if ARGV[9] ~= '' then redis.call('HSET', KEYS[2], 'result', ARGV[9]) else redis.call('HDEL', KEYS[2], 'result') end
else
  redis.call('HSET', KEYS[2], 'error', ARGV[9])
end
redis.call('PEXPIRE', KEYS[2], ARGV[6])
-- The index: drop what expired, add this record, then delete the oldest beyond the bound (at
-- most 16 per call, so a lowered bound is reached over a few writes, never in one long call).
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%d', now))
redis.call('ZADD', KEYS[3], string.format('%d', now + ttl), ARGV[4])
local over = redis.call('ZCARD', KEYS[3]) - keep
local deleted = 0
if over > 0 then
  local old = redis.call('ZPOPMIN', KEYS[3], string.format('%d', math.min(over, 16)))
  for i = 1, #old, 2 do
    if old[i] ~= ARGV[4] then
      redis.call('DEL', ARGV[8] .. old[i])
      deleted = deleted + 1
    else
      redis.call('ZADD', KEYS[3], old[i + 1], old[i])
    end
  end
end
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return deleted
