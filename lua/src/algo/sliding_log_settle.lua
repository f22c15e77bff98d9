-- sliding_log_settle.lua: the settlement of a reservation on the sliding log, exactly
-- core's (Limit.SettleState, core/settle.go). State as sliding_log.lua's: members are the
-- cumulative units up to each entry, so the units at one time are its member minus the
-- member before it, and a change of k units at one time adds k to the members of that
-- entry and of every newer one (rewritten, O(entries at or after it)). Needs now, actual
-- (the reservation's actual cost), lib/math.lua and lib/expire.lua.

-- sliding_log_settle(key, window, limit, at, charged) applies actual - charged to the units
-- recorded at at, while they are in the window: a refund removes at most the units at at
-- (an entry left with none is removed), a charge adds units at at, never more than the
-- window has room for. It returns the change applied, in units.
local function sliding_log_settle(key, window, limit, at, charged)
  local total, newest = 0, nil
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[1] then total, newest = tonumber(last[1]), tonumber(last[2]) end
  local eff = now
  if newest and newest > now then eff = newest end
  if at <= eff - window then return 0 end
  local sat = fmt('%d', at)
  local before = 0
  local b = redis.call('ZREVRANGEBYSCORE', key, '(' .. sat, '-inf', 'LIMIT', 0, 1)[1]
  if b then before = tonumber(b) end
  local after = redis.call('ZRANGEBYSCORE', key, sat, '+inf', 'WITHSCORES')
  local here = 0 -- the units at at
  if after[1] and tonumber(after[2]) == at then here = tonumber(after[1]) - before end
  local k
  if actual < charged then
    k = charged - actual
    if here < k then k = here end
    k = -k
  else
    local base = 0 -- the member of the newest entry out of the window (lib: sliding_log.lua)
    local cut = fmt('%d', eff - window)
    local anchor = redis.call('ZREVRANGEBYSCORE', key, cut, '-inf', 'LIMIT', 0, 1)[1]
    if anchor then base = tonumber(anchor) end
    k = actual - charged
    if limit - (total - base) < k then k = limit - (total - base) end
    if k < 0 then k = 0 end
  end
  if k == 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', key, sat, '+inf')
  if here == 0 then redis.call('ZADD', key, sat, fmt('%d', before + k)) end
  for i = 1, #after, 2 do
    local m = tonumber(after[i]) + k
    if tonumber(after[i + 1]) ~= at or m > before then redis.call('ZADD', key, after[i + 1], fmt('%d', m)) end
  end
  local top = at
  if newest and newest > top then top = newest end
  redis.call('PEXPIRE', key, pexpire(top + window - now))
  return k
end
