-- math.lua: exact integer arithmetic on Lua's doubles, for integers below 2^53: math.fmod is
-- exact, so a quotient is (a - fmod(a, b)) / b, never a float quotient rounded.
local fmod, fmt = math.fmod, string.format
-- quo is Go's a / b (truncated).
local function quo(a, b) return (a - fmod(a, b)) / b end
-- ceildiv is a / b rounded up, for a >= 0 and b >= 1.
local function ceildiv(a, b)
  local q = quo(a, b)
  if fmod(a, b) > 0 then q = q + 1 end
  return q
end
