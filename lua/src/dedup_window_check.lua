-- dedup_window_check.lua: windowed deduplication, read-only check of one element, exactly
-- core.WindowDedup.IsDuplicate at t = max(high-water mark, now). Writes nothing, so it runs
-- with EVALSHA_RO (and on replicas).
--
-- KEYS[1]  sorted set: member = element, score = last-seen time (µs since the Unix epoch)
-- KEYS[2]  string: the high-water mark (µs, '%d')
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  window W (µs)
-- ARGV[3]  the element (non-empty), or '' to count instead
--
-- Reply: for an element, 1 if it is a duplicate at t, else 0; for '', the number of
--        elements still within the window at t (last > t - W).
-- Errors: 'ERR dedup_window_check: ...' for malformed arguments.

--@include lib/prelude.lua
--@include lib/dedup_time.lua
if ARGV[3] == '' then
  return redis.call('ZCOUNT', KEYS[1], '(' .. string.format('%d', t - window), '+inf')
end
local last = redis.call('ZSCORE', KEYS[1], ARGV[3])
if last and t - tonumber(last) < window then return 1 end
return 0
