-- ceildiv.lua: integer division rounded up on Lua's doubles (lib/math.lua, which must be
-- included before); lib/quo.lua truncates.

-- ceildiv is a / b rounded up, for a >= 0 and b >= 1.
local function ceildiv(a, b)
  local r = fmod(a, b)
  local q = (a - r) / b
  if r > 0 then q = q + 1 end
  return q
end
