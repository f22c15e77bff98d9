-- div.lua: the quotient helpers of lib/math.lua (which must be included before).

-- quo is Go's a / b (truncated).
local function quo(a, b) return (a - fmod(a, b)) / b end
-- ceildiv is a / b rounded up, for a >= 0 and b >= 1.
local function ceildiv(a, b)
  local q = quo(a, b)
  if fmod(a, b) > 0 then q = q + 1 end
  return q
end
