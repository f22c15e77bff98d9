-- single.lua: the per-key loop of the single-limit scripts. The script sets decide, an
-- algorithm of algo/, and a1..a4, its arguments after the key (nil where it takes fewer):
-- decide(key, a1, a2, a3, a4) returns a key's decision {allowed, limit, remaining,
-- retry_after, reset_after, delay} and, when the request is admitted, the function that
-- records it. Each key is decided and recorded in turn, as if requested one after the other
-- at now. The reply is the one key's decision, or the 6 integers of every key in KEYS order;
-- a key holding foreign state fails the call with lib/decided.lua's error (the keys before
-- it in KEYS stay recorded). One key, the common call, is decided without the loop and the
-- reply table, and decide is called directly rather than through a wrapper closure.
--@include lib/decided.lua

if #KEYS == 1 then
  local ok, d, commit = decided(decide, KEYS[1], a1, a2, a3, a4)
  if ok and commit then commit() end
  return d
end
local out = {}
for i = 1, #KEYS do
  local ok, d, commit = decided(decide, KEYS[i], a1, a2, a3, a4)
  if not ok then return d end
  if commit then commit() end
  for k = 1, 6 do out[#out + 1] = d[k] end
end
return out
