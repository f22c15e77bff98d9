-- trim_safe.lua: trim a stream towards a length without removing any entry that a consumer
-- group has not yet received and acknowledged (for servers without XTRIM ... ACKED).
--
-- The entries to keep are the newest ARGV[1], and every entry at or after the safe boundary:
-- the lowest, over all groups, of the group's last-delivered id and its oldest pending
-- entry. The script removes at most ARGV[2] entries per call, so that one call never blocks
-- the server for long; the caller repeats while the reply says there is more.
--
-- KEYS[1]  the stream
-- ARGV[1]  entries to keep (maxlen)
-- ARGV[2]  most entries removed by this call
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

if redis.call('EXISTS', stream) == 0 then
  return {0, 0, ''}
end
local len = redis.call('XLEN', stream)
if len <= maxlen then
  return {0, 0, ''}
end
local excess = len - maxlen
local n = math.min(excess, chunk)
-- The (n+1)-th oldest entry is the first one kept by a plain trim of n entries.
local r = redis.call('XRANGE', stream, '-', '+', 'COUNT', string.format('%d', n + 1))
local cut = r[#r][1]

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
local more = 0
if safe ~= nil and idlt(safe, cut) then
  threshold = safe
elseif excess > n then
  more = 1
end
local removed = redis.call('XTRIM', stream, 'MINID', '=', threshold)
if removed == 0 then
  more = 0
end
return {removed, more, threshold}
