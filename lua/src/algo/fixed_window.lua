-- fixed_window.lua: the fixed window, exactly core.FixedWindow.Step. Needs now, n (the
-- cost), lib/math.lua and lib/expire.lua.
--
-- State: a string '<start>:<count>' (the current window's start in µs since the Unix epoch,
-- and the cost admitted in it); absent for a new key. Windows are aligned to multiples of W
-- since the epoch; a request at now counts against the window of eff = max(now, start), so
-- a request from before the stored window counts against the stored window.

-- fixed_window(key, window, limit) returns the decision and, when admitted, the function that
-- records it.
local function fixed_window(key, window, limit)
  local start, count = 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, c = string.match(v, '^(%d+):(%d+)$')
    start, count = tonumber(s), tonumber(c)
  end
  local eff = now
  if start > eff then eff = start end
  local ws = eff - fmod(eff, window)
  if ws ~= start then start, count = ws, 0 end
  local reset = start + window - now
  if count + n <= limit then
    return {1, limit, limit - count - n, 0, reset, 0}, function()
      redis.call('SET', key, fmt('%d:%d', start, count + n), 'PX', pexpire(reset))
    end
  end
  return {0, limit, limit - count, reset, reset, 0}
end
