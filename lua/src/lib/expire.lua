-- expire.lua: the key expiry of the limit algorithms. Needs margin, the expiry margin (ms)
-- from ARGV, and lib/math.lua.

-- pexpire formats the TTL (ms) of state that matters for another ttl µs (rounded up to a
-- whole ms, as lib/ceildiv.lua does), plus the margin.
local function pexpire(ttl)
  local r = fmod(ttl, MICROS_PER_MILLI)
  local ms = (ttl - r) / MICROS_PER_MILLI + margin
  if r > 0 then ms = ms + 1 end
  return fmt('%d', ms)
end
