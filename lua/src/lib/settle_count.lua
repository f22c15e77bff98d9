-- settle_count.lua: the change a settlement applies to a count of the window algorithms,
-- as core's adjustCount. Needs actual (the reservation's actual cost).

-- settle_count(count, charged, limit) is the change actual - charged applied to count: a
-- refund of at most count, a charge up to limit at most.
local function settle_count(count, charged, limit)
  if actual < charged then
    local k = charged - actual
    if count < k then k = count end
    return -k
  end
  local k = actual - charged
  if limit - count < k then k = limit - count end
  if k < 0 then k = 0 end
  return k
end
