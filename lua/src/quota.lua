-- quota.lua: leased quota. One call returns what a process did not use of its previous lease
-- on a key, then takes a new lease: a slice of the key's budget, taken from the key's state
-- exactly as a request of that cost would be (core's Step), which the process then admits
-- locally until the lease ends. A take of just the request's cost is a plain admission and
-- no lease. A lease of the token bucket is recorded as taken at its end
-- (the TAT moves to max(TAT, now, end) + k*T), so the units it admits at any time before its
-- end were admissible then and are counted against every later request; a lease of a window
-- algorithm ends with its window at the latest, so the units it admits are counted in the
-- window they are admitted in.
--
-- KEYS[1]  the key's state, in the format of the algorithm's single script: gcra.lua (token
--          bucket), fixed_window.lua (fixed window), sliding_counter.lua (sliding counter)
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  need: the cost of the request that asks for the lease, in [1, limit]
-- ARGV[3]  want: the slice to take, in [need, limit]
-- ARGV[4]  the algorithm's code: 'tb' (token bucket), 'fw' (fixed window), 'sc' (sliding
--          counter)
-- ARGV[5..7]  its parameters: T tau burst ('tb'), W L 0 ('fw', 'sc')
-- ARGV[8]  expiry margin (ms), as in the single scripts
-- ARGV[9]  the longest lease (µs, >= 1)
-- ARGV[10] the unused part of the previous lease to return (0: none)
-- ARGV[11] the used part of the previous lease
-- ARGV[12] the previous lease's end (µs since the Unix epoch; 0: none)
--
-- The return (ARGV[10] > 0) gives back exactly what the lease took and did not admit, so
-- the state is the one a request of the used cost would have left: the token bucket's TAT
-- moves back by r*T (never below end + used*T) while now < end; a window's count goes down
-- by r while the state is still the lease's window (its start is that of end - 1) and now is
-- in it. A return too late, or to a key whose state moved on, gives back nothing: the unused
-- part stays spent.
--
-- The take: a request of cost want if admitted; else of cost remaining (the most admitted
-- now) if remaining >= need; else nothing is taken and the reply is the denial of a request
-- of cost need, exactly the single script's.
--
-- Reply: 9 integers: allowed (1|0), limit, remaining, retry_after (µs), reset_after (µs),
--        delay (always 0), granted (the lease's units, 0 when denied), now (µs), end (µs:
--        the lease ends before it)
-- Errors: 'ERR lease: ...' for malformed arguments; 'ERR lease: foreign state: key ...' for a
--         key holding state this script cannot read (lib/decided.lua); nothing is written then.

--@include lib/prelude.lua
local need, want, alg = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local p1, p2, p3 = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local margin, span = tonumber(ARGV[8]), tonumber(ARGV[9])
local back, used, pend = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
if not (need and want and p1 and p2 and p3 and margin and span and back and used and pend) or
  need < 1 or want < need or span < 1 or back < 0 or used < 0 or pend < 0 then
  return redis.error_reply('ERR lease: bad arguments')
end
local limit = p2
if alg == 'tb' then limit = p3 elseif alg ~= 'fw' and alg ~= 'sc' then
  return redis.error_reply('ERR lease: unsupported algorithm')
end
if want > limit then return redis.error_reply('ERR lease: cost out of range') end
local n = want
--@include lib/math.lua
--@include lib/quo.lua
--@include lib/ceildiv.lua
--@include lib/expire.lua
--@include lib/decided.lua
--@include algo/gcra.lua
--@include algo/fixed_window.lua
--@include algo/sliding_counter.lua

local key = KEYS[1]

-- exact reports whether x is a number the algorithms store: an integer in [0, 2^53).
local function exact(x)
  return x ~= nil and x >= 0 and x < 9007199254740992 and fmod(x, 1) == 0
end

-- give_back returns the unused part of the previous lease. State it cannot read, or out of
-- range, is left as it is (decide then reports it).
local function give_back()
  if alg == 'tb' then
    if now >= pend then return end
    local t = tonumber(redis.call('GET', key) or 0)
    if not exact(t) then return end
    local to = t - back * p1
    if to < pend + used * p1 then to = pend + used * p1 end
    if to < t then redis.call('SET', key, fmt('%d', to), 'PX', pexpire(to - now)) end
    return
  end
  local v = redis.call('GET', key)
  if not v then return end
  local s, c, rest = string.match(v, '^(%d+):(%d+)(.*)$')
  local start, count = tonumber(s), tonumber(c)
  if alg == 'fw' and rest ~= '' or alg == 'sc' and not exact(tonumber(string.match(rest or '', '^:(%d+)$'))) then return end
  if not (exact(start) and exact(count)) or start ~= (pend - 1) - fmod(pend - 1, p1) or now >= start + p1 or now < start then return end
  count = count - back
  if count < 0 then count = 0 end
  local ttl = start + p1 - now
  if alg == 'sc' then ttl = ttl + p1 end
  redis.call('SET', key, fmt('%d:%d', start, count) .. rest, 'PX', pexpire(ttl))
end

-- decide decides a request of cost n (the script's n) on key.
local function decide()
  if alg == 'tb' then return decided(gcra, key, p1, p2, p3, false) end
  if alg == 'fw' then return decided(fixed_window, key, p1, p2) end
  return decided(sliding_counter, key, p1, p2)
end

-- take records the admitted lease of n units with decision d and returns its end.
local function take(d, commit)
  if n == need then
    commit() -- no units beyond the request's own: a plain admission, and no lease
    return now
  end
  if alg == 'tb' then
    local span_tb = span
    if span_tb > p2 then span_tb = p2 end
    local t = tonumber(redis.call('GET', key) or 0)
    local e = now + span_tb
    if t < e then t = e end
    local tat = t + n * p1
    redis.call('SET', key, fmt('%d', tat), 'PX', pexpire(tat - now))
    return e
  end
  commit()
  -- The window of the lease: that of max(now, start), which d's reset_after ends (for the
  -- sliding counter, the window after it).
  local wend = now + d[5]
  if alg == 'sc' then wend = wend - p1 end
  local e = now + span
  if e > wend then e = wend end
  return e
end

-- A key holding foreign state fails the give-back (a Redis or Lua error, caught); decide then
-- reports it.
if back > 0 and pend > 0 then pcall(give_back) end

local ok, d, commit = decide()
if not ok then return d end
if d[1] ~= 1 and d[3] >= need then
  n = d[3]
  ok, d, commit = decide()
  if not ok then return d end
end
if d[1] ~= 1 then
  n = need
  ok, d = decide()
  if not ok then return d end
  return {d[1], d[2], d[3], d[4], d[5], 0, 0, now, now}
end
local e = take(d, commit)
return {1, d[2], d[3], 0, d[5], 0, n, now, e}
