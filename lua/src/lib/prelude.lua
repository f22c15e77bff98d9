-- prelude.lua: the start of every script that reads the clock. The constants shared with
-- package core (only those the script uses), then now, the request's time in µs since the
-- Unix epoch: ARGV[1], or the server's TIME when ARGV[1] is '' (Redis 7 replicates scripts
-- by effects, so reading TIME is safe).
--@constants

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * MICROS_PER_SECOND + tonumber(t[2])
else
  now = tonumber(ARGV[1])
  if not now or now < 0 or now > MAX_TIME then
    return redis.error_reply('ERR {{script}}: now out of range')
  end
end
