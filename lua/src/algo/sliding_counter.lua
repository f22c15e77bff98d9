-- sliding_counter.lua: the sliding window counter, exactly core.SlidingCounter.Step (two
-- aligned fixed windows, the previous one weighted by its remaining overlap). Needs now, n
-- (the cost), lib/math.lua and lib/expire.lua.
--
-- State: a string '<start>:<count>:<prev>' (the current window's start in µs since the Unix
-- epoch, the cost admitted in it, and the cost admitted in the window before it); absent for
-- a new key. At eff = max(now, start) the estimate is prev*(W-(eff-start))/W + count; a
-- request is admitted iff count+n <= L and prev*(W-(eff-start)) <= (L-count-n)*W
-- (L * W <= 2^53, so every product is exact). A denial writes nothing (the state is not even
-- moved to eff's window).

-- sliding_counter(key, w, limit) returns the decision and, when admitted, the function that
-- records it.
local function sliding_counter(key, w, limit)
  local start, count, prev = 0, 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
    start, count, prev = tonumber(s), tonumber(c), tonumber(p)
  end
  local eff = now
  if start > eff then eff = start end
  local ws = eff - fmod(eff, w)
  if ws == start + w then
    prev = count
    start, count = ws, 0
  elseif ws ~= start then
    start, count, prev = ws, 0, 0
  end
  local weighted = prev * (w - (eff - start))
  if count + n <= limit and weighted <= (limit - count - n) * w then
    local reset = start + 2 * w - now
    return {1, limit, limit - count - n - ceildiv(weighted, w), 0, reset, 0}, function()
      redis.call('SET', key, fmt('%d:%d:%d', start, count + n, prev), 'PX', pexpire(reset))
    end
  end
  local remaining = limit - count - ceildiv(weighted, w)
  if remaining < 0 then remaining = 0 end
  local reset = start
  if count > 0 then reset = start + 2 * w elseif prev > 0 then reset = start + w end
  local at
  if count + n <= limit then
    at = start + w - quo((limit - count - n) * w, prev)
  else
    local m = quo((limit - n) * w, count)
    if m > w then m = w end
    at = start + 2 * w - m
  end
  return {0, limit, remaining, at - now, reset - now, 0}
end
