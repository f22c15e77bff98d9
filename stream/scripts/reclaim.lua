-- reclaim.lua: one page of a consumer group's pending-entry scan (crash recovery). Every
-- pending entry that has been idle at least its takeover time is
--   - claimed for ARGV[2] (XCLAIM, which counts a new delivery) when it was delivered fewer
--     than ARGV[5] times, as long as fewer than ARGV[6] entries were claimed in this call;
--   - reported as expired, unclaimed, when it was delivered ARGV[5] times or more (the caller
--     dead-letters it with deadletter.lua);
--   - acknowledged and reported as deleted when it is no longer in the stream (trimmed or
--     deleted while pending; what XAUTOCLAIM reports as deleted ids).
-- Entries a live consumer holds are never idle that long: it refreshes them (lease.lua).
--
-- KEYS[1]  the topic stream
-- ARGV[1]  consumer group
-- ARGV[2]  consumer that claims
-- ARGV[3]  first entry id of the page, inclusive ("-" for the start; "(id" is exclusive)
-- ARGV[4]  most pending entries examined
-- ARGV[5]  max deliveries
-- ARGV[6]  most entries claimed (the caller's free handler slots); 0 claims nothing
-- ARGV[7..] takeover time in ms after delivery 1, 2, ...; the last one applies to later
--          deliveries
--
-- Reply: {next, claimed, expired, deleted}
--   next     the ARGV[3] of the next page, or "" when the scan is complete
--   claimed  {{id, {field, value, ...}, deliveries}, ...} (deliveries counts this claim)
--   expired  {{id, {field, value, ...}, deliveries, owner, idle ms}, ...}
--   deleted  {id, ...}
local stream, group, me = KEYS[1], ARGV[1], ARGV[2]
local count = tonumber(ARGV[4])
local maxd = tonumber(ARGV[5])
local room = tonumber(ARGV[6])
local backoff = {}
local minidle = nil
for i = 7, #ARGV do
  local b = tonumber(ARGV[i])
  backoff[#backoff + 1] = b
  if minidle == nil or b < minidle then
    minidle = b
  end
end
if minidle == nil then
  return redis.error_reply('reclaim.lua: no takeover time given')
end
local p = redis.call('XPENDING', stream, group, 'IDLE', string.format('%d', minidle), ARGV[3], '+', string.format('%d', count))
local claimed, expired, deleted = {}, {}, {}
local next = ''
for _, e in ipairs(p) do
  local id, owner, idle, n = e[1], e[2], e[3], e[4]
  local need = backoff[math.min(math.max(n, 1), #backoff)]
  if idle >= need then
    local r = redis.call('XRANGE', stream, id, id)
    if #r == 0 then
      redis.call('XACK', stream, group, id)
      deleted[#deleted + 1] = id
    elseif n >= maxd then
      expired[#expired + 1] = {id, r[1][2], n, owner, idle}
    elseif #claimed >= room then
      -- no free slot: the rest of the page waits for the next scan
      next = id
      break
    else
      local c = redis.call('XCLAIM', stream, group, me, string.format('%d', need), id)
      if #c > 0 and c[1] then
        claimed[#claimed + 1] = {id, c[1][2], n + 1}
      end
    end
  end
end
if next == '' and #p >= count then
  next = '(' .. p[#p][1]
end
return {next, claimed, expired, deleted}
