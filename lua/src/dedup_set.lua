-- dedup_set.lua: exact set deduplication, check-and-mark of one or more elements (SADD is
-- atomic, so across processes exactly one caller sees an element as new), with an optional
-- expiry of the whole set after the last write.
--
-- KEYS[1]  set: the elements seen
-- ARGV[1]  TTL (ms) applied to the set after the write; '0' keeps the set forever
-- ARGV[2..] the elements (non-empty), checked and added in order
--
-- Reply: one integer per element: 1 if it was already in the set (a duplicate), 0 if it is
--        new.
-- Errors: 'ERR dedup_set: foreign state: key ...' when KEYS[1] is not a set (lib/guard.lua).

--@include lib/math.lua
--@include lib/guard.lua
-- add adds the elements; SADD fails on a key of another type before writing anything.
local function add(key)
  local out = {}
  for i = 2, #ARGV do
    out[i - 1] = 1 - redis.call('SADD', key, ARGV[i])
  end
  return out
end
local ok, out = guard(add, KEYS[1])
if not ok then return out end
if ARGV[1] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return out
