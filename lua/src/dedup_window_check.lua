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
-- Errors: 'ERR dedup_window_check: ...' for malformed arguments; 'ERR dedup_window_check:
--         foreign state: key ...' for a key of another type or a mark that is not a time.

--@readonly
--@include lib/prelude.lua
--@include lib/math.lua
--@include lib/guard.lua
--@include lib/dedup_time.lua
local function check(key)
  if ARGV[3] == '' then
    return redis.call('ZCOUNT', key, '(' .. fmt('%d', t - window), '+inf')
  end
  local last = redis.call('ZSCORE', key, ARGV[3])
  if last and t - tonumber(last) < window then return 1 end
  return 0
end
local ok, r = guard(check, KEYS[1])
return r
