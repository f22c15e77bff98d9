-- seed.lua: a limit change that keeps state, exactly core.Limit.SeedState. Needs now,
-- lib/math.lua and lib/ceildiv.lua, and algorithm_seed (the --@seeds directive: each
-- algorithm's core.Algorithm.Seed, one letter per state word: 'd' a TAT, 's' a window's
-- start, 'c' a count).

-- seed_debt carries a TAT from interval t and burst b to interval t2 and burst b2.
local function seed_debt(tat, t, b, t2, b2, prop)
  if tat <= now then return 0 end
  local units = ceildiv(tat - now, t)
  if units > b + 1 then units = b + 1 end
  if prop then units = ceildiv(units * b2, b) end
  if units > b2 then units = b2 end
  return now + units * t2
end

-- seed_count carries a count from limit l to limit l2.
local function seed_count(c, l, l2, prop)
  if c <= 0 then return 0 end
  if c > l then c = l end
  if prop then c = ceildiv(c * l2, l) end
  if c > l2 then c = l2 end
  return c
end

-- seed(roles, v, prop, o1, o2, o3, p1, p2, p3) returns the state value v (words joined by
-- ':', as the algorithms store them) carried from the previous limit's Ints (o1..o3) to the
-- new one's (p1..p3), and whether it holds anything (a TAT ahead of now or a count above
-- 0); nil when v is not a state of roles (foreign state is left alone).
local function seed(roles, v, prop, o1, o2, o3, p1, p2, p3)
  local words = {}
  for w in string.gmatch(v, '[^:]+') do words[#words + 1] = tonumber(w) end
  if #words ~= #roles then return nil end
  local out, held = {}, false
  for i = 1, #roles do
    local r, w = string.sub(roles, i, i), words[i]
    if not w then return nil end
    if r == 'd' then
      w = seed_debt(w, o1, o3, p1, p3, prop)
      held = held or w > 0
    elseif r == 'c' then
      w = seed_count(w, o2, p2, prop)
      held = held or w > 0
    end
    out[i] = fmt('%d', w)
  end
  return table.concat(out, ':'), held
end
