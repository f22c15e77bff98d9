-- window_args.lua: the arguments of the single-limit window scripts (sliding log, sliding
-- counter, fixed window) after now: ARGV[2] the cost n in [1, limit], ARGV[3] the window
-- (µs), ARGV[4] the limit, ARGV[5] the expiry margin (ms).
local n, window, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not n or n < 1 or n > limit then
  return redis.error_reply('ERR {{script}}: cost out of range')
end
local margin = tonumber(ARGV[5])
