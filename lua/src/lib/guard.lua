-- guard.lua: foreign state. guard(f, key, ...) runs f(key, ...), a function that reads key
-- before it writes anything and returns at most two values, under pcall. It returns true and
-- f's results, or, when f failed (key holds another type, or a value in another format:
-- written by another library, an older key schema, the Java implementation, by hand), false
-- and an error reply naming the key and what it holds (lib/foreign.lua), so that no script
-- fails on foreign state with a Lua error from deep inside an algorithm. The limit
-- algorithms use lib/decided.lua, the same guard with a range check of the decision. Needs
-- fmt (lib/math.lua).
--@include lib/foreign.lua

local function guard(f, key, ...)
  local ok, a, b = pcall(f, key, ...)
  if ok then return true, a, b end
  return false, foreign(key, a)
end
