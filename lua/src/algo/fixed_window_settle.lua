-- fixed_window_settle.lua: the settlement of a reservation on the fixed window, exactly
-- core's (Limit.SettleState, core/settle.go). State as fixed_window.lua's. Needs now,
-- actual (the reservation's actual cost), lib/math.lua, lib/expire.lua and
-- lib/settle_count.lua.

-- fixed_window_settle(key, window, limit, at, charged) applies actual - charged to the
-- count of the window starting at at, the one the reservation was counted in, while it is
-- current (a key forgotten in it starts from an empty count). It returns the change
-- applied, in units.
local function fixed_window_settle(key, window, limit, at, charged)
  local start, count = 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, c = string.match(v, '^(%d+):(%d+)$')
    start, count = tonumber(s), tonumber(c)
  end
  local eff = now
  if start > eff then eff = start end
  if at + window <= eff or start > at then return 0 end
  if start < at then start, count = at, 0 end
  local k = settle_count(count, charged, limit)
  if k ~= 0 then
    redis.call('SET', key, fmt('%d:%d', start, count + k), 'PX', pexpire(start + window - now))
  end
  return k
end
