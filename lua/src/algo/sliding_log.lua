-- sliding_log.lua: the exact sliding window log, exactly core.SlidingLog.Step. Needs now,
-- n (the cost), lib/math.lua and lib/expire.lua.
--
-- State: a sorted set, the key's log: one entry per distinct time at which requests were
-- admitted; score = that time (µs since the Unix epoch), member = the cumulative number of
-- units admitted on the key up to and including it ('%d'), so a request of cost n adds one
-- entry, not n.
--
-- A request at now runs at eff = max(now, newest entry); the units recorded at ts > eff - W
-- count; it is admitted iff count + n <= L and then recorded at eff, after pruning the
-- entries that left the window. Counting is O(log N): the live count is the newest member
-- minus the member of the newest entry that left the window (0 if none). Pruning keeps that
-- newest expired entry (the anchor), which stays out of the window for every later request,
-- so the count stays exact. Units admitted at the newest entry's time are merged into it, so
-- scores are distinct.

-- sliding_log(key, window, limit) returns the decision and, when admitted, the function that
-- records it.
local function sliding_log(key, window, limit)
  local total, newest = 0, nil
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[1] then
    total, newest = tonumber(last[1]), tonumber(last[2])
  end
  local eff = now
  if newest and newest > now then eff = newest end
  local cut = fmt('%d', eff - window)
  -- The anchor is the newest entry at or below cut. No entry (a new key): none. The newest
  -- entry at or below cut (the whole log left the window): the newest entry itself, so the
  -- query is skipped; tonumber(cut) is the bound Redis compares the scores with.
  local base, anchor = 0, nil
  if newest and newest <= tonumber(cut) then
    anchor = last[1]
  elseif newest then
    anchor = redis.call('ZREVRANGEBYSCORE', key, cut, '-inf', 'LIMIT', 0, 1)[1]
  end
  if anchor then base = tonumber(anchor) end
  local count = total - base
  if count + n <= limit then
    return {1, limit, limit - count - n, 0, eff + window - now, 0}, function()
      if anchor then
        local expired = redis.call('ZCOUNT', key, '-inf', cut)
        if expired > 1 then redis.call('ZREMRANGEBYRANK', key, 0, fmt('%d', expired - 2)) end
      end
      if newest == eff then redis.call('ZREM', key, last[1]) end
      redis.call('ZADD', key, fmt('%d', eff), fmt('%d', total + n))
      redis.call('PEXPIRE', key, pexpire(eff + window - now))
    end
  end
  -- Wait until the k oldest live units have left the window: unit base + k belongs to the
  -- first entry whose cumulative count reaches it, at most k entries in.
  local k = count + n - limit
  local live = redis.call('ZRANGEBYSCORE', key, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', 0, fmt('%d', k))
  local at
  for i = 1, #live, 2 do
    if tonumber(live[i]) >= base + k then
      at = tonumber(live[i + 1])
      break
    end
  end
  return {0, limit, limit - count, at + window - now, newest + window - now, 0}
end
