-- gcra.lua: the token bucket and the leaky bucket (both GCRA), exactly core.TokenBucket.Step
-- and core.LeakyBucket.Step. State: a string holding the key's TAT (theoretical arrival
-- time, µs since the Unix epoch, '%d'); absent for a new key. Needs now, n (the cost),
-- lib/math.lua and lib/expire.lua; its quotients are written out ((a - fmod(a, b)) / b, as
-- lib/quo.lua), so that the token-bucket script need not define the helpers.

-- gcra(key, interval, tau, burst, shaping) decides key for the emission interval T, the
-- tolerance tau and burst = floor(tau / T); shaping (the leaky bucket) makes an admitted
-- decision carry its delay. It returns the decision and, when admitted, the function that
-- records it. A denied request consumes nothing; the TAT never moves back.
local function gcra(key, interval, tau, burst, shaping)
  local t = tonumber(redis.call('GET', key) or 0)
  if now > t then t = now end
  local next = t + n * interval
  if next - now <= tau then
    local delay = 0
    if shaping then delay = t - now end
    local left = tau - (next - now)
    return {1, burst, (left - fmod(left, interval)) / interval, 0, next - now, delay}, function()
      redis.call('SET', key, fmt('%d', next), 'PX', pexpire(next - now))
    end
  end
  local remaining = 0
  local free = tau - (t - now)
  if free > 0 then remaining = (free - fmod(free, interval)) / interval end
  return {0, burst, remaining, next - now - tau, t - now, 0}
end
