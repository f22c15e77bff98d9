-- quo.lua: Go's integer division on Lua's doubles (lib/math.lua, which must be included
-- before); lib/ceildiv.lua rounds up.

-- quo is Go's a / b (truncated).
local function quo(a, b) return (a - fmod(a, b)) / b end
