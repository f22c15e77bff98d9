-- acquire.lua: take the lease of an idempotency key, or read what the key already holds.
--
-- KEYS[1]  the key's record, a hash: k the scoped key, f the fingerprint, s the state ('r'
--          running, 'c' completed); while running t the holder's token and d its lease
--          deadline (milliseconds of Redis TIME); once completed v the stored result and x
--          '1' when the result was too large to store
-- ARGV[1]  the scoped key (checked against k: two keys never share a record)
-- ARGV[2]  the fingerprint of the request
-- ARGV[3]  the caller's token, a random string
-- ARGV[4]  the lease in milliseconds (integer string)
-- ARGV[5]  the retention in milliseconds (integer string, at least the lease)
--
-- Reply: {0} the caller holds the lease of a new record; {4} the caller holds the lease of a
--        record whose holder's lease had expired (the holder crashed or hung); {1, v, x} the
--        key completed with the same fingerprint; {2, ms} the key is running under another
--        holder's lease, which has ms milliseconds left; {3} the key is bound to another
--        fingerprint (or, never in practice, to another scoped key).
local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
local r = redis.call('HMGET', KEYS[1], 'k', 'f', 's', 'd', 'v', 'x')
local code = 0
if r[3] == 'r' and tonumber(r[4]) <= now then
  code = 4
elseif r[3] then
  if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] then
    return {3}
  end
  if r[3] == 'c' then
    return {1, r[5] or '', r[6] or ''}
  end
  return {2, tonumber(r[4]) - now}
end
if code == 4 then
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'k', ARGV[1], 'f', ARGV[2], 's', 'r', 't', ARGV[3],
  'd', string.format('%d', now + tonumber(ARGV[4])))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {code}
