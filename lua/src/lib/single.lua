-- single.lua: the per-key loop of the single-limit scripts. decide(key) returns a key's
-- decision {allowed, limit, remaining, retry_after, reset_after, delay} and, when the
-- request is admitted, the function that records it; each key is decided and recorded in
-- turn, as if requested one after the other at now. The reply is the one key's decision, or
-- the 6 integers of every key in KEYS order; a key holding foreign state fails the call with
-- lib/guard.lua's error (the keys before it in KEYS stay recorded).
--@include lib/guard.lua
local out, single = {}, #KEYS == 1
for i = 1, #KEYS do
  local ok, d, commit = decided(decide, KEYS[i])
  if not ok then return d end
  if commit then commit() end
  if single then return d end
  for k = 1, 6 do out[#out + 1] = d[k] end
end
return out
