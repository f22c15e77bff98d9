-- concurrency.lua: the concurrency limit, exactly core's concurrency (the sliding log's
-- admission with the lease TTL as the window). Needs now, n (the cost), lib/math.lua and
-- lib/expire.lua.
--
-- State: a sorted set, one member per held unit, scored by the time its lease was taken or
-- last extended (µs since the Unix epoch): 'l<token>.<i>' (i = 1..n) for a lease with a
-- token (lease_release.lua and lease_extend.lua find it by name), 'a<seq>.<i>' for an
-- admission without one (token 0), numbered by the member '#<seq>' scored -inf, which no
-- count or pruning reaches. A unit recorded at ts counts while ts > eff - W, eff =
-- max(now, newest score): counting is ZCOUNT, O(log N). An admitted request prunes the
-- units that stopped counting and adds its n members at eff.

-- concurrency(key, window, limit, token) returns the decision and, when admitted, the
-- function that records it.
local function concurrency(key, window, limit, token)
  local newest
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[1] and string.sub(last[1], 1, 1) ~= '#' then newest = tonumber(last[2]) end
  local eff = now
  if newest and newest > now then eff = newest end
  local cut = fmt('%d', eff - window)
  local count = redis.call('ZCOUNT', key, '(' .. cut, '+inf')
  if count + n <= limit then
    return {1, limit, limit - count - n, 0, eff + window - now, 0}, function()
      redis.call('ZREMRANGEBYSCORE', key, 0, cut)
      local name = 'l' .. fmt('%d', token)
      if token == 0 then
        local seq = 1
        local first = redis.call('ZRANGE', key, 0, 0)[1]
        if first and string.sub(first, 1, 1) == '#' then
          seq = tonumber(string.sub(first, 2)) + 1
          redis.call('ZREM', key, first)
        end
        redis.call('ZADD', key, '-inf', '#' .. fmt('%d', seq))
        name = 'a' .. fmt('%d', seq)
      end
      local score = fmt('%d', eff)
      for i = 1, n do redis.call('ZADD', key, score, name .. '.' .. fmt('%d', i)) end
      redis.call('PEXPIRE', key, pexpire(eff + window - now))
    end
  end
  -- Wait until the k oldest held units have expired.
  local k = count + n - limit
  local at = redis.call('ZRANGEBYSCORE', key, '(' .. cut, '+inf', 'WITHSCORES', 'LIMIT', fmt('%d', k - 1), 1)
  return {0, limit, limit - count, tonumber(at[2]) + window - now, newest + window - now, 0}
end
