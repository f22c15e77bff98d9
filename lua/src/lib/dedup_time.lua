-- dedup_time.lua: the arguments and time of the windowed-deduplication scripts after now:
-- ARGV[2] the window W (µs, in [1, MAX_DURATION]); t = max(high-water mark KEYS[2], now),
-- the time the operation runs at (core.WindowDedup).
local window = tonumber(ARGV[2])
if not window or window < 1 or window > MAX_DURATION then
  return redis.error_reply('ERR {{script}}: window out of range')
end
local t = tonumber(redis.call('GET', KEYS[2]) or 0)
if now > t then t = now end
