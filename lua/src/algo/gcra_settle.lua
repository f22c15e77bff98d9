-- gcra_settle.lua: the settlement of a reservation on the token and leaky buckets, exactly
-- core's (Limit.SettleState, core/settle.go). State as gcra.lua's. Needs now, actual (the
-- reservation's actual cost), lib/math.lua, lib/quo.lua, lib/ceildiv.lua and
-- lib/expire.lua.

-- gcra_settle(key, interval, tau, burst, at, charged) applies actual - charged to the TAT
-- of key, for a reservation that took charged units leaving the TAT at: a refund moves the
-- TAT back (never below now: a full bucket, then the key is deleted), a charge moves it
-- forward from the TAT (or from min(at, now) for a key forgotten since), never past
-- now + tau. It returns the change applied, in units.
local function gcra_settle(key, interval, tau, burst, at, charged)
  local t = tonumber(redis.call('GET', key) or 0)
  if actual < charged then
    if t <= now then return 0 end
    local k = ceildiv(t - now, interval)
    if charged - actual < k then k = charged - actual end
    local next = t - (charged - actual) * interval
    if next > now then
      redis.call('SET', key, fmt('%d', next), 'PX', pexpire(next - now))
    else
      redis.call('DEL', key)
    end
    return -k
  end
  local base = at
  if now < base then base = now end
  if t > base then base = t end
  local room = 0
  if now + tau >= base then room = quo(now + tau - base, interval) end
  local k = actual - charged
  if room < k then k = room end
  if k > 0 and base + k * interval > now then
    redis.call('SET', key, fmt('%d', base + k * interval), 'PX', pexpire(base + k * interval - now))
  end
  if k < 0 then k = 0 end
  return k
end
