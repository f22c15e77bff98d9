-- math.lua: exact integer arithmetic on Lua's doubles, for integers below 2^53: math.fmod is
-- exact, so a quotient is (a - fmod(a, b)) / b, never a float quotient rounded. fmt formats
-- numbers ('%d', never tostring). The quotient helpers are lib/quo.lua and lib/ceildiv.lua,
-- included by the scripts that call them: every script-level function statement allocates
-- a closure on every call of the script, so a script that needs only fmod and fmt does not
-- pay for them.
local fmod, fmt = math.fmod, string.format
