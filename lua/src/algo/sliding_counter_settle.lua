-- sliding_counter_settle.lua: the settlement of a reservation on the sliding counter,
-- exactly core's (Limit.SettleState, core/settle.go). State as sliding_counter.lua's.
-- Needs now, actual (the reservation's actual cost), lib/math.lua, lib/expire.lua and
-- lib/settle_count.lua.

-- sliding_counter_settle(key, w, limit, at, charged) applies actual - charged to the count
-- of the window starting at at: the current count while the key is in that window, the
-- previous window's count once it has moved on by one window, nothing after two. It
-- returns the change applied, in units.
local function sliding_counter_settle(key, w, limit, at, charged)
  local start, count, prev = 0, 0, 0
  local v = redis.call('GET', key)
  if v then
    local s, c, p = string.match(v, '^(%d+):(%d+):(%d+)$')
    start, count, prev = tonumber(s), tonumber(c), tonumber(p)
  end
  local eff = now
  if start > eff then eff = start end
  local k = 0
  if at + 2 * w <= eff then
    return 0
  elseif start == at then
    k = settle_count(count, charged, limit)
    count = count + k
  elseif start == at + w then
    k = settle_count(prev, charged, limit)
    prev = prev + k
  elseif start < at and now < at + w then
    start, count, prev = at, 0, 0
    k = settle_count(0, charged, limit)
    count = k
  else
    return 0
  end
  if k ~= 0 then
    local reset = start
    if count > 0 then reset = start + 2 * w elseif prev > 0 then reset = start + w end
    if reset > now then
      redis.call('SET', key, fmt('%d:%d:%d', start, count, prev), 'PX', pexpire(reset - now))
    else
      redis.call('DEL', key)
    end
  end
  return k
end
