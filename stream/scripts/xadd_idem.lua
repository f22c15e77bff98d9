-- xadd_idem.lua: append one entry to a stream at most once per idempotency key, on servers
-- without XADD IDMP (Producer.Send with WithIdempotencyKey): the first call with a key
-- appends the entry and records its id under the key for ARGV[1] ms; a later call with the
-- same key, while the record lives, appends nothing and returns the recorded id.
--
-- KEYS[1]  the stream
-- KEYS[2]  the key's record (a string: the entry id; same hash tag as KEYS[1])
-- ARGV[1]  how long the record lives, in ms (integer)
-- ARGV[2]  "0", or the approximate MAXLEN to trim the stream to on append (XADD MAXLEN ~)
-- ARGV[3], ARGV[4], ...  the entry's field names and values (at most a few hundred)
--
-- Reply: the entry id: the new entry's, or the recorded one for a repeated key (that entry
-- may have been trimmed or deleted since). A record key holding another type, or a stream
-- key holding a non-stream, is an error raised before anything is written.
local prev = redis.call('GET', KEYS[2])
if prev then
  return prev
end
local id
if ARGV[2] ~= '0' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(ARGV, 3))
else
  id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
end
redis.call('SET', KEYS[2], id, 'PX', ARGV[1])
return id
