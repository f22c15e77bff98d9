-- sink_write.lua: append records to a list, each only if its idempotency key is new.
--
-- KEYS[1]     the list
-- KEYS[2..n]  one idempotency key per record (same hash tag as KEYS[1])
-- ARGV[1]     TTL of the idempotency keys in ms
-- ARGV[2..n]  the records, in the order of KEYS[2..n]
--
-- For each record: SET key 1 NX PX ttl; if it was set, RPUSH the record. All records of one
-- call are written atomically; a key repeated within a call writes its first record only.
--
-- Reply: {written_1, ..., written_n-1}: 1 for a record appended, 0 for a duplicate. A list
-- key holding another type is an error raised before anything is written.
local t = redis.call('TYPE', KEYS[1])['ok']
if t ~= 'list' and t ~= 'none' then
  return redis.error_reply('WRONGTYPE sink_write.lua: ' .. KEYS[1] .. ' is a ' .. t .. ', not a list')
end
local out = {}
for i = 2, #KEYS do
  if redis.call('SET', KEYS[i], '1', 'NX', 'PX', ARGV[1]) then
    redis.call('RPUSH', KEYS[1], ARGV[i])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
