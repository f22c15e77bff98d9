-- trim_safe.lua: trim a stream towards a length, and of entries older than a maximum age,
-- without removing any entry that a consumer group has not yet received and acknowledged
-- (for servers without XTRIM ... ACKED).
--
-- The entries to keep are the newest ARGV[1], those younger than ARGV[3] ms by the server's
-- clock (the time in their ids), and every entry at or after the safe boundary: the lowest,
-- over all groups, of the group's last-delivered id and its oldest pending entry. The script
-- removes at most ARGV[2] entries per call, so that one call never blocks the server for
-- long; the caller repeats while the reply says there is more.
--
-- KEYS[1]  the stream
-- ARGV[1]  entries to keep (maxlen)
-- ARGV[2]  most entries removed by this call
-- ARGV[3]  most age of entries in ms ("0" or absent: no age bound)
--
-- Reply: {removed, more, threshold}
--   removed    entries removed (XTRIM MINID threshold)
--   more       1 when the stream is still above maxlen and the safe boundary allows more
--   threshold  the MINID used ("" when nothing was removed)
local stream = KEYS[1]
local maxlen = tonumber(ARGV[1])
local chunk = tonumber(ARGV[2])

local function idlt(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if #am ~= #bm then return #am < #bm end
  if am ~= bm then return am < bm end
  if #as ~= #bs then return #as < #bs end
  return as < bs
end

local maxage = tonumber(ARGV[3] or '0')
if redis.call('EXISTS', stream) == 0 then
  return {0, 0, ''}
end
local len = redis.call('XLEN', stream)
if len <= maxlen and maxage <= 0 then
  return {0, 0, ''}
end
-- r[k] is the k-th oldest entry: r[n + 1] is the first one kept by a plain trim of n entries.
local r = redis.call('XRANGE', stream, '-', '+', 'COUNT', string.format('%d', chunk + 1))
local cut = nil
local more = 0
if len > maxlen then
  local n = math.min(len - maxlen, chunk)
  cut = r[n + 1][1]
  if len - maxlen > chunk then
    more = 1
  end
end
if maxage > 0 then
  local t = redis.call('TIME')
  local usec = tonumber(t[2])
  local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000
  local acut = string.format('%d-0', math.max(now - maxage, 0))
  if #r > chunk and idlt(r[chunk + 1][1], acut) then
    acut = r[chunk + 1][1]
    more = 1
  end
  if cut == nil or idlt(cut, acut) then
    cut = acut
  end
end
if cut == nil then
  return {0, 0, ''}
end

local safe = nil
local groups = redis.call('XINFO', 'GROUPS', stream)
for _, g in ipairs(groups) do
  local name, last, pending = nil, '0-0', 0
  for i = 1, #g, 2 do
    local k = g[i]
    if k == 'name' then
      name = g[i + 1]
    elseif k == 'last-delivered-id' then
      last = g[i + 1]
    elseif k == 'pending' then
      pending = g[i + 1]
    end
  end
  local b = last
  if pending > 0 then
    local s = redis.call('XPENDING', stream, name)
    if s[2] and idlt(s[2], b) then
      b = s[2]
    end
  end
  if safe == nil or idlt(b, safe) then
    safe = b
  end
end

local threshold = cut
if safe ~= nil and idlt(safe, cut) then
  threshold = safe
  more = 0
end
local removed = redis.call('XTRIM', stream, 'MINID', '=', threshold)
if removed == 0 then
  more = 0
end
return {removed, more, threshold}
