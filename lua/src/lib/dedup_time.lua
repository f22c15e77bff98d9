-- dedup_time.lua: the arguments and time of the windowed-deduplication scripts after now:
-- ARGV[2] the window W (µs, in [1, MAX_DURATION]); t = max(high-water mark KEYS[2], now),
-- the time the operation runs at (core.WindowDedup). A mark that is not a time is foreign
-- state (lib/guard.lua, which must be included before).
local window = tonumber(ARGV[2])
if not window or window < 1 or window > MAX_DURATION then
  return redis.error_reply('ERR {{script}}: window out of range')
end
local function mark(key)
  local v = tonumber(redis.call('GET', key) or 0)
  if not v or v ~= v or v < 0 or v > MAX_TIME then error('not a time') end
  return v
end
local tok, t = guard(mark, KEYS[2])
if not tok then return t end
if now > t then t = now end
