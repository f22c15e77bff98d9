-- expire.lua: the key expiry of the limit algorithms. Needs margin, the expiry margin (ms)
-- from ARGV, and lib/math.lua.

-- pexpire formats the TTL (ms) of state that matters for another ttl µs, plus the margin.
local function pexpire(ttl)
  return fmt('%d', ceildiv(ttl, MICROS_PER_MILLI) + margin)
end
