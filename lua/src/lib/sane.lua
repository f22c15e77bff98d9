-- sane.lua: the range check of a decision table, used by lib/decided.lua and by the scripts
-- that compute a decision outside it (the Java-layout scripts).

-- sane reports whether a decision {allowed, limit, remaining, retry, reset, delay} is one
-- the algorithms produce on their own state: allowed 0 or 1, the others below 2^53 in
-- magnitude and all but remaining >= 0 (decided raises a negative remaining to 0). A stored
-- value that parses but is out of range (a huge number, inf, nan: every comparison with nan
-- is false) gives one that is not, and nothing is recorded. Straight comparisons: a loop
-- costs several times more per decision.
local function sane(d)
  local a, limit, rem, retry, reset, delay = d[1], d[2], d[3], d[4], d[5], d[6]
  local big = 9007199254740992
  return (a == 0 or a == 1) and limit >= 0 and limit < big and rem > -big and rem < big and
    retry >= 0 and retry < big and reset >= 0 and reset < big and delay >= 0 and delay < big
end
