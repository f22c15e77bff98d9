-- dedup_window.lua: windowed deduplication, check-and-mark of one element, exactly
-- core.WindowDedup: the operation runs at t = max(high-water mark, now); the element is a
-- duplicate iff it was last seen at last with t - last < W; either way its last-seen time
-- becomes t (ZADD refreshes a duplicate), the mark becomes t, entries with last <= t - W are
-- pruned, and both keys expire KEY_TTL_MARGIN after the window (core.KeyTTLMargin).
--
-- KEYS[1]  sorted set: member = element, score = last-seen time (µs since the Unix epoch)
-- KEYS[2]  string: the high-water mark, the latest time any write used (µs, '%d')
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  window W (µs)
-- ARGV[3]  the element (non-empty)
--
-- Reply: 1 if the element was a duplicate, 0 if it is new (or its last sighting expired)
-- Errors: 'ERR dedup_window: ...' for malformed arguments; 'ERR dedup_window: foreign state:
--         key ...' for a key of another type or a mark that is not a time (lib/guard.lua).

--@include lib/prelude.lua
--@include lib/math.lua
--@include lib/guard.lua
--@include lib/dedup_time.lua
-- seen records the sighting; on a key of another type its first command fails before any
-- write.
local function seen(key)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt('%d', t - window))
  local added = redis.call('ZADD', key, fmt('%d', t), ARGV[3])
  local ttl = fmt('%d', ceildiv(window + KEY_TTL_MARGIN, MICROS_PER_MILLI))
  redis.call('SET', KEYS[2], fmt('%d', t), 'PX', ttl)
  redis.call('PEXPIRE', key, ttl)
  return 1 - added
end
local ok, dup = guard(seen, KEYS[1])
return dup
